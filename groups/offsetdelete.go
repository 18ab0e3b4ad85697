package groups

import (
	"context"
	"sync"

	"github.com/kcoord/kcoord/fsm"
)

// Offset deletion (KIP-496). It decides under the group lock and enqueues
// its OffsetDelete there, so it is ordered with the group's commits.

// DeleteOffsets serves OffsetDelete (KIP-496) for one group. An Empty group
// loses any partition; a group of Kafka consumers (a classic group of
// protocol type "consumer", rebalancing or Stable, or a KIP-848 consumer
// group) keeps the partitions of topics its members subscribe to
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
	return dispatch(c, groupID, lookupMode{}, kindHandlers[map[fsm.TopicPartition]error]{
		classic: func(g *classicGroup) (map[fsm.TopicPartition]error, error) {
			return c.deleteClassicOffsets(g, partitions)
		},
		consumer: func(g *consumerGroup) (map[fsm.TopicPartition]error, error) {
			return c.deleteConsumerOffsets(g, partitions)
		},
	})
}

// deleteClassicOffsets serves OffsetDelete for a classic group (nil:
// none): an Empty group loses any partition, a group of Kafka consumers
// keeps its members' topics, any other group with members refuses. Called
// with g.mu held; unlocks it and waits for the write.
func (c *Coordinator) deleteClassicOffsets(g *classicGroup, partitions []fsm.TopicPartition) (map[fsm.TopicPartition]error, error) {
	if g == nil {
		return nil, ErrGroupIDNotFound
	}
	var subscribed func(topic string) bool
	switch {
	case g.state == Dead:
		g.mu.Unlock()
		return nil, ErrGroupIDNotFound
	case g.state == Empty:
	case g.protocolType == clientProtocolType:
		topics, known := g.subscribedTopics()
		subscribed = func(topic string) bool { return !known || topics[topic] }
	default:
		g.mu.Unlock()
		return nil, ErrNonEmptyGroup
	}
	return c.deleteOffsets(&g.mu, g.id, partitions, subscribed, func(eligible []fsm.TopicPartition) {
		g.removeIfEmpty(remainingAfter(c.state.Offsets(g.id), eligible))
	}), nil
}

// deleteConsumerOffsets serves OffsetDelete for a consumer group (nil: it
// went meanwhile): offsets of a topic a member subscribes to are
// ErrGroupSubscribedToTopic, the rest are deleted (Kafka's
// validateOffsetDelete checks nothing more). Called with g.mu held;
// unlocks it and waits for the write.
func (c *Coordinator) deleteConsumerOffsets(g *consumerGroup, partitions []fsm.TopicPartition) (map[fsm.TopicPartition]error, error) {
	if g == nil {
		return nil, ErrGroupIDNotFound
	}
	subscribed := g.subscribedTopicNames(c.topicsView())
	return c.deleteOffsets(&g.mu, g.id, partitions, func(topic string) bool { return subscribed[topic] }, nil), nil
}

// deleteOffsets is the offset deletion of either kind: partitions of a
// topic subscribed reports (nil: none) are ErrGroupSubscribedToTopic, and
// the others are deleted in one OffsetDelete enqueued under mu (held by
// the caller), after which enqueued (if set) runs with them, still under
// mu. It unlocks mu, waits for the write and returns each partition's
// outcome. Called from a handler goroutine.
func (c *Coordinator) deleteOffsets(mu *sync.Mutex, id string, partitions []fsm.TopicPartition, subscribed func(topic string) bool, enqueued func(eligible []fsm.TopicPartition)) map[fsm.TopicPartition]error {
	out := make(map[fsm.TopicPartition]error, len(partitions))
	var eligible []fsm.TopicPartition
	for _, tp := range partitions {
		if subscribed != nil && subscribed(tp.Topic) {
			out[tp] = ErrGroupSubscribedToTopic
		} else {
			eligible = append(eligible, tp)
		}
	}
	f := doneFuture
	if len(eligible) > 0 {
		f = c.write(&fsm.OffsetDelete{GroupID: id, Partitions: eligible})
		if enqueued != nil {
			enqueued(eligible)
		}
	}
	mu.Unlock()
	err := waitWrite(f)
	for _, tp := range eligible {
		out[tp] = err
	}
	return out
}

// HasOffset reports whether groupID has an offset stored for tp in the
// shard's applied state, as OffsetDelete asks of a topic the registry no
// longer holds. Called from handler goroutines; it never blocks.
func (c *Coordinator) HasOffset(groupID string, tp fsm.TopicPartition) bool {
	_, ok := c.state.Offset(groupID, tp)
	return ok
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
