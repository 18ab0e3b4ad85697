package groups

import "context"

// Leave serves a LeaveGroup for one or more members (by member id, or by
// instance id for static members, KIP-345). The returned error fails the
// whole request; otherwise each member has its own result. Called from a
// connection's handler goroutine.
func (c *Coordinator) Leave(groupID string, leaving []LeaveMember) ([]LeaveResult, error) {
	if groupID == "" {
		return nil, ErrInvalidGroupID
	}
	if _, err := c.serving(context.Background()); err != nil {
		return nil, err
	}
	g, err := c.lockGroup(groupID, false)
	if err != nil {
		return nil, err
	}
	out := make([]LeaveResult, len(leaving))
	if g == nil {
		for i, l := range leaving {
			out[i] = LeaveResult{MemberID: l.MemberID, InstanceID: l.InstanceID, Err: ErrUnknownMemberID}
		}
		return out, nil
	}
	defer g.mu.Unlock()
	if g.state == Dead {
		return nil, ErrCoordinatorNotAvailable
	}
	for i, l := range leaving {
		out[i] = LeaveResult{MemberID: l.MemberID, InstanceID: l.InstanceID, Err: g.leave(l)}
	}
	return out, nil
}

// leave removes one member under g.mu.
func (g *group) leave(l LeaveMember) error {
	id := l.MemberID
	if id == "" && l.InstanceID != "" {
		var ok bool
		if id, ok = g.static[l.InstanceID]; !ok {
			return ErrUnknownMemberID
		}
	} else if g.isFenced(l.MemberID, l.InstanceID) {
		return ErrFencedInstanceID
	}
	if g.removePending(id) {
		if g.state == PreparingRebalance {
			g.tryCompleteJoin()
		}
		return nil
	}
	m, ok := g.members[id]
	if !ok {
		return ErrUnknownMemberID
	}
	g.c.logger.Info("member left", "group", g.id, "member", id)
	g.removeMemberAndUpdate(m, "member "+id+" left")
	return nil
}
