package groups

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// Join serves a JoinGroup. It is called from a connection's handler
// goroutine and blocks until the join phase of the rebalance ends, the
// request fails, ctx ends (the connection closed), or leadership is lost.
func (c *Coordinator) Join(ctx context.Context, req JoinRequest) JoinResult {
	if req.GroupID == "" {
		return JoinResult{Err: ErrInvalidGroupID, MemberID: req.MemberID}
	}
	epoch, err := c.serving(ctx)
	if err == nil {
		err = c.confirm(ctx, epoch)
	}
	if err != nil {
		return JoinResult{Err: err, MemberID: req.MemberID}
	}
	session := time.Duration(req.SessionTimeoutMs) * time.Millisecond
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		return JoinResult{Err: ErrInvalidSessionTimeout, MemberID: req.MemberID}
	}
	res, err := dispatch(c, req.GroupID, lookupMode{create: req.MemberID == ""}, kindHandlers[JoinResult]{
		classic:  func(g *classicGroup) (JoinResult, error) { return c.joinClassic(ctx, g, req), nil },
		consumer: func(g *consumerGroup) (JoinResult, error) { return c.joinToConsumer(ctx, epoch, g, req) },
	})
	if err != nil {
		return JoinResult{Err: err, MemberID: req.MemberID}
	}
	return res
}

// joinClassic serves a JoinGroup to a classic group; nil is a known member
// id for a group that does not exist. Called with g.mu held; unlocks it
// and waits as Join does.
func (c *Coordinator) joinClassic(ctx context.Context, g *classicGroup, req JoinRequest) JoinResult {
	if g == nil {
		return JoinResult{Err: ErrUnknownMemberID, MemberID: req.MemberID}
	}
	ch, res := g.join(req)
	g.mu.Unlock()
	if ch == nil {
		return res
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return JoinResult{Err: ctx.Err(), MemberID: req.MemberID}
	}
}

// join runs the JoinGroup logic under g.mu. It returns either a channel the
// answer will arrive on or an immediate answer.
func (g *classicGroup) join(req JoinRequest) (chan JoinResult, JoinResult) {
	if !g.acceptJoiningMember(req.MemberID) {
		g.removePending(req.MemberID)
		if m, ok := g.members[req.MemberID]; ok {
			m.respondJoin(JoinResult{Err: ErrGroupMaxSizeReached})
			g.remove(m.id)
			g.tryCompleteJoin()
		}
		return nil, JoinResult{Err: ErrGroupMaxSizeReached}
	}
	fail := func(err error) (chan JoinResult, JoinResult) {
		return nil, JoinResult{Err: err, MemberID: req.MemberID}
	}
	if g.state == Dead {
		return fail(ErrCoordinatorNotAvailable)
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		return fail(ErrInconsistentGroupProtocol)
	}
	if req.MemberID == "" {
		return g.joinUnknown(req)
	}
	return g.joinKnown(req)
}

// acceptJoiningMember applies group.max.size (KIP-389) as Kafka does: an
// Empty group takes anyone; during the join phase the members already
// waiting count, so the last to rejoin an oversized group are turned away;
// otherwise existing members are always accepted.
func (g *classicGroup) acceptJoiningMember(id string) bool {
	m, known := g.members[id]
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		return (known && m.awaitingJoin()) || int64(g.numAwaitingJoin()) < int64(g.c.cfg.MaxSize)
	default:
		return known || int64(len(g.members)) < int64(g.c.cfg.MaxSize)
	}
}

func (g *classicGroup) numAwaitingJoin() int {
	n := 0
	for _, m := range g.members {
		if m.awaitingJoin() {
			n++
		}
	}
	return n
}

// joinUnknown serves a member joining without a member id.
func (g *classicGroup) joinUnknown(req JoinRequest) (chan JoinResult, JoinResult) {
	id := newMemberID(req.ClientID, req.InstanceID)
	if req.InstanceID != "" {
		if old, ok := g.static[req.InstanceID]; ok {
			return g.replaceStatic(g.members[old], id, req)
		}
	} else if req.RequireKnownMemberID {
		g.addPending(id, time.Duration(req.SessionTimeoutMs)*time.Millisecond)
		return nil, JoinResult{Err: ErrMemberIDRequired, MemberID: id}
	}
	return g.addMemberAndRebalance(id, req), JoinResult{}
}

// joinKnown serves a member that joins with its member id.
func (g *classicGroup) joinKnown(req JoinRequest) (chan JoinResult, JoinResult) {
	if g.removePending(req.MemberID) {
		return g.addMemberAndRebalance(req.MemberID, req), JoinResult{}
	}
	if g.isFenced(req.MemberID, req.InstanceID) {
		return nil, JoinResult{Err: ErrFencedInstanceID, MemberID: req.MemberID}
	}
	_, staticKnown := g.static[req.InstanceID]
	m, ok := g.members[req.MemberID]
	if !ok || (req.InstanceID != "" && !staticKnown) || g.state == Empty {
		return nil, JoinResult{Err: ErrUnknownMemberID, MemberID: req.MemberID}
	}
	switch g.state {
	case PreparingRebalance:
		return g.updateMemberAndRebalance(m, req), JoinResult{}
	case CompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// The member lost our answer: give it the current generation.
			return nil, g.currentJoinResult(m)
		}
		return g.updateMemberAndRebalance(m, req), JoinResult{}
	default: // Stable
		if !m.sameProtocols(req.Protocols) {
			return g.updateMemberAndRebalance(m, req), JoinResult{}
		}
		if m.id == g.leader && !m.justMoved() {
			// A leader rejoins to make the group rebalance (its
			// subscription's metadata changed, say), as in Kafka.
			return g.updateMemberAndRebalance(m, req), JoinResult{}
		}
		if m.justMoved() {
			// The member's coordinator moved and it rejoins before its
			// first heartbeat here (sarama and kafka-go end a member's
			// session when the old coordinator's connection breaks). The
			// move is the reason, not a change of the member: keep the
			// generation, even for the leader, whose SyncGroup in Stable
			// gets the stored assignments back. (Kafka would rebalance
			// the whole group for the leader's rejoin.)
			g.c.logger.Info("member rejoined after its coordinator moved; generation kept", "group", g.id, "member", m.id,
				"leader", m.id == g.leader, "generation", g.generation)
			m.inherited = time.Time{}
			g.startSession(m)
			r := g.currentJoinResult(m)
			// JoinGroup v9+ (KIP-814): the leader need not assign.
			r.SkipAssignment = req.SupportsSkipAssignment && m.id == g.leader
			return nil, r
		}
		return nil, g.currentJoinResult(m)
	}
}

// currentJoinResult is the JoinGroup answer for the current generation.
func (g *classicGroup) currentJoinResult(m *classicMember) JoinResult {
	r := JoinResult{MemberID: m.id, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
	if m.id == g.leader {
		r.Members = g.joinMembers()
	}
	return r
}

// replaceStatic serves a static member that returns with an empty member id
// while its instance id is known (KIP-345): the old member id is fenced and
// replaced by a new one, which takes over the old member's assignment. A
// Stable group whose chosen protocol stays the same does not rebalance: the
// new member id is stored and the member gets the current generation
// (Kafka's updateStaticMemberAndRebalance).
func (g *classicGroup) replaceStatic(m *classicMember, id string, req JoinRequest) (chan JoinResult, JoinResult) {
	m.respondJoin(JoinResult{Err: ErrFencedInstanceID, MemberID: m.id})
	m.respondSync(SyncResult{Err: ErrFencedInstanceID})
	oldID, oldProtocols, currentLeader := m.id, m.protocols, g.leader
	g.renameMember(m, id)
	g.updateMember(m, req)
	ch := make(chan JoinResult, 1)
	m.joinCh = ch
	g.startSession(m)
	switch g.state {
	case Stable:
		if g.selectProtocol() != g.protocol {
			g.prepareRebalance("static member " + req.InstanceID + " rejoined with other protocols")
			break
		}
		g.storeStaticReplacement(m, ch, oldID, oldProtocols, currentLeader, req.SupportsSkipAssignment)
	case CompletingRebalance:
		// The leader may be assigning to the old member id: start over.
		g.prepareRebalance("static member " + req.InstanceID + " rejoined during the assignment")
	case PreparingRebalance:
		g.tryCompleteJoin()
	}
	return ch, JoinResult{}
}

// storeStaticReplacement writes the group with the static member's new id
// and then answers its join with the current generation; a returning leader
// is told to skip the assignment (KIP-814, JoinGroup v9), older clients are
// given the previous leader id so they do not assign. If the write fails,
// the replacement is undone. Called with g.mu held.
func (g *classicGroup) storeStaticReplacement(m *classicMember, ch chan JoinResult, oldID string, oldProtocols []fsm.Protocol, currentLeader string, skip bool) {
	f := g.c.write(&fsm.GroupPut{Group: g.record()})
	go func() {
		err := waitWrite(f)
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.closed || m.joinCh != ch {
			return // answered meanwhile (leadership lost, a rebalance)
		}
		if err != nil {
			g.c.logger.Warn("storing a static member's new id failed", "group", g.id, "instance", m.instanceID, "error", err)
			if g.members[m.id] == m {
				m.protocols = oldProtocols
				g.renameMember(m, oldID)
				g.startSession(m)
			}
			m.respondJoin(JoinResult{Err: err})
			return
		}
		r := JoinResult{MemberID: m.id, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: currentLeader}
		if skip {
			r.Leader = g.leader
			if m.id == g.leader {
				r.Members, r.SkipAssignment = g.joinMembers(), true
			}
		}
		m.respondJoin(r)
	}()
}

// addMemberAndRebalance adds a new member waiting in JoinGroup and starts or
// joins a rebalance.
func (g *classicGroup) addMemberAndRebalance(id string, req JoinRequest) chan JoinResult {
	m := &classicMember{
		id:               id,
		instanceID:       req.InstanceID,
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		sessionTimeout:   time.Duration(req.SessionTimeoutMs) * time.Millisecond,
		rebalanceTimeout: time.Duration(req.RebalanceTimeoutMs) * time.Millisecond,
		protocolType:     req.ProtocolType,
		protocols:        req.Protocols,
		isNew:            true,
		joinCh:           make(chan JoinResult, 1),
	}
	g.add(m)
	if g.state == PreparingRebalance && g.generation == 0 {
		// A brand-new group's initial delay waits for more members.
		g.newMemberAdded = true
	}
	ch := m.joinCh
	g.scheduleSession(m, g.c.cfg.NewMemberJoinTimeout)
	g.afterJoin("adding member " + id)
	return ch
}

// updateMemberAndRebalance records a rejoining member's protocols and starts
// or joins a rebalance.
func (g *classicGroup) updateMemberAndRebalance(m *classicMember, req JoinRequest) chan JoinResult {
	g.updateMember(m, req)
	m.inherited = time.Time{} // it takes part in a rebalance here: no longer just moved
	if m.joinCh != nil {
		// A second JoinGroup from the same member replaces the first.
		m.joinCh <- JoinResult{Err: ErrRebalanceInProgress, MemberID: m.id}
	}
	ch := make(chan JoinResult, 1)
	m.joinCh = ch
	g.afterJoin("member " + m.id + " rejoined")
	return ch
}

// updateMember records what a rejoining member sent. Called with g.mu held.
func (g *classicGroup) updateMember(m *classicMember, req JoinRequest) {
	m.protocols = req.Protocols
	m.sessionTimeout = time.Duration(req.SessionTimeoutMs) * time.Millisecond
	m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMs) * time.Millisecond
	// The client id and host are the first join's, as in Kafka, where a
	// member's are immutable (a replaced static member keeps them too).
}

// afterJoin starts a rebalance, or completes the one under way if everyone
// is now in.
func (g *classicGroup) afterJoin(reason string) {
	if g.state == PreparingRebalance {
		g.tryCompleteJoin()
		return
	}
	g.prepareRebalance(reason)
}

// newMemberID makes a member id as Kafka does: the client id (or the
// instance id for a static member) and a random UUID.
func newMemberID(clientID, instanceID string) string {
	prefix := clientID
	if instanceID != "" {
		prefix = instanceID
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
