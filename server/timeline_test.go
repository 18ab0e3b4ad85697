package server

import (
	"testing"
	"time"
)

// The timeline keeps its newest timelineSize events, newest first, once
// it has wrapped.
func TestTimelineKeepsTheNewestEvents(t *testing.T) {
	var tl timeline
	base := time.Unix(1700000000, 0)
	const n = timelineSize*2 + 7
	for i := range n {
		tl.add(Event{At: base.Add(time.Duration(i) * time.Second), Generation: int32(i)})
	}
	got := tl.recent()
	if len(got) != timelineSize {
		t.Fatalf("%d events kept, want %d", len(got), timelineSize)
	}
	for i, e := range got {
		if want := int32(n - 1 - i); e.Generation != want {
			t.Fatalf("event %d is #%d, want #%d (newest first)", i, e.Generation, want)
		}
	}
	var short timeline
	short.add(Event{Generation: 1})
	short.add(Event{Generation: 2})
	if got := short.recent(); len(got) != 2 || got[0].Generation != 2 || got[1].Generation != 1 {
		t.Errorf("before wrapping: %+v", got)
	}
}

// When a shard's leadership moved between two nodes' reports, its groups
// are the new leader's (the higher term): a group only the former leader
// still holds is not listed, and a shard nobody reported is named.
func TestMergeGroupReportsKeepsTheHigherTermsShard(t *testing.T) {
	former := GroupsReport{
		Shards: []ReportedShard{{Shard: 3, Term: 5}, {Shard: 1, Term: 2}},
		Groups: []GroupSummary{{Group: "gone", Shard: 3, Coordinator: 1}, {Group: "a", Shard: 3, Coordinator: 1, State: "PreparingRebalance"}, {Group: "b", Shard: 1, Coordinator: 1}},
	}
	current := GroupsReport{
		Shards: []ReportedShard{{Shard: 3, Term: 6}},
		Groups: []GroupSummary{{Group: "a", Shard: 3, Coordinator: 2, State: "Stable"}},
	}
	for _, order := range [][]GroupsReport{{former, current}, {current, former}} {
		groups, unreported := mergeGroupReports(order, []int32{0, 1, 2, 3})
		if len(groups) != 2 || groups[0].Group != "a" || groups[0].Coordinator != 2 || groups[0].State != "Stable" || groups[1].Group != "b" {
			t.Errorf("merged %+v, want a from node 2 (term 6) and b", groups)
		}
		if len(unreported) != 2 || unreported[0] != 0 || unreported[1] != 2 {
			t.Errorf("unreported %v, want [0 2]", unreported)
		}
	}
}
