package groups

import "time"

// Timers call back into the group on their own goroutine; each callback
// takes the group lock and checks a token so a timer that fired just as it
// was replaced does nothing.

// startSessions gives every member loaded by Activate a fresh session
// timeout, marking it inherited from the previous coordinator. Called
// with g.mu held.
func (g *classicGroup) startSessions() {
	now := time.Now()
	for _, m := range g.members {
		m.inherited = now
		g.startSession(m)
	}
}

// startSession (re)starts m's session timer with its session timeout.
// Called with g.mu held.
func (g *classicGroup) startSession(m *classicMember) {
	g.scheduleSession(m, m.sessionTimeout)
}

// scheduleSession (re)starts m's liveness timer for d. Called with g.mu held.
func (g *classicGroup) scheduleSession(m *classicMember, d time.Duration) {
	g.stopSession(m)
	m.sessionToken++
	id, tok := m.id, m.sessionToken
	m.session = time.AfterFunc(d, func() { g.onSessionExpired(id, tok) })
}

// stopSession stops m's liveness timer. Called with g.mu held.
func (g *classicGroup) stopSession(m *classicMember) {
	if m.session != nil {
		m.session.Stop()
		m.session = nil
	}
}

// onSessionExpired runs on a timer goroutine when a member's session ran
// out. A member blocked in SyncGroup, or an established member blocked in
// JoinGroup, cannot heartbeat and is kept alive (Kafka's shouldKeepAlive).
func (g *classicGroup) onSessionExpired(id string, tok uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.members[id]
	if g.closed || m == nil || m.sessionToken != tok {
		return
	}
	if m.awaitingSync() || (m.awaitingJoin() && !m.isNew) {
		g.startSession(m)
		return
	}
	g.c.logger.Info("member session expired", "group", g.id, "member", id, "generation", g.generation)
	g.c.expired.Add(1)
	g.removeMemberAndUpdate(m, "session timeout")
}

// addPending remembers a member id handed out with MEMBER_ID_REQUIRED; it is
// forgotten if the member does not rejoin within its session timeout.
// Called with g.mu held.
func (g *classicGroup) addPending(id string, sessionTimeout time.Duration) {
	g.memberMaps()
	g.pending[id] = time.AfterFunc(sessionTimeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.closed {
			return
		}
		if _, ok := g.pending[id]; ok {
			delete(g.pending, id)
			g.c.logger.Debug("pending member expired", "group", g.id, "member", id)
			if g.state == PreparingRebalance {
				g.tryCompleteJoin()
			}
		}
	})
}

// removePending forgets a pending member id. Called with g.mu held.
func (g *classicGroup) removePending(id string) bool {
	t, ok := g.pending[id]
	if ok {
		t.Stop()
		delete(g.pending, id)
	}
	return ok
}

// scheduleJoin replaces the join-phase timer with one running fn after d.
// Called with g.mu held; fn runs with g.mu held.
func (g *classicGroup) scheduleJoin(d time.Duration, fn func()) {
	g.stopJoinTimer()
	tok := g.joinToken
	g.joinTimer = time.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.closed && g.joinToken == tok {
			fn()
		}
	})
}

// stopJoinTimer cancels the join-phase timer. Called with g.mu held.
func (g *classicGroup) stopJoinTimer() {
	g.joinToken++
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
}

// close stops every timer and fails every waiting request with
// ErrNotCoordinator; the group is not served by this node any more. Called
// with g.mu held.
func (g *classicGroup) close() {
	g.closed = true
	g.stopJoinTimer()
	g.stopSyncTimer()
	for id := range g.pending {
		g.removePending(id)
	}
	for _, m := range g.members {
		g.stopSession(m)
		m.respondJoin(JoinResult{Err: ErrNotCoordinator, MemberID: m.id})
		m.respondSync(SyncResult{Err: ErrNotCoordinator})
	}
}

// scheduleSync arms Kafka's DelayedSync: members of the new generation that
// have not sent SyncGroup when the rebalance timeout runs out are removed
// and the group rebalances. Called with g.mu held.
func (g *classicGroup) scheduleSync() {
	g.stopSyncTimer()
	tok, generation := g.syncToken, g.generation
	g.syncTimer = time.AfterFunc(g.maxRebalanceTimeout(), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.closed && g.syncToken == tok && g.generation == generation {
			g.syncExpired()
		}
	})
}

// stopSyncTimer cancels the sync deadline. Called with g.mu held.
func (g *classicGroup) stopSyncTimer() {
	g.syncToken++
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
}

// syncExpired removes the members that never synced. Called with g.mu held.
func (g *classicGroup) syncExpired() {
	if (g.state != CompletingRebalance && g.state != Stable) || len(g.pendingSync) == 0 {
		return
	}
	var missing []string
	for _, id := range g.order {
		if g.pendingSync[id] {
			missing = append(missing, id)
		}
	}
	for _, id := range missing {
		g.c.logger.Info("member did not sync in time", "group", g.id, "member", id, "generation", g.generation)
		g.c.expired.Add(1)
		m := g.members[id]
		m.respondJoin(JoinResult{Err: ErrUnknownMemberID})
		g.remove(id)
	}
	g.prepareRebalance("members did not sync within the rebalance timeout")
}
