package groups

import (
	"context"
	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// Offset deletion and expiry. Both decide under the group lock and enqueue
// their OffsetDelete there, so they are ordered with the group's commits;
// partitions with a commit in flight are never expired.

// DeleteOffsets serves OffsetDelete (KIP-496) for one group. An Empty group
// loses any partition; a consumer group that is rebalancing or Stable keeps
// the partitions of topics its members subscribe to
// (ErrGroupSubscribedToTopic); other groups with members refuse
// (ErrNonEmptyGroup). The map holds each partition's outcome when err is
// nil. Called from a connection's handler goroutine; waits for Raft.
func (c *Coordinator) DeleteOffsets(groupID string, partitions []fsm.TopicPartition) (map[fsm.TopicPartition]error, error) {
	if groupID == "" {
		return nil, ErrInvalidGroupID
	}
	if _, err := c.serving(context.Background()); err != nil {
		return nil, err
	}
	g, err := c.lockGroup(groupID, false)
	if err == errConsumerGroup {
		cg, err := c.lockConsumer(groupID, false)
		if isClassicGroup(err) {
			return c.DeleteOffsets(groupID, partitions) // downgraded meanwhile
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

// removeIfEmpty deletes an Empty group that has no offsets left (remaining
// stored, no commit in flight, no pending member), as Kafka's
// cleanupGroupMetadata does; it reports whether it did. Called with g.mu
// held, after the offsets' deletion was enqueued.
func (g *group) removeIfEmpty(remaining int) bool {
	if g.state != Empty || remaining > 0 || len(g.pending) > 0 || len(g.pendingCommits) > 0 {
		return false
	}
	g.transition(Dead)
	g.closed = true
	if _, stored := g.c.state.Group(g.id); stored || g.c.state.HasOffsets(g.id) {
		g.logWrite(g.c.write(&fsm.GroupDelete{GroupID: g.id}), "removing an empty group", nil)
	}
	g.c.forget(g)
	g.c.logger.Info("empty group removed", "group", g.id)
	return true
}

// ExpireOffsets removes the offsets whose retention ran out, by KIP-211's
// rules, and Empty groups left with no offsets (Kafka's
// cleanupGroupMetadata). now is the leader's clock in Unix milliseconds and
// retention is offsets.retention.minutes in milliseconds. The server's
// retention loop calls it every offsets.retention.check.interval.ms on the
// shard leader; the deletions go through Raft without being waited for.
// It returns how many offsets and groups it removed.
func (c *Coordinator) ExpireOffsets(now, retention int64) (offsets, groups int) {
	if !c.Active() || c.Check(context.Background()) != nil { // a shard led elsewhere: no hold, no round trip
		return 0, 0
	}
	c.mu.RLock()
	all := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		all = append(all, g)
	}
	c.mu.RUnlock()
	for _, g := range all {
		n, removed := g.expire(now, retention)
		offsets += n
		if removed {
			groups++
		}
	}
	n, removed := c.expireConsumers(now, retention)
	return offsets + n, groups + removed
}

// expire runs the retention rules for one group; removed reports that the
// group itself was deleted.
func (g *group) expire(now, retention int64) (n int, removed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.state == Dead {
		return 0, false
	}
	stored := g.c.state.Offsets(g.id)
	expired := g.expiredOffsets(stored, now, retention)
	if len(expired) > 0 {
		n := uint64(len(expired))
		g.logWrite(g.c.write(&fsm.OffsetDelete{GroupID: g.id, Partitions: expired}), "expiring offsets", func() {
			g.c.offsetsExpired.Add(n) // counted once committed, not when asked for
		})
		g.c.logger.Info("offsets expired", "group", g.id, "partitions", len(expired))
	}
	return len(expired), g.removeIfEmpty(len(stored) - len(expired))
}

// expiredOffsets picks the partitions to expire (Kafka's
// GroupMetadata.removeExpiredOffsets): in an Empty group, everything once
// the group has been Empty for the retention; in a Stable consumer group,
// partitions of topics nobody subscribes to, by their commit time; in a
// group without a protocol type (offsets only), by commit time. An explicit
// expiry time (OffsetCommit v1–v4) wins. Called with g.mu held.
func (g *group) expiredOffsets(stored map[fsm.TopicPartition]fsm.Offset, now, retention int64) []fsm.TopicPartition {
	var base func(fsm.Offset) int64
	var subscribed map[string]bool
	switch {
	case g.protocolType != "" && g.state == Empty:
		base = func(fsm.Offset) int64 { return g.stateTimestamp }
	case g.protocolType == consumerProtocolType && g.state == Stable:
		topics, ok := g.subscribedTopics()
		if !ok {
			return nil
		}
		subscribed = topics
		base = func(o fsm.Offset) int64 { return o.CommitTimestamp }
	case g.protocolType == "":
		base = func(o fsm.Offset) int64 { return o.CommitTimestamp }
	default:
		return nil
	}
	var out []fsm.TopicPartition
	for tp, o := range stored {
		if subscribed[tp.Topic] || g.pendingCommits[tp] > 0 {
			continue
		}
		if o.ExpireTimestamp >= 0 && now >= o.ExpireTimestamp || o.ExpireTimestamp < 0 && now-base(o) >= retention {
			out = append(out, tp)
		}
	}
	return out
}

// logWrite waits for a background write on a goroutine of its own, logs
// a failure and calls committed (if set) after a success. Called with g.mu
// held; it does not wait.
func (g *group) logWrite(f raft.ApplyFuture, what string, committed func()) {
	logWrite(g.c, f, g.id, what, committed)
}

// logWrite is group.logWrite for any group of c.
func logWrite(c *Coordinator, f raft.ApplyFuture, group, what string, committed func()) {
	go func() {
		if err := waitWrite(f); err != nil {
			c.logger.Warn(what+" failed", "group", group, "error", err)
			return
		}
		if committed != nil {
			committed()
		}
	}()
}
