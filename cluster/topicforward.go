package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// ApplyTopicChange applies cmd, an encoded fsm.TopicCreate or
// fsm.TopicDelete, to the metadata group and returns the FSM's answer
// (fsm.ErrTopicExists, fsm.ErrTopicNotFound) or the failure. On the
// metadata leader it applies here; elsewhere it forwards cmd to the leader
// over the admin stream, as a KRaft broker forwards CreateTopics to its
// controller (KIP-590), so CreateTopics and DeleteTopics work on any node.
// Without a known, reachable leader it fails with raft.ErrNotLeader, which
// the Kafka handlers answer as NOT_CONTROLLER. Called by the Kafka
// handlers' goroutines; it blocks until the leader answered, at most
// timeout (and adminTimeout when forwarded).
func (n *Node) ApplyTopicChange(ctx context.Context, cmd []byte, timeout time.Duration) error {
	if err := topicChange(cmd); err != nil {
		return err
	}
	if n.closed.Load() {
		return raft.ErrRaftShutdown
	}
	if n.meta.IsLeader() {
		_, err := n.meta.Apply(ctx, cmd, timeout)
		return err
	}
	b, ok := n.MetaLeader()
	if !ok {
		return fmt.Errorf("%w: no metadata leader is known to forward the topic change to", raft.ErrNotLeader)
	}
	addr, ok := n.members.raftAddrs(n.mux.deaths)[b.NodeID]
	if !ok {
		return fmt.Errorf("%w: the metadata leader, node %d, is not reachable", raft.ErrNotLeader, b.NodeID)
	}
	resp, err := n.adminCall(ctx, addr, adminRequest{Op: "topic-change", Command: cmd, TimeoutMs: timeout.Milliseconds()})
	if err != nil {
		return fmt.Errorf("%w: forwarding the topic change to the metadata leader, node %d: %v", raft.ErrNotLeader, b.NodeID, err)
	}
	err = adminError(resp)
	if errors.Is(err, ErrNotMetaLeader) {
		// Leadership moved meanwhile: the client looks again, as after
		// NOT_CONTROLLER from Kafka.
		return fmt.Errorf("%w: %v", raft.ErrNotLeader, err)
	}
	return err
}

// topicChange checks that cmd is a command ApplyTopicChange may apply:
// a peer's forwarded command reaches the metadata group only if it is one.
func topicChange(cmd []byte) error {
	if len(cmd) == 0 {
		return errors.New("cluster: an empty topic change")
	}
	switch fsm.CommandType(cmd[0]) {
	case fsm.TopicCreateType, fsm.TopicDeleteType:
		return nil
	}
	return fmt.Errorf("cluster: command type %d is not a topic change", cmd[0])
}

// applyTopicChangeHere serves a forwarded topic change on the metadata
// leader. Called by serveAdminConn.
func (n *Node) applyTopicChangeHere(cmd []byte, timeoutMs int64) error {
	if err := topicChange(cmd); err != nil {
		return err
	}
	if !n.meta.IsLeader() {
		return ErrNotMetaLeader
	}
	timeout := min(time.Duration(timeoutMs)*time.Millisecond, adminTimeout)
	if timeout <= 0 {
		timeout = adminTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := n.meta.Apply(ctx, cmd, timeout)
	return err
}
