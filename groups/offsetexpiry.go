package groups

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// Offset expiry (KIP-211, Kafka's cleanupGroupMetadata) and the removal of
// Empty groups left with no offsets. Expiry decides under the group lock
// and enqueues its OffsetDelete there, so it is ordered with the group's
// commits; partitions with a commit in flight are never expired.

// removeIfEmpty deletes an Empty group that has no offsets left (remaining
// stored, no commit in flight, no pending member), as Kafka's
// cleanupGroupMetadata does; it reports whether it did. Called with g.mu
// held, after the offsets' deletion was enqueued.
func (g *classicGroup) removeIfEmpty(remaining int) bool {
	if g.state != Empty || remaining > 0 || len(g.pending) > 0 || len(g.inflight.pendingCommits) > 0 {
		return false
	}
	g.transition(Dead)
	g.closed = true
	if _, stored := g.c.state.Group(g.id); stored || g.c.state.HasOffsets(g.id) {
		// Until the removal applies the FSM still holds the group, which
		// must not be woken meanwhile (dormant.go).
		c, id := g.c, g.id
		c.markRemoving(id)
		g.logWrite(c.write(&fsm.GroupDelete{GroupID: id}), "removing an empty group", func(bool) { c.unmarkRemoving(id) })
	}
	g.c.forgetClassic(g)
	g.c.logger.Info("empty group removed", "group", g.id)
	return true
}

// ExpireOffsets removes the offsets whose retention ran out, by KIP-211's
// rules, and Empty groups left with no offsets (Kafka's
// cleanupGroupMetadata). now is the leader's clock in Unix milliseconds and
// retention is offsets.retention.minutes in milliseconds. The retention
// sweep (RunRetention) calls it every offsets.retention.check.interval.ms on the
// shard leader; the deletions go through Raft without being waited for.
// It returns how many offsets and groups it removed. Called from the
// retention sweep's goroutine (RunRetention); it does not wait for Raft.
func (c *Coordinator) ExpireOffsets(now, retention int64) (offsets, groups int) {
	if !c.Active() || c.Check(context.Background()) != nil { // a shard led elsewhere: no hold, no round trip
		return 0, 0
	}
	// One view of both: a live group the first loop lets sleep must not
	// be found dormant by the second, its offsets' deletion still in
	// flight, and expired again.
	c.mu.RLock()
	live := groupList(c.classics, c.consumers)
	dormant := c.dormantLocked()
	c.mu.RUnlock()
	for _, g := range live {
		n, removed := g.expire(now, retention)
		offsets += n
		if removed {
			groups++
		}
	}
	for _, sg := range dormant {
		n, removed := c.expireDormant(sg, now, retention)
		offsets += n
		if removed {
			groups++
		}
	}
	return offsets, groups
}

// expireDormant runs the retention rules for a dormant group (dormant.go),
// waking it only when something is due. Called from the retention sweep's
// goroutine.
func (c *Coordinator) expireDormant(sg fsm.SimpleGroup, now, retention int64) (n int, removed bool) {
	stored := c.state.Offsets(sg.ID)
	if len(stored) > 0 && len(dormantGroup(c, sg).expiredOffsets(stored, now, retention)) == 0 {
		return 0, false
	}
	g, err := c.lookupClassic(sg.ID, false)
	if err != nil || g == nil {
		return 0, false // no longer served here, or removed meanwhile
	}
	return g.expire(now, retention) // which lets it sleep again
}

// expire runs the retention rules for one group; removed reports that the
// group itself was deleted. A group left idle goes dormant (dormant.go).
func (g *classicGroup) expire(now, retention int64) (n int, removed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.state == Dead {
		return 0, false
	}
	stored := g.c.state.Offsets(g.id)
	expired := g.expiredOffsets(stored, now, retention)
	defer g.evictIfIdle() // after removeIfEmpty: a removed group is closed
	if len(expired) > 0 {
		n := uint64(len(expired))
		g.logWrite(g.c.write(&fsm.OffsetDelete{GroupID: g.id, Partitions: expired}), "expiring offsets", func(committed bool) {
			if committed {
				g.c.offsetsExpired.Add(n) // counted once committed, not when asked for
			}
		})
		g.c.logger.Info("offsets expired", "group", g.id, "partitions", len(expired))
	}
	return len(expired), g.removeIfEmpty(len(stored) - len(expired))
}

// expiredOffsets picks the partitions to expire (Kafka's
// GroupMetadata.removeExpiredOffsets): in an Empty group, everything once
// the group has been Empty for the retention; in a Stable group of Kafka
// consumers (protocol type "consumer"), partitions of topics nobody
// subscribes to, by their commit time; in a group without a protocol type
// (offsets only), by commit time. An explicit
// expiry time (OffsetCommit v1–v4) wins. Called with g.mu held.
func (g *classicGroup) expiredOffsets(stored map[fsm.TopicPartition]fsm.Offset, now, retention int64) []fsm.TopicPartition {
	var base func(fsm.Offset) int64
	var subscribed map[string]bool
	switch {
	case g.protocolType != "" && g.state == Empty:
		base = func(fsm.Offset) int64 { return g.stateTimestamp }
	case g.protocolType == clientProtocolType && g.state == Stable:
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
		if subscribed[tp.Topic] || g.inflight.pendingCommits[tp] > 0 {
			continue
		}
		if o.ExpireTimestamp >= 0 && now >= o.ExpireTimestamp || o.ExpireTimestamp < 0 && now-base(o) >= retention {
			out = append(out, tp)
		}
	}
	return out
}

// logWrite waits for a background write on a goroutine of its own, logs
// a failure and then calls done (if set) with whether the write
// committed. Called with g.mu held; it does not wait.
func (g *classicGroup) logWrite(f raft.ApplyFuture, what string, done func(committed bool)) {
	logWrite(g.c, f, g.id, what, done)
}

// logWrite is group.logWrite for any group of c.
func logWrite(c *Coordinator, f raft.ApplyFuture, group, what string, done func(committed bool)) {
	go func() {
		err := waitWrite(f)
		if err != nil {
			c.logger.Warn(what+" failed", "group", group, "error", err)
		}
		if done != nil {
			done(err == nil)
		}
	}()
}
