package groups

import (
	"context"

	"github.com/kcoord/kcoord/fsm"
)

// Offset deletion (KIP-496). It decides under the group lock and enqueues
// its OffsetDelete there, so it is ordered with the group's commits.

// DeleteOffsets serves OffsetDelete (KIP-496) for one group. An Empty group
// loses any partition; a consumer group that is rebalancing or Stable keeps
// the partitions of topics its members subscribe to
// (ErrGroupSubscribedToTopic); other groups with members refuse
// (ErrNonEmptyGroup). The map holds each partition's outcome when err is
// nil. Called from a connection's handler goroutine; waits for Raft, and a
// hold for a settling shard ends with ctx.
func (c *Coordinator) DeleteOffsets(ctx context.Context, groupID string, partitions []fsm.TopicPartition) (map[fsm.TopicPartition]error, error) {
	if groupID == "" {
		return nil, ErrInvalidGroupID
	}
	if _, err := c.serving(ctx); err != nil {
		return nil, err
	}
	g, err := c.lockGroup(groupID, false)
	if err == errConsumerGroup {
		cg, err := c.lockConsumer(groupID, false)
		if isClassicGroup(err) {
			return c.DeleteOffsets(ctx, groupID, partitions) // downgraded meanwhile
		}
		if err != nil {
			return nil, err
		}
		if cg == nil {
			return nil, ErrGroupIDNotFound
		}
		return c.deleteConsumerOffsets(cg, partitions), nil
	}
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, ErrGroupIDNotFound
	}
	out := make(map[fsm.TopicPartition]error, len(partitions))
	var eligible []fsm.TopicPartition
	switch {
	case g.state == Dead:
		g.mu.Unlock()
		return nil, ErrGroupIDNotFound
	case g.state == Empty:
		eligible = partitions
	case g.protocolType == consumerProtocolType:
		subscribed, known := g.subscribedTopics()
		for _, tp := range partitions {
			if !known || subscribed[tp.Topic] {
				out[tp] = ErrGroupSubscribedToTopic
			} else {
				eligible = append(eligible, tp)
			}
		}
	default:
		g.mu.Unlock()
		return nil, ErrNonEmptyGroup
	}
	f := doneFuture
	if len(eligible) > 0 {
		f = c.write(&fsm.OffsetDelete{GroupID: g.id, Partitions: eligible})
		g.removeIfEmpty(remainingAfter(c.state.Offsets(g.id), eligible))
	}
	g.mu.Unlock()
	err = waitWrite(f)
	for _, tp := range eligible {
		out[tp] = err
	}
	return out, nil
}

// remainingAfter counts the stored offsets that deleting partitions leaves.
func remainingAfter(stored map[fsm.TopicPartition]fsm.Offset, partitions []fsm.TopicPartition) int {
	n := len(stored)
	for _, tp := range partitions {
		if _, ok := stored[tp]; ok {
			n--
		}
	}
	return n
}
