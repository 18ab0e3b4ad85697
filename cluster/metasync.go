package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// SyncMetadata returns once this node's replica of the metadata group has
// applied every entry the leader had applied when the call began, so that
// a read of it that follows sees every change acknowledged before (a read
// barrier, as DeleteAcls needs to match its filters against the
// controller's ACLs, not a lagging copy). On the leader it confirms the
// leadership with a quorum; elsewhere it asks the leader over the admin
// stream for its applied index and waits for the local replica to reach
// it. Called by the Kafka handlers' goroutines; it blocks at most until
// ctx ends, and fails with raft.ErrNotLeader when no leader is reachable.
func (n *Node) SyncMetadata(ctx context.Context) error {
	if n.closed.Load() {
		return raft.ErrRaftShutdown
	}
	if n.meta.IsLeader() {
		_, err := n.metaIndexHere()
		return err
	}
	b, ok := n.MetaLeader()
	if !ok {
		return fmt.Errorf("%w: no metadata leader is known", raft.ErrNotLeader)
	}
	addr, ok := n.members.raftAddrs(n.mux.deaths)[b.NodeID]
	if !ok {
		return fmt.Errorf("%w: the metadata leader, node %d, is not reachable", raft.ErrNotLeader, b.NodeID)
	}
	resp, err := n.adminCall(ctx, addr, adminRequest{Op: "meta-index"})
	if err == nil {
		err = adminError(resp)
	}
	if err != nil {
		return fmt.Errorf("%w: asking the metadata leader, node %d, for its index: %v", raft.ErrNotLeader, b.NodeID, err)
	}
	for n.meta.Raft.AppliedIndex() < resp.Index {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: this replica of the metadata group did not reach index %d", ErrApplyTimeout, resp.Index)
		case <-time.After(metaSyncPoll):
		}
	}
	return nil
}

// metaSyncPoll is how often SyncMetadata looks at the local applied index.
const metaSyncPoll = 5 * time.Millisecond

// metaIndexHere is the metadata leader's applied index once a quorum
// confirmed its leadership. Called by serveAdminConn and SyncMetadata.
func (n *Node) metaIndexHere() (uint64, error) {
	if !n.meta.IsLeader() {
		return 0, ErrNotMetaLeader
	}
	if err := n.meta.Raft.VerifyLeader().Error(); err != nil {
		return 0, err
	}
	return n.meta.Raft.AppliedIndex(), nil
}
