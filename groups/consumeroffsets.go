package groups

import "github.com/kcoord/kcoord/fsm"

// This file is offset retention for consumer groups (Kafka 4.x's
// ConsumerGroup.offsetExpirationCondition and cleanupGroupMetadata).

// expire removes the group's offsets whose retention ran out: an offset
// of a topic no member subscribes to expires retention after its commit
// (Kafka counts from the commit for consumer groups, with or without
// members), unless it was committed with an explicit expiry time. A group
// left with no members and no offsets is deleted. Offsets with a commit in
// flight are left alone. The writes are not waited for.
func (g *consumerGroup) expire(now, retention int64) (n int, removed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.stale || g.deleting {
		return 0, false
	}
	subscribed := g.subscribedTopicNames(g.c.topicsView())
	stored := g.c.state.Offsets(g.id)
	var expired []fsm.TopicPartition
	for tp, o := range stored {
		if subscribed[tp.Topic] || g.inflight.pendingCommits[tp] > 0 {
			continue
		}
		if o.ExpireTimestamp >= 0 && now >= o.ExpireTimestamp || o.ExpireTimestamp < 0 && now-o.CommitTimestamp >= retention {
			expired = append(expired, tp)
		}
	}
	if len(expired) > 0 {
		count := uint64(len(expired))
		logWrite(g.c, g.c.write(&fsm.OffsetDelete{GroupID: g.id, Partitions: expired}), g.id, "expiring offsets", func() {
			g.c.offsetsExpired.Add(count)
		})
		g.c.logger.Info("offsets expired", "group", g.id, "partitions", len(expired))
	}
	if len(g.members) > 0 || len(stored) > len(expired) || len(g.inflight.pendingCommits) > 0 {
		return len(expired), false
	}
	// The group stays, being deleted, until its delete commits, so a join
	// meanwhile cannot make a group whose writes the stored one refuses.
	g.deleting = true
	f := g.c.write(&fsm.GroupDelete{GroupID: g.id})
	go func() {
		err := waitWrite(f)
		g.mu.Lock()
		defer g.mu.Unlock()
		g.deleting = false
		if err != nil && err != fsm.ErrGroupNotFound {
			g.c.logger.Warn("removing an empty consumer group failed; reloading it", "group", g.id, "error", err)
			g.markStale()
			return
		}
		g.close()
		g.c.forgetConsumer(g)
		g.c.logger.Info("empty consumer group removed", "group", g.id)
	}()
	return len(expired), true
}

// subscribedTopicNames is every topic a member names or its regex
// matches. Called with g.mu held.
func (g *consumerGroup) subscribedTopicNames(topics *topicsView) map[string]bool {
	out := make(map[string]bool)
	for _, m := range g.members {
		for _, t := range m.sub.Topics {
			out[t] = true
		}
		tm := m.targetMember(m.sub, m.regex, g.c.cfg.AuthorizeTopic)
		for _, t := range subscribedTopics(&tm, topics.byName) {
			out[t] = true
		}
	}
	return out
}
