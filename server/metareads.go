package server

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// metaReads is this node's replica of the metadata group as requests
// consult it: a miss (no such topic, no such user, no ACL that allows) is
// answered only after a read barrier brought the replica up to the
// leader's (cluster.Node.SyncMetadataSince), and a replica no barrier
// confirmed within kcoord.metadata.max.staleness.ms is not trusted to
// allow anything before one (cluster.Node.MetadataFresh). It
// is the api.MetadataReplica of the handlers and backs the SASL lookup.
// Connection goroutines call it; a barrier blocks at most timeout.
type metaReads struct {
	s            *Server
	maxStaleness time.Duration
	timeout      time.Duration
}

// EnsureFresh returns nil once the replica may be trusted to allow a
// request (cluster.Node.EnsureMetadataFresh), at most timeout. Every
// request of a node that authenticates calls it.
func (m *metaReads) EnsureFresh(ctx context.Context) error {
	n := m.s.raftNode.Load()
	if n == nil {
		return apiError(raft.ErrRaftShutdown)
	}
	return apiError(n.EnsureMetadataFresh(ctx, m.maxStaleness, m.timeout))
}

// SyncSince returns once the replica holds every metadata change
// acknowledged before since, at most timeout or until ctx ends.
func (m *metaReads) SyncSince(ctx context.Context, since time.Time) error {
	n := m.s.raftNode.Load()
	if n == nil {
		return apiError(raft.ErrRaftShutdown)
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return apiError(n.SyncMetadataSince(ctx, since))
}

// ConfirmEverywhere returns once every live replica holds every change
// the metadata leader had applied, at most timeout.
func (m *metaReads) ConfirmEverywhere(ctx context.Context) error {
	n := m.s.raftNode.Load()
	if n == nil {
		return apiError(raft.ErrRaftShutdown)
	}
	return apiError(n.ConfirmMetadataEverywhere(ctx, m.timeout))
}

// lookup runs find against the replica as a login must: after a barrier
// when the replica is not fresh, and again after one when find misses. A
// barrier that fails is the error: a node that cannot reach the metadata
// leader cannot tell a wrong password from a deleted user or one created
// elsewhere, and the login's connection closes without an answer
// (auth.ErrCredentialsUnavailable).
// since is when the login began: one login's misses (PLAIN looks for two
// mechanisms) share one barrier.
func (m *metaReads) lookup(since time.Time, find func() bool) (bool, error) {
	if err := m.EnsureFresh(context.Background()); err != nil {
		return false, err
	}
	if find() {
		return true, nil
	}
	if err := m.SyncSince(context.Background(), since); err != nil {
		return false, err
	}
	return find(), nil
}
