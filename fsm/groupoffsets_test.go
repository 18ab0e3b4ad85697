package fsm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestGroupOffsetsBehavesAsAMap runs random sets, removes and gets against
// a map[TopicPartition]Offset and compares everything after each step.
func TestGroupOffsetsBehavesAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var g groupOffsets
	model := map[TopicPartition]Offset{}
	topics := []string{"a", "b", "\xff", "", "orders"}
	for step := range 20000 {
		tp := TopicPartition{Topic: topics[rng.IntN(len(topics))], Partition: int32(rng.IntN(40)) - 2}
		switch rng.IntN(3) {
		case 0, 1:
			o := Offset{Offset: rng.Int64(), LeaderEpoch: rng.Int32(), Metadata: fmt.Sprint(step), CommitTimestamp: int64(step), ExpireTimestamp: -1}
			g.set(tp, o)
			model[tp] = o
		case 2:
			g.remove(tp)
			delete(model, tp)
		}
		if got, ok := g.get(tp); ok != (model[tp] != Offset{}) || got != model[tp] {
			t.Fatalf("step %d: get(%v) = %+v %v, want %+v", step, tp, got, ok, model[tp])
		}
		if g.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, g.len(), len(model))
		}
	}
	seen := 0
	var last TopicPartition
	g.each(func(tp TopicPartition, o Offset) {
		if seen > 0 && (tp.Topic < last.Topic || tp.Topic == last.Topic && tp.Partition <= last.Partition) {
			t.Errorf("each: %v after %v, out of order", tp, last)
		}
		if model[tp] != o {
			t.Errorf("each: %v = %+v, want %+v", tp, o, model[tp])
		}
		last = tp
		seen++
	})
	if seen != len(model) {
		t.Errorf("each visited %d, want %d", seen, len(model))
	}
	for tp := range model {
		g.remove(tp)
	}
	if g.len() != 0 || len(g.topics) != 0 {
		t.Errorf("after removing everything: %d offsets, %d topics", g.len(), len(g.topics))
	}
	var nilSet *groupOffsets
	if nilSet.len() != 0 {
		t.Error("a nil set has offsets")
	}
	nilSet.each(func(TopicPartition, Offset) { t.Error("a nil set visits an offset") })
}

// BenchmarkOffsetsMemory reports the heap bytes per committed offset of
// 10 k groups × 10 partitions of one topic, in groupOffsets beside the map
// per group the FSM used before.
//
//	go test ./fsm -run '^$' -bench OffsetsMemory -benchtime 1x
func BenchmarkOffsetsMemory(b *testing.B) {
	const groups, partitions = 10_000, 10
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	o := Offset{Offset: 42, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1}
	b.Run("groupOffsets", func(b *testing.B) {
		for b.Loop() {
			before := heap()
			all := make(map[string]*groupOffsets, groups)
			for i := range groups {
				g := &groupOffsets{}
				g.reserve("orders", partitions) // as applyOffsetCommit does
				for p := range int32(partitions) {
					g.set(TopicPartition{Topic: "orders", Partition: p}, o)
				}
				all[fmt.Sprint("group-", i)] = g
			}
			b.ReportMetric(float64(heap()-before)/(groups*partitions), "B/offset")
			runtime.KeepAlive(all)
		}
	})
	b.Run("map-per-group", func(b *testing.B) {
		for b.Loop() {
			before := heap()
			all := make(map[string]map[TopicPartition]Offset, groups)
			for i := range groups {
				m := make(map[TopicPartition]Offset, partitions)
				for p := range int32(partitions) {
					m[TopicPartition{Topic: "orders", Partition: p}] = o
				}
				all[fmt.Sprint("group-", i)] = m
			}
			b.ReportMetric(float64(heap()-before)/(groups*partitions), "B/offset")
			runtime.KeepAlive(all)
		}
	})
}

func TestRecommittingDoesNotGrowTheOffsets(t *testing.T) {
	f := NewShardFSM(0, nil)
	commit := &OffsetCommit{GroupID: "g", Timestamp: 1}
	for p := range int32(10) {
		commit.Offsets = append(commit.Offsets, OffsetCommitPartition{Topic: "t", Partition: p, Offset: Offset{Offset: 1}})
	}
	for range 100 {
		f.applyOffsetCommit(commit)
	}
	if got := cap(f.offsets["g"].topics[0].parts); got != 10 {
		t.Errorf("after 100 commits of the same 10 partitions the slice holds %d", got)
	}
}
