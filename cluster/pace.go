package cluster

// paceHeartbeats sets the HeartbeatTimeout (and an ElectionTimeout no
// shorter) the shard's Raft runs with for its role: LeaderHeartbeatTimeout
// while it leads, HeartbeatTimeout otherwise.
//
// hashicorp/raft's leader runs a heartbeat goroutine per follower that
// wakes every tenth to fifth of its own HeartbeatTimeout; with fifty
// shards those wakeups were half of an idle cluster's. The followers'
// contact no longer depends on them (the beatHub's frames carry it), only
// the leader's lease does, so a leader's Raft heartbeats at the slowest
// pace its lease allows. Only the leader's own timeouts change: its
// followers still elect after HeartbeatTimeout, so failover does not. A
// leader's ElectionTimeout bounds how long its leadership transfers wait.
//
// The leadership loop calls it on every notification, nudgeElection
// around its nudge; reloadMu orders them. A Raft stepping down starts its
// follower timer from the leader's longer timeout, and the reload back
// resets it (ReloadConfig does that for a shorter HeartbeatTimeout).
func (s *Shard) paceHeartbeats(leader bool) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	s.reloadTimeouts(leader)
}

// reloadTimeouts does paceHeartbeats' work with reloadMu held.
func (s *Shard) reloadTimeouts(leader bool) {
	have := s.Raft.ReloadableConfig()
	want := have
	want.HeartbeatTimeout, want.ElectionTimeout = s.heartbeat, s.election
	switch {
	case s.disk.fenced():
		want.HeartbeatTimeout, want.ElectionTimeout = fencedTimeout, fencedTimeout
	case leader:
		want.HeartbeatTimeout = max(s.heartbeat, s.leaderHeartbeat)
		want.ElectionTimeout = max(s.election, want.HeartbeatTimeout)
	}
	if have == want {
		return
	}
	if err := s.Raft.ReloadConfig(want); err != nil {
		s.logger.Warn("setting the shard's heartbeat pace failed", "shard", s.ID, "leader", leader, "error", err)
	}
}
