package groups

import (
	"context"
	"errors"
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// Sync serves a SyncGroup. Followers wait for the leader's assignment; the
// leader's assignment is committed to Raft before anyone gets an answer, so
// a coordinator failover loses no completed rebalance. Called from a
// connection's handler goroutine; blocks until the answer, ctx's end or a
// leadership loss.
func (c *Coordinator) Sync(ctx context.Context, req SyncRequest) SyncResult {
	if req.GroupID == "" {
		return SyncResult{Err: ErrInvalidGroupID}
	}
	epoch, err := c.serving(ctx)
	if err != nil {
		return SyncResult{Err: err}
	}
	res, err := dispatch(c, req.GroupID, lookupMode{}, kindHandlers[SyncResult]{
		classic:  func(g *classicGroup) (SyncResult, error) { return c.syncClassic(ctx, epoch, g, req), nil },
		consumer: func(g *consumerGroup) (SyncResult, error) { return c.syncToConsumer(ctx, epoch, g, req), nil },
	})
	if err != nil {
		return SyncResult{Err: err}
	}
	return res
}

// syncClassic serves a SyncGroup to a classic group (nil: none), served
// under epoch. Called with g.mu held; unlocks it and waits as Sync does.
func (c *Coordinator) syncClassic(ctx context.Context, epoch uint64, g *classicGroup, req SyncRequest) SyncResult {
	if g == nil {
		return SyncResult{Err: ErrUnknownMemberID}
	}
	ch, res := g.sync(req)
	g.mu.Unlock()
	if ch == nil {
		// An answer from the coordinator's state (a Stable group's
		// assignment, or an error): served only once a quorum confirmed the
		// leadership it was read under. Waiting syncs are answered after
		// the assignment committed, which confirms it.
		if err := c.confirm(ctx, epoch); err != nil {
			return SyncResult{Err: err}
		}
		return res
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return SyncResult{Err: ctx.Err()}
	}
}

// sync runs the SyncGroup logic under g.mu.
func (g *classicGroup) sync(req SyncRequest) (chan SyncResult, SyncResult) {
	fail := func(err error) (chan SyncResult, SyncResult) { return nil, SyncResult{Err: err} }
	if g.state == Dead {
		return fail(ErrCoordinatorNotAvailable)
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return fail(err)
	}
	m := g.members[req.MemberID]
	switch {
	case req.Generation != g.generation:
		return fail(ErrIllegalGeneration)
	case req.ProtocolType != "" && req.ProtocolType != g.protocolType,
		req.Protocol != "" && req.Protocol != g.protocol:
		return fail(ErrInconsistentGroupProtocol)
	}
	switch g.state {
	case Empty:
		return fail(ErrUnknownMemberID)
	case PreparingRebalance:
		return fail(ErrRebalanceInProgress)
	case Stable:
		delete(g.pendingSync, m.id)
		g.startSession(m)
		return nil, g.syncResult(m)
	}
	delete(g.pendingSync, m.id)
	// CompletingRebalance: wait for the leader's assignment.
	if m.syncCh != nil {
		m.syncCh <- SyncResult{Err: ErrRebalanceInProgress}
	}
	ch := make(chan SyncResult, 1)
	m.syncCh = ch
	g.startSession(m)
	if m.id == g.leader && g.assigning != g.generation {
		g.storeAssignment(req.Assignments)
	}
	return ch, SyncResult{}
}

func (g *classicGroup) syncResult(m *classicMember) SyncResult {
	return SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}
}

// storeAssignment writes the leader's assignment with the rest of the
// group's metadata and, once it committed, hands it out and makes the group
// Stable. A member missing from the assignment gets an empty one, as in
// Kafka. Called with g.mu held.
func (g *classicGroup) storeAssignment(assignments map[string][]byte) {
	rec := g.record()
	rec.State = fsm.StateStable
	for i := range rec.Members {
		rec.Members[i].Assignment = assignments[rec.Members[i].ID]
	}
	generation := g.generation
	g.assigning = generation
	f := g.c.write(&fsm.GroupPut{Group: rec})
	go func() {
		err := waitWrite(f)
		g.mu.Lock()
		defer g.mu.Unlock()
		g.assignmentStored(generation, assignments, err)
	}()
}

// assignmentStored finishes storeAssignment on the write's goroutine, with
// g.mu held. If the group moved on meanwhile (a member left, a new
// generation began) the stored assignment is already superseded.
func (g *classicGroup) assignmentStored(generation int32, assignments map[string][]byte, err error) {
	if g.assigning == generation {
		g.assigning = 0
	}
	if g.closed || g.state != CompletingRebalance || g.generation != generation {
		return
	}
	if err != nil {
		g.c.logger.Warn("storing assignment failed", "group", g.id, "generation", generation, "error", err)
		if errors.Is(err, ErrTimeout) {
			// Kafka answers a group write that timed out with
			// COORDINATOR_NOT_AVAILABLE (GroupMetadataManager.storeGroup).
			err = ErrCoordinatorNotAvailable
		}
		g.resetAssignments(err)
		g.maybePrepareRebalance("storing the assignment failed")
		return
	}
	for _, m := range g.members {
		m.assignment = assignments[m.id]
	}
	g.transition(Stable)
	g.lastStable = time.UnixMilli(g.stateTimestamp)
	g.c.rebalances.Add(1)
	if observe := g.c.cfg.ObserveRebalance; observe != nil && !g.rebalanceStart.IsZero() {
		observe(Rebalance{Shard: g.c.shard, Group: g.id, Generation: g.generation, Members: len(g.members), Protocol: g.protocol,
			At: g.lastStable, Took: time.Since(g.rebalanceStart)})
	}
	g.rebalanceStart = time.Time{}
	for _, id := range g.order {
		m := g.members[id]
		m.respondSync(g.syncResult(m))
	}
	g.c.logger.Info("group stable", "group", g.id, "generation", g.generation, "members", len(g.members), "protocol", g.protocol)
}
