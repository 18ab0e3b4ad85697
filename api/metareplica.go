package api

import (
	"context"
	"fmt"
	"time"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

// This file is how handlers consult the node's replica of the metadata
// group (topics, users, ACLs) so that what one node acknowledged, every
// node serves: a hit is answered at once, and a miss (no such topic, no
// ACL that allows the request) only after a read barrier brought the
// replica up to the leader's state as of the request's arrival. A node
// whose replica no barrier confirmed within
// kcoord.metadata.max.staleness.ms serves an authenticated client only
// after one, and closes the connection when it cannot have one.

// MetadataReplica is the node's replica of the metadata group as handlers
// consult it (the server's metaReads, over cluster.Node). Connection
// goroutines call it concurrently.
type MetadataReplica interface {
	// EnsureFresh returns nil when the replica may be trusted to allow a
	// request (a barrier succeeded within
	// kcoord.metadata.max.staleness.ms), running one first when it may
	// not, and fails when that fails. Cheap while fresh.
	EnsureFresh(ctx context.Context) error
	// SyncSince returns once the replica holds every change acknowledged
	// before since (a read barrier; calls are coalesced), or with an
	// error when the leader cannot be reached. It blocks at most a
	// bound of its own, or until ctx ends.
	SyncSince(ctx context.Context, since time.Time) error
	// ConfirmEverywhere returns once every live replica holds every
	// change the leader had applied (cluster.Node.ConfirmMetadataEverywhere):
	// a removal that found nothing to remove calls it, so that its answer
	// still means "in effect on every node".
	ConfirmEverywhere(ctx context.Context) error
}

// errStaleMetadata closes the connection of a request that reached a node
// whose replica of the metadata group could not be brought up to date:
// its client goes to another node, where a revoked ACL or user is known.
var errStaleMetadata = fmt.Errorf("api: this node cannot reach the metadata leader to confirm its users and ACLs")

// requestStart is when the request began: every metadata change
// acknowledged before it must be visible to it.
func requestStart(rc *transport.RequestContext) time.Time {
	if rc == nil || rc.Received.IsZero() {
		return time.Now()
	}
	return rc.Received
}

// syncMetadata runs the read barrier for rc's request before a miss is
// answered, and reports whether the replica may have learned something
// (false without a replica to sync, or when the barrier failed: the miss
// stands, as Kafka answers from its broker's cache). One request's many
// misses cost one barrier: after the first, the rest return at once.
func (h *Handlers) syncMetadata(ctx context.Context, rc *transport.RequestContext) bool {
	if h.cfg.Metadata == nil {
		return false
	}
	if err := h.cfg.Metadata.SyncSince(ctx, requestStart(rc)); err != nil {
		h.logger.Debug("metadata read barrier failed; answering from this replica", "error", err)
		return false
	}
	return true
}

// confirmEverywhere is ConfirmEverywhere; nil without a replica (tests).
func (h *Handlers) confirmEverywhere(ctx context.Context) error {
	if h.cfg.Metadata == nil {
		return nil
	}
	return h.cfg.Metadata.ConfirmEverywhere(ctx)
}

// lookupTopic is the registered topic name, from this node's replica; a
// name it does not hold is looked up again after a read barrier, so that
// a topic created through any node before the request is found. Not with
// kcoord.offsets.commit.unregistered.topics.enable: there most topics are
// the data plane's and never registered, and every Fetch or commit of
// them would cost a round trip to the metadata leader.
func (h *Handlers) lookupTopic(ctx context.Context, rc *transport.RequestContext, name string) (fsm.Topic, bool) {
	if t, ok := h.registry.Topic(name); ok {
		return t, true
	}
	if h.cfg.CommitUnregisteredTopics || !h.syncMetadata(ctx, rc) {
		return fsm.Topic{}, false
	}
	return h.registry.Topic(name)
}

// freshForAuthorization is the guard every request of a node that
// authorizes passes first: a replica no barrier confirmed within
// kcoord.metadata.max.staleness.ms may hold a grant the others revoked, so
// it is brought up to date before the request is served; if it cannot be,
// the request fails with errStaleMetadata, which closes the connection.
func (h *Handlers) freshForAuthorization(ctx context.Context) error {
	if h.cfg.Authorizer == nil || h.cfg.Metadata == nil {
		return nil
	}
	if err := h.cfg.Metadata.EnsureFresh(ctx); err != nil {
		return fmt.Errorf("%w: %v", errStaleMetadata, err)
	}
	return nil
}
