package groups

import "context"

// Leave serves a LeaveGroup for one or more members (by member id, or by
// instance id for static members, KIP-345). The returned error fails the
// whole request; otherwise each member has its own result. Called from a
// connection's handler goroutine; a hold for a settling shard, and the
// wait for a consumer group's write, end with ctx.
func (c *Coordinator) Leave(ctx context.Context, groupID string, leaving []LeaveMember) ([]LeaveResult, error) {
	if groupID == "" {
		return nil, ErrInvalidGroupID
	}
	if _, err := c.serving(ctx); err != nil {
		return nil, err
	}
	return dispatch(c, groupID, lookupMode{}, kindHandlers[[]LeaveResult]{
		classic: func(g *classicGroup) ([]LeaveResult, error) {
			if g == nil {
				return unknownMembers(leaving), nil
			}
			return c.leaveClassic(g, leaving)
		},
		consumer: func(g *consumerGroup) ([]LeaveResult, error) {
			if g == nil {
				return unknownMembers(leaving), nil
			}
			return c.leaveToConsumer(ctx, g, leaving)
		},
	})
}

// unknownMembers answers every member leaving a group that does not
// exist: ErrUnknownMemberID.
func unknownMembers(leaving []LeaveMember) []LeaveResult {
	out := make([]LeaveResult, len(leaving))
	for i, l := range leaving {
		out[i] = LeaveResult{MemberID: l.MemberID, InstanceID: l.InstanceID, Err: ErrUnknownMemberID}
	}
	return out
}

// leaveClassic serves a LeaveGroup to a classic group. Called with g.mu
// held; unlocks it.
func (c *Coordinator) leaveClassic(g *classicGroup, leaving []LeaveMember) ([]LeaveResult, error) {
	out := make([]LeaveResult, len(leaving))
	defer g.mu.Unlock()
	if g.state == Dead {
		return nil, ErrCoordinatorNotAvailable
	}
	for i, l := range leaving {
		out[i] = LeaveResult{MemberID: l.MemberID, InstanceID: l.InstanceID, Err: g.leave(l)}
	}
	return out, nil
}

// leave removes one member under g.mu, as Kafka 4.x's
// classicGroupLeaveToClassicGroup: an entry without a member id removes
// the static member of its instance id; one naming a pending member
// removes it; any other must pass validateMember (an instance id that is
// unknown is UNKNOWN_MEMBER_ID, one that belongs to another member
// FENCED_INSTANCE_ID), and a wrong pairing removes nobody.
func (g *classicGroup) leave(l LeaveMember) error {
	if l.MemberID == "" {
		m, ok := g.members[g.static[l.InstanceID]]
		if l.InstanceID == "" || !ok {
			return ErrUnknownMemberID
		}
		g.c.logger.Info("member left", "group", g.id, "member", m.id, "instance", l.InstanceID)
		g.removeMemberAndUpdate(m, "member "+m.id+" left")
		return nil
	}
	if g.removePending(l.MemberID) {
		if g.state == PreparingRebalance {
			g.tryCompleteJoin()
		}
		return nil
	}
	if err := g.validateMember(l.MemberID, l.InstanceID); err != nil {
		return err
	}
	g.c.logger.Info("member left", "group", g.id, "member", l.MemberID)
	g.removeMemberAndUpdate(g.members[l.MemberID], "member "+l.MemberID+" left")
	return nil
}
