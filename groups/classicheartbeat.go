package groups

import (
	"context"
	"time"
)

// Heartbeat serves a Heartbeat: it proves the member alive and tells it
// whether a rebalance is under way. Heartbeats never write to Raft, but the
// answer ("you are still in generation G") is a read of the coordinator's
// state, so a quorum confirms the leadership first (confirmRead). Called
// from a connection's handler goroutine; blocks about one round trip, and
// a hold for a settling shard ends with ctx.
func (c *Coordinator) Heartbeat(ctx context.Context, req HeartbeatRequest) error {
	if req.GroupID == "" {
		return ErrInvalidGroupID
	}
	if err := c.confirmRead(ctx); err != nil {
		return err
	}
	_, err := dispatch(c, req.GroupID, lookupMode{}, kindHandlers[struct{}]{
		classic:  func(g *classicGroup) (struct{}, error) { return struct{}{}, c.heartbeatClassic(g, req) },
		consumer: func(g *consumerGroup) (struct{}, error) { return struct{}{}, c.heartbeatToConsumer(ctx, g, req) },
	})
	return err
}

// heartbeatClassic serves a Heartbeat to a classic group (nil: none).
// Called with g.mu held; unlocks it.
func (c *Coordinator) heartbeatClassic(g *classicGroup, req HeartbeatRequest) error {
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
	if g.state != Stable && g.state != CompletingRebalance {
		m.inherited = time.Time{} // heard from here
	}
	switch g.state {
	case Empty:
		return ErrUnknownMemberID
	case PreparingRebalance:
		g.startSession(m)
		return ErrRebalanceInProgress
	default: // CompletingRebalance, Stable
		g.startSession(m)
		if !m.inherited.IsZero() {
			// The member found this coordinator after a move and kept
			// its generation: the failover cost it nothing but the wait.
			c.logger.Debug("member resumed on the new coordinator", "group", g.id, "member", m.id,
				"generation", g.generation, "since_activation", time.Since(m.inherited))
			m.inherited = time.Time{}
		}
		return nil
	}
}
