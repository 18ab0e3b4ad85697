package server

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// metaReads is this node's replica of the metadata group as requests
// consult it: a miss (no such topic, no such user, no ACL that allows) is
// answered only after a read barrier brought the replica up to the
// leader's (cluster.Node.SyncMetadataSince), and a replica that has not
// heard from the leader for kcoord.metadata.max.staleness.ms is not
// trusted to allow anything before one (cluster.Node.MetadataFresh). It
// is the api.MetadataReplica of the handlers and backs the SASL lookup.
// Connection goroutines call it; a barrier blocks at most timeout.
type metaReads struct {
	s            *Server
	maxStaleness time.Duration
	timeout      time.Duration
}

// Fresh reports whether the replica may be trusted without a barrier:
// always on a node whose cluster node has not started (nothing is
// served then).
func (m *metaReads) Fresh() bool {
	n := m.s.raftNode.Load()
	return n == nil || n.MetadataFresh(m.maxStaleness)
}

// SyncSince returns once the replica holds every metadata change
// acknowledged before since, at most timeout or until ctx ends.
func (m *metaReads) SyncSince(ctx context.Context, since time.Time) error {
	n := m.s.raftNode.Load()
	if n == nil {
		return raft.ErrRaftShutdown
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return n.SyncMetadataSince(ctx, since)
}

// lookup runs find against the replica as a login must: after a barrier
// when the replica is not fresh, and again after one when find misses.
// A barrier that fails counts as a miss: a node that cannot reach the
// metadata leader lets no one in on what may be a deleted credential.
func (m *metaReads) lookup(find func() bool) bool {
	start := time.Now()
	if !m.Fresh() {
		if err := m.SyncSince(context.Background(), start); err != nil {
			m.s.logger.Debug("a login waits for the metadata replica, which cannot reach the leader", "error", err)
			return false
		}
	}
	if find() {
		return true
	}
	if err := m.SyncSince(context.Background(), start); err != nil {
		return false
	}
	return find()
}
