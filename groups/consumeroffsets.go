package groups

import (
	"fmt"

	"github.com/kcoord/kcoord/fsm"
)

// This file is a consumer group's side of offsets: who may commit and fetch
// (Kafka 4.x's ConsumerGroup.validateOffsetCommit and validateOffsetFetch)
// and retention (offsetExpirationCondition and cleanupGroupMetadata).

// commitConsumer serves an OffsetCommit to a consumer group (Kafka 4.x's
// ConsumerGroup.validateOffsetCommit): a commit outside group management
// (generation -1) only while the group has no members; otherwise it must
// come from a member, at OffsetCommit v9 or later, at the member's current
// epoch (an older one is ErrStaleMemberEpoch); a classic member's, at any
// version, at its epoch as its generation (else ErrIllegalGeneration).
// nil is a group deleted meanwhile. Called from a handler goroutine with
// g.mu held; unlocks it and waits for the write.
func (c *Coordinator) commitConsumer(g *consumerGroup, req CommitRequest, records []fsm.OffsetCommitPartition) error {
	if g == nil {
		return ErrGroupIDNotFound // deleted meanwhile
	}
	if err := g.validateCommit(req); err != nil {
		g.mu.Unlock()
		return err
	}
	return c.writeCommit(&g.mu, &g.inflight, g.id, records, false, nil)
}

// validateCommit checks a commit against the members. Called with g.mu
// held.
func (g *consumerGroup) validateCommit(req CommitRequest) error {
	if req.Generation < 0 && len(g.members) == 0 {
		return nil
	}
	m := g.members[req.MemberID]
	switch {
	case m == nil:
		return fmt.Errorf("%w: member %s is not a member of group %s", ErrUnknownMemberID, req.MemberID, g.id)
	case m.sub.Classic != nil:
		if req.Generation != m.rec.epoch {
			return fmt.Errorf("%w: the generation %d is not the member's epoch %d", ErrIllegalGeneration, req.Generation, m.rec.epoch)
		}
		return nil
	case req.Version < 9:
		return fmt.Errorf("%w: OffsetCommit v%d cannot commit for a consumer-protocol member; v9 or later is needed", ErrUnsupportedVersion, req.Version)
	case req.Generation != m.rec.epoch:
		return fmt.Errorf("%w: the member epoch %d is not the member's %d", ErrStaleMemberEpoch, req.Generation, m.rec.epoch)
	}
	return nil
}

// checkFetchMember checks an OffsetFetch's member against a consumer
// group (Kafka 4.x's validateOffsetFetch): a fetch naming no member at
// epoch -1 is anyone's (admin tools); otherwise the member must be in the
// group (ErrUnknownMemberID) at that epoch (ErrStaleMemberEpoch). A
// classic group, or no group, is not checked. The caller has confirmed
// the coordinator's leadership (Check) since the request arrived. Called
// from any handler goroutine; it does not block on Raft.
func (c *Coordinator) checkFetchMember(groupID string, memberID *string, memberEpoch int32) error {
	if c.consumerOf(groupID) == nil || memberID == nil && memberEpoch < 0 {
		return nil // not a consumer group, or an admin fetch
	}
	g, err := c.lockConsumer(groupID, false)
	if err != nil || g == nil {
		return err
	}
	defer g.mu.Unlock()
	if memberID == nil && memberEpoch < 0 {
		return nil
	}
	var m *consumerMember
	if memberID != nil {
		m = g.members[*memberID]
	}
	switch {
	case m == nil:
		return fmt.Errorf("%w: the fetch's member is not a member of group %s", ErrUnknownMemberID, groupID)
	case memberEpoch != m.rec.epoch && m.sub.Classic != nil:
		return fmt.Errorf("%w: the generation %d is not the member's epoch %d", ErrIllegalGeneration, memberEpoch, m.rec.epoch)
	case memberEpoch != m.rec.epoch:
		return fmt.Errorf("%w: the member epoch %d is not the member's %d", ErrStaleMemberEpoch, memberEpoch, m.rec.epoch)
	}
	return nil
}

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
		logWrite(g.c, g.c.write(&fsm.OffsetDelete{GroupID: g.id, Partitions: expired}), g.id, "expiring offsets", func(committed bool) {
			if committed {
				g.c.offsetsExpired.Add(count)
			}
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
