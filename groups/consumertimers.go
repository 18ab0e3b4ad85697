package groups

import "time"

// A consumer group member has two timers (Kafka's consumer-group session
// and rebalance timeouts). Each fires on its own goroutine, takes the
// group lock and checks its token, so a timer that fired just as it was
// replaced does nothing; a stale or closed group's timers do nothing.

// startSessions gives every member a fresh session, and a member that
// must still revoke partitions its rebalance deadline, when the
// coordinator starts serving the group (an activation, a reload): a new
// leader never fences a member for the silence of a failover. Called with
// g.mu held.
func (g *consumerGroup) startSessions() {
	for _, m := range g.members {
		g.scheduleSession(m)
		if m.rec.state == reconcileUnrevoked {
			g.scheduleRebalance(m)
		}
	}
}

// scheduleSession (re)starts m's session: if no heartbeat comes within
// group.consumer.session.timeout.ms, m is fenced. Called with g.mu held.
func (g *consumerGroup) scheduleSession(m *consumerMember) {
	if m.session != nil {
		m.session.Stop()
	}
	m.sessionToken++
	id, tok := m.id, m.sessionToken
	m.session = time.AfterFunc(g.c.cfg.ConsumerSessionTimeout, func() {
		g.fenceIfStill(id, func(m *consumerMember) bool { return m.sessionToken == tok }, "session timeout")
	})
}

// scheduleRebalanceIfRevoking starts m's rebalance deadline when a step
// moved it to revoking partitions at a new epoch, leaves a running one
// alone, and stops it once m no longer revokes (Kafka's maybeReconcile).
// Called with g.mu held.
func (g *consumerGroup) scheduleRebalanceIfRevoking(m *consumerMember, before reconciled) {
	switch {
	case m.rec.state != reconcileUnrevoked:
		g.stopRebalance(m)
	case before.state != reconcileUnrevoked || before.epoch != m.rec.epoch || m.rebalance == nil:
		g.scheduleRebalance(m)
	}
}

// scheduleRebalance gives m its rebalance timeout to revoke what it must,
// at its current epoch; if it is still revoking at that epoch then, it is
// fenced. Called with g.mu held.
func (g *consumerGroup) scheduleRebalance(m *consumerMember) {
	g.stopRebalance(m)
	m.rebalanceToken++
	id, tok, epoch := m.id, m.rebalanceToken, m.rec.epoch
	d := time.Duration(m.sub.RebalanceTimeoutMs) * time.Millisecond
	m.rebalance = time.AfterFunc(d, func() {
		g.fenceIfStill(id, func(m *consumerMember) bool {
			return m.rebalanceToken == tok && m.rec.state == reconcileUnrevoked && m.rec.epoch == epoch
		}, "rebalance timeout")
	})
}

// stopRebalance stops m's rebalance deadline. Called with g.mu held.
func (g *consumerGroup) stopRebalance(m *consumerMember) {
	if m.rebalance != nil {
		m.rebalance.Stop()
		m.rebalance = nil
	}
}

// stopTimers stops both of m's timers. Called with g.mu held.
func (g *consumerGroup) stopTimers(m *consumerMember) {
	if m.session != nil {
		m.session.Stop()
		m.session = nil
	}
	g.stopRebalance(m)
}

// fenceIfStill fences member id if still holds (the timer is current). Runs on
// a timer goroutine.
func (g *consumerGroup) fenceIfStill(id string, still func(*consumerMember) bool, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.members[id]
	if g.closed || g.stale || m == nil || !still(m) {
		return
	}
	g.c.logger.Info("consumer group member fenced", "group", g.id, "member", id, "reason", reason, "member_epoch", m.rec.epoch)
	g.c.expired.Add(1)
	g.enqueue(g.fence(m))
}
