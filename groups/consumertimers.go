package groups

import "time"

// A consumer group member has up to four timers (Kafka's consumer-group
// session, rebalance, join and sync timeouts; the last two only for a
// classic-protocol member). Each fires on its own goroutine, takes the
// group lock and checks its token, so a timer that fired just as it was
// replaced or stopped does nothing; a stale or closed group's timers do
// nothing.
// Every one of them, when it fires, fences the member.

// memberTimer is one of a member's timers. Guarded by the group's lock.
type memberTimer struct {
	t     *time.Timer
	token uint64
}

// stop stops the timer; one that fired already and waits for the lock
// finds its token changed and does nothing. Called with the group's lock
// held.
func (mt *memberTimer) stop() {
	mt.token++
	if mt.t != nil {
		mt.t.Stop()
		mt.t = nil
	}
}

// arm (re)starts mt for d: when it fires while still current and still
// holds for the member, the member is fenced for reason. Called with g.mu
// held.
func (g *consumerGroup) arm(mt *memberTimer, m *consumerMember, d time.Duration, still func(*consumerMember) bool, reason string) {
	mt.stop()
	mt.token++
	id, tok := m.id, mt.token
	mt.t = time.AfterFunc(d, func() {
		g.fenceIfStill(id, func(cur *consumerMember) bool {
			return cur == m && mt.token == tok && (still == nil || still(cur))
		}, reason)
	})
}

// startSessions gives every member a fresh session, and a member that
// must still revoke partitions its rebalance deadline, when the
// coordinator starts serving the group (an activation, a reload): a new
// leader never fences a member for the silence of a failover. Called with
// g.mu held.
func (g *consumerGroup) startSessions() {
	for _, m := range g.members {
		g.scheduleSession(m)
		if m.rec.state == reconcileUnrevoked && m.sub.Classic == nil {
			g.scheduleRebalance(m)
		}
	}
}

// scheduleSession (re)starts m's session: if no heartbeat comes within
// its session timeout, m is fenced. Called with g.mu held.
func (g *consumerGroup) scheduleSession(m *consumerMember) {
	g.arm(&m.session, m, g.sessionTimeout(m), nil, "session timeout")
}

// scheduleRebalanceIfRevoking starts m's rebalance deadline when a step
// moved it to revoking partitions at a new epoch, leaves a running one
// alone, and stops it once m no longer revokes (Kafka's maybeReconcile).
// Called with g.mu held.
func (g *consumerGroup) scheduleRebalanceIfRevoking(m *consumerMember, before reconciled) {
	switch {
	case m.rec.state != reconcileUnrevoked || m.sub.Classic != nil:
		// A classic member has its join and sync deadlines instead,
		// as in Kafka.
		m.rebalance.stop()
	case before.state != reconcileUnrevoked || before.epoch != m.rec.epoch || m.rebalance.t == nil:
		g.scheduleRebalance(m)
	}
}

// scheduleRebalance gives m its rebalance timeout to revoke what it must,
// at its current epoch; if it is still revoking at that epoch then, it is
// fenced. Called with g.mu held.
func (g *consumerGroup) scheduleRebalance(m *consumerMember) {
	epoch := m.rec.epoch
	g.arm(&m.rebalance, m, m.rebalanceTimeout(), func(m *consumerMember) bool {
		return m.rec.state == reconcileUnrevoked && m.rec.epoch == epoch
	}, "rebalance timeout")
}

// scheduleJoinIfAbsent gives a classic member told to rejoin its
// rebalance timeout to do so, unless it has that deadline already.
// Called with g.mu held.
func (g *consumerGroup) scheduleJoinIfAbsent(m *consumerMember) {
	if m.join.t == nil {
		g.arm(&m.join, m, m.rebalanceTimeout(), nil, "the classic member did not rejoin within its rebalance timeout")
	}
}

// scheduleSync gives a classic member that joined its rebalance timeout
// to send SyncGroup. Called with g.mu held.
func (g *consumerGroup) scheduleSync(m *consumerMember) {
	g.arm(&m.sync, m, m.rebalanceTimeout(), nil, "the classic member did not sync within its rebalance timeout")
}

// stopTimers stops all of m's timers. Called with g.mu held.
func (g *consumerGroup) stopTimers(m *consumerMember) {
	m.session.stop()
	m.rebalance.stop()
	m.join.stop()
	m.sync.stop()
}

// rebalanceTimeout is the rebalance timeout m joined with.
func (m *consumerMember) rebalanceTimeout() time.Duration {
	return time.Duration(m.sub.RebalanceTimeoutMs) * time.Millisecond
}

// fenceIfStill fences member id if still holds (the timer is current).
// Runs on a timer goroutine.
func (g *consumerGroup) fenceIfStill(id string, still func(*consumerMember) bool, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.members[id]
	if g.closed || g.stale || m == nil || !still(m) {
		return
	}
	g.c.logger.Info("consumer group member fenced", "group", g.id, "member", id, "reason", reason, "member_epoch", m.rec.epoch)
	g.c.expired.Add(1)
	g.fenceAndEnqueue(m)
}
