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
	cmd, err := topicChange(cmd)
	if err != nil {
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
	switch {
	case errors.Is(err, errAdminDial):
		return fmt.Errorf("%w: forwarding the topic change to the metadata leader, node %d: %v", raft.ErrNotLeader, b.NodeID, err)
	case err != nil:
		// Sent, but no answer: the leader may have applied it.
		return fmt.Errorf("%w: the metadata leader, node %d, did not answer the topic change (it may be applied): %v", ErrApplyTimeout, b.NodeID, err)
	}
	err = adminError(resp)
	if errors.Is(err, ErrNotMetaLeader) {
		// Leadership moved meanwhile: the client looks again, as after
		// NOT_CONTROLLER from Kafka.
		return fmt.Errorf("%w: %v", raft.ErrNotLeader, err)
	}
	return err
}

// topicChange checks that cmd is a command ApplyTopicChange may apply and
// returns it in this node's encoding: a peer's forwarded command reaches
// the metadata group only if it decodes here as a TopicCreate of a named
// topic with partitions or a TopicDelete of a named topic. A body this
// node cannot decode (a malformed one, a newer version during an upgrade)
// is refused here, for every replica would panic applying it.
func topicChange(cmd []byte) ([]byte, error) {
	// The type first: only these two are decoded for a peer at all.
	if len(cmd) == 0 || fsm.CommandType(cmd[0]) != fsm.TopicCreateType && fsm.CommandType(cmd[0]) != fsm.TopicDeleteType {
		return nil, errors.New("cluster: a forwarded command that is not a topic change")
	}
	c, err := fsm.Decode(cmd)
	if err != nil {
		return nil, fmt.Errorf("cluster: a topic change that does not decode: %w", err)
	}
	switch c := c.(type) {
	case *fsm.TopicCreate:
		if c.Topic.Name == "" || c.Topic.Partitions < 1 {
			return nil, fmt.Errorf("cluster: a topic change creating %q with %d partitions", c.Topic.Name, c.Topic.Partitions)
		}
	case *fsm.TopicDelete:
		if c.Name == "" {
			return nil, errors.New("cluster: a topic change deleting no topic")
		}
	default:
		return nil, fmt.Errorf("cluster: command %T is not a topic change", c)
	}
	return fsm.Encode(c)
}

// applyTopicChangeHere serves a forwarded topic change on the metadata
// leader. Called by serveAdminConn.
func (n *Node) applyTopicChangeHere(cmd []byte, timeoutMs int64) error {
	cmd, err := topicChange(cmd)
	if err != nil {
		return err
	}
	if !n.meta.IsLeader() {
		return ErrNotMetaLeader
	}
	// Answer within the caller's read deadline (adminTimeout), so that it
	// hears a timeout as one rather than as a lost connection.
	budget := adminTimeout - time.Second
	timeout := min(time.Duration(timeoutMs)*time.Millisecond, budget)
	if timeout <= 0 {
		timeout = budget
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = n.meta.Apply(ctx, cmd, timeout)
	return err
}
