package cluster

import (
	"context"
	"time"
)

// awaitLeaderRecheck is how often AwaitLeaderOf looks again without being
// woken: a leader learned through gossip fires no routing change.
const awaitLeaderRecheck = 25 * time.Millisecond

// AwaitLeaderOf is LeaderOf, except that when this node names no leader
// for the shard yet it waits, until ctx ends, for one to be known: an
// election under way elsewhere, or this node fenced for its disk and
// waiting for gossip to name the shard's new leader. FindCoordinator calls
// it (bounded by kcoord.group.election.hold.ms), so that a client asking
// in the moment a coordinator moves is told where it went instead of
// COORDINATOR_NOT_AVAILABLE: segmentio/kafka-go leaves its group on that
// answer, and its member rejoins as a new one, rebalancing the group.
// Called from request goroutines; it blocks until a leader is known, ctx
// ends or the node shuts down.
func (n *Node) AwaitLeaderOf(ctx context.Context, shard int32) (Broker, bool) {
	if b, ok := n.LeaderOf(shard); ok || n.startedShard(shard) == nil || ctx.Done() == nil || ctx.Err() != nil {
		return b, ok
	}
	recheck := time.NewTicker(awaitLeaderRecheck)
	defer recheck.Stop()
	for {
		select {
		case <-n.routing.wait():
		case <-recheck.C:
		case <-ctx.Done():
			return n.LeaderOf(shard)
		case <-n.stop:
			return Broker{}, false
		}
		if b, ok := n.LeaderOf(shard); ok {
			return b, ok
		}
	}
}
