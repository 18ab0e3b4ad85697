package groups

import (
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// The join phase of a rebalance, as Kafka's GroupCoordinator runs it. Every
// function here is called with g.mu held.

// maybePrepareRebalance starts a rebalance if the group's state allows one.
func (g *classicGroup) maybePrepareRebalance(reason string) {
	if g.state == Stable || g.state == CompletingRebalance || g.state == Empty {
		g.prepareRebalance(reason)
	}
}

// prepareRebalance moves the group to PreparingRebalance and arms the timer
// that ends the join phase: the initial delay for an Empty group (extended
// while members keep arriving, capped by the rebalance timeout), else the
// longest rebalance timeout of the members.
func (g *classicGroup) prepareRebalance(reason string) {
	if g.state == CompletingRebalance {
		g.resetAssignments(ErrRebalanceInProgress)
	}
	g.stopSyncTimer()
	initial := g.state == Empty
	if g.rebalanceStart.IsZero() {
		g.rebalanceStart = time.Now()
	}
	g.transition(PreparingRebalance)
	g.c.logger.Info("preparing rebalance", "group", g.id, "generation", g.generation, "members", len(g.members), "reason", reason)
	if initial {
		delay := g.c.cfg.InitialRebalanceDelay
		remaining := g.maxRebalanceTimeout() - delay
		if remaining < 0 {
			remaining = 0
		}
		g.scheduleInitialJoin(delay, remaining)
		return
	}
	g.scheduleJoin(g.maxRebalanceTimeout(), g.completeJoin)
	g.tryCompleteJoin()
}

// scheduleInitialJoin arms one step of Kafka's InitialDelayedJoin: when it
// fires, a new member that arrived meanwhile buys another delay (at most the
// remaining rebalance timeout); otherwise the join phase completes.
func (g *classicGroup) scheduleInitialJoin(delay, remaining time.Duration) {
	g.initialJoin = true
	g.scheduleJoin(delay, func() {
		if g.newMemberAdded && remaining > 0 {
			g.newMemberAdded = false
			g.scheduleInitialJoin(min(g.c.cfg.InitialRebalanceDelay, remaining), max(remaining-delay, 0))
			return
		}
		g.completeJoin()
	})
}

// tryCompleteJoin ends the join phase early once every member has rejoined,
// except during the initial delay, which always runs its course.
func (g *classicGroup) tryCompleteJoin() {
	if g.state == PreparingRebalance && !g.initialJoin && g.allJoined() {
		g.completeJoin()
	}
}

// completeJoin ends the join phase (Kafka's onCompleteJoin): dynamic
// members that did not rejoin are removed, the next generation starts and
// every waiting member gets its JoinGroup answer, the leader with the
// member list; then the members have the rebalance timeout to sync.
func (g *classicGroup) completeJoin() {
	if g.state != PreparingRebalance {
		return
	}
	g.stopJoinTimer()
	g.initialJoin = false
	g.newMemberAdded = false
	for _, id := range append([]string(nil), g.order...) {
		if m := g.members[id]; !m.awaitingJoin() && m.instanceID == "" {
			g.c.logger.Info("member did not rejoin in time", "group", g.id, "member", id)
			g.c.expired.Add(1)
			g.remove(id)
		}
	}
	if len(g.members) > 0 && !g.electJoinedLeader() {
		// Only static members that did not rejoin are left: wait another
		// rebalance timeout for them (or their sessions) rather than start a
		// generation nobody joined.
		g.c.logger.Warn("no member rejoined; waiting again", "group", g.id)
		g.scheduleJoin(g.maxRebalanceTimeout(), g.completeJoin)
		return
	}
	g.generation++
	defer func() { g.subscribed, g.subscribedKnown = g.computeSubscribedTopics() }()
	if len(g.members) == 0 {
		g.protocol = ""
		g.transition(Empty)
		g.storeAsync()
		return
	}
	g.protocol = g.selectProtocol()
	g.transition(CompletingRebalance)
	for _, id := range g.order {
		m := g.members[id]
		m.respondJoin(g.currentJoinResult(m))
		g.startSession(m)
		g.pendingSync[id] = true
	}
	g.scheduleSync()
}

// electJoinedLeader makes sure the leader is a member that rejoined (a
// static member may stay in the group without rejoining); it reports false
// when no member rejoined (Kafka's maybeElectNewJoinedLeader).
func (g *classicGroup) electJoinedLeader() bool {
	if l, ok := g.members[g.leader]; ok && l.awaitingJoin() {
		return true
	}
	for _, id := range g.order {
		if g.members[id].awaitingJoin() {
			g.leader = id
			return true
		}
	}
	return false
}

// joinMembers lists every member with its metadata for the chosen protocol,
// for the leader's JoinGroup answer.
func (g *classicGroup) joinMembers() []JoinMember {
	out := make([]JoinMember, 0, len(g.members))
	for _, id := range g.order {
		m := g.members[id]
		out = append(out, JoinMember{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadataFor(g.protocol)})
	}
	return out
}

// selectProtocol runs Kafka's vote: among the protocols every member
// supports, each member votes for the first of its own list; the most votes
// win. Ties go to the candidate the leader prefers, so the choice is
// deterministic.
func (g *classicGroup) selectProtocol() string {
	var candidates []string
	if l, ok := g.members[g.leader]; ok {
		for _, p := range l.protocols {
			if g.allSupport(p.Name) {
				candidates = append(candidates, p.Name)
			}
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	votes := make(map[string]int, len(candidates))
	for _, m := range g.members {
		for _, p := range m.protocols {
			if hasName(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, c := range candidates[1:] {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func hasName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// removeMemberAndUpdate removes a member that left or failed and moves the
// group on (Kafka's removeMemberAndUpdateGroup).
func (g *classicGroup) removeMemberAndUpdate(m *classicMember, reason string) {
	m.respondJoin(JoinResult{Err: ErrUnknownMemberID})
	m.respondSync(SyncResult{Err: ErrUnknownMemberID})
	g.remove(m.id)
	switch g.state {
	case Stable, CompletingRebalance:
		g.maybePrepareRebalance(reason)
	case PreparingRebalance:
		g.tryCompleteJoin()
	}
}

// resetAssignments clears every assignment and fails waiting syncs with err
// (Kafka's resetAndPropagateAssignmentError).
func (g *classicGroup) resetAssignments(err error) {
	for _, m := range g.members {
		m.assignment = nil
		m.respondSync(SyncResult{Err: err})
	}
}

// storeAsync writes the group's metadata without making anyone wait for it
// (used when a group becomes Empty; Kafka only logs a failure there too).
func (g *classicGroup) storeAsync() {
	f := g.c.write(&fsm.GroupPut{Group: g.record()})
	go func() {
		if err := waitWrite(f); err != nil {
			g.c.logger.Warn("storing group failed", "group", g.id, "error", err)
		}
	}()
}
