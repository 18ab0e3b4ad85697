package groups

// Heartbeat serves a Heartbeat: it proves the member alive and tells it
// whether a rebalance is under way. Heartbeats never touch Raft. Called from
// a connection's handler goroutine; never blocks on anything but the group
// lock.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) error {
	if req.GroupID == "" {
		return ErrInvalidGroupID
	}
	g, err := c.lockGroup(req.GroupID, false)
	if err != nil {
		return err
	}
	if g == nil {
		return ErrUnknownMemberID
	}
	defer g.mu.Unlock()
	if g.state == Dead {
		return ErrCoordinatorNotAvailable
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		return ErrUnknownMemberID
	case PreparingRebalance:
		g.startSession(m)
		return ErrRebalanceInProgress
	default: // CompletingRebalance, Stable
		g.startSession(m)
		return nil
	}
}
