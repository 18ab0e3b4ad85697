package raftnet

import "testing"

// What a follower acknowledged to an earlier leadership of this node does
// not count in a later one: a leader in between may have truncated its
// log, so an old high index would make it look caught up (and promote a
// learner that is not) or lag less than it does.
func TestMatchTrackerCountsOnlyTheCurrentTerm(t *testing.T) {
	m := newMatchTracker()
	m.acked("2", 5, 100)
	if index, at := m.get("2", 5); index != 100 || at.IsZero() {
		t.Fatalf("term 5: %d at %v, want 100 just now", index, at)
	}
	if index, at := m.get("2", 7); index != 0 || !at.IsZero() {
		t.Errorf("term 7 before any answer of it: %d at %v, want nothing", index, at)
	}
	m.acked("2", 7, 0) // a heartbeat of term 7: contact, no index
	m.acked("2", 7, 40)
	m.acked("2", 5, 120) // a late answer to the old leadership
	if index, _ := m.get("2", 7); index != 40 {
		t.Errorf("term 7: index %d, want 40 (the old term's 100 and 120 do not count)", index)
	}
}
