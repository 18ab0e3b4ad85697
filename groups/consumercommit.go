package groups

import (
	"fmt"

	"github.com/kcoord/kcoord/fsm"
)

// commitConsumer serves an OffsetCommit to a consumer group (Kafka 4.x's
// ConsumerGroup.validateOffsetCommit): a commit outside group management
// (generation -1) only while the group has no members; otherwise it must
// come from a member, at OffsetCommit v9 or later, at the member's current
// epoch (an older one is ErrStaleMemberEpoch); a classic member's, at any
// version, at its epoch as its generation (else ErrIllegalGeneration).
// nil is a group deleted meanwhile. Called from a handler goroutine with
// g.mu held; unlocks it and waits for the write.
func (c *Coordinator) commitConsumer(g *consumerGroup, req CommitRequest, w commitWrite) error {
	if g == nil {
		return ErrGroupIDNotFound // deleted meanwhile
	}
	if err := g.validateCommit(req); err != nil {
		g.mu.Unlock()
		return err
	}
	return c.writeCommit(&g.mu, &g.inflight, g.id, w, false)
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

// CheckFetchMember checks an OffsetFetch's member against a consumer
// group (Kafka 4.x's validateOffsetFetch): a fetch naming no member at
// epoch -1 is anyone's (admin tools); otherwise the member must be in the
// group (ErrUnknownMemberID) at that epoch (ErrStaleMemberEpoch). A
// classic group, or no group, is not checked. The caller has confirmed
// the coordinator's leadership (Check) since the request arrived. Called
// from any handler goroutine; it does not block on Raft.
func (c *Coordinator) CheckFetchMember(groupID string, memberID *string, memberEpoch int32) error {
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

// deleteConsumer serves DeleteGroups for a consumer group (nil: deleted
// meanwhile, done): only an empty
// one can go (Kafka's validateDeleteGroup), with its offsets. Called with
// g.mu held; unlocks it and waits for the write.
func (c *Coordinator) deleteConsumer(g *consumerGroup) error {
	if g == nil {
		return nil // deleted meanwhile
	}
	if len(g.members) > 0 {
		g.mu.Unlock()
		return ErrNonEmptyGroup
	}
	// Enqueued after any write of the group still in flight, so it applies
	// to the group those writes leave.
	f := c.write(&fsm.GroupDelete{GroupID: g.id})
	g.deleting = true // nothing is served from it while the delete commits
	g.mu.Unlock()
	err := waitWrite(f)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deleting = false
	if err != nil && err != fsm.ErrGroupNotFound {
		// Still stored, maybe: serve it again from what the log holds.
		g.markStale()
		return err
	}
	g.close()
	c.forgetConsumer(g)
	return nil
}
