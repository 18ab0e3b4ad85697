package fsm

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
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
			// Most offsets carry no metadata and no expiry, as clients
			// commit them; some carry either, or an expiry of 0.
			o := Offset{Offset: rng.Int64(), LeaderEpoch: rng.Int32(), CommitTimestamp: int64(step), ExpireTimestamp: -1}
			switch rng.IntN(8) {
			case 0:
				o.Metadata = fmt.Sprint(step)
			case 1:
				o.ExpireTimestamp = int64(step) + 1000
			case 2:
				o.ExpireTimestamp = 0
			}
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

// heapAfterGC is the heap in use after a collection: what the memory
// benchmarks count.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkOffsetsMemory reports the heap bytes per committed offset of
// 10 k groups × 10 partitions of one topic, in groupOffsets beside the map
// per group the FSM used before.
//
//	go test ./fsm -run '^$' -bench OffsetsMemory -benchtime 1x
func BenchmarkOffsetsMemory(b *testing.B) {
	const groups, partitions = 10_000, 10
	o := Offset{Offset: 42, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1}
	b.Run("groupOffsets", func(b *testing.B) {
		for b.Loop() {
			before := heapAfterGC()
			all := make(map[string]*groupOffsets, groups)
			for i := range groups {
				g := &groupOffsets{}
				batch := make([]tpOffset, 0, partitions)
				for p := range int32(partitions) {
					batch = append(batch, tpOffset{TopicPartition{Topic: "orders", Partition: p}, o})
				}
				g.setAll(sortBatch(batch)) // as applyOffsetCommit does
				all[fmt.Sprint("group-", i)] = g
			}
			b.ReportMetric(float64(heapAfterGC()-before)/(groups*partitions), "B/offset")
			runtime.KeepAlive(all)
		}
	})
	b.Run("map-per-group", func(b *testing.B) {
		for b.Loop() {
			before := heapAfterGC()
			all := make(map[string]map[TopicPartition]Offset, groups)
			for i := range groups {
				m := make(map[TopicPartition]Offset, partitions)
				for p := range int32(partitions) {
					m[TopicPartition{Topic: "orders", Partition: p}] = o
				}
				all[fmt.Sprint("group-", i)] = m
			}
			b.ReportMetric(float64(heapAfterGC()-before)/(groups*partitions), "B/offset")
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
	freed := func() (n int) {
		for _, free := range f.table.arena.free {
			n += len(free)
		}
		return n
	}
	f.applyOffsetCommit(commit)
	i, _ := find(f.table, hashOf(f.table, "g"), "g")
	ref, memory, freedFirst := f.table.refAt(i), f.table.memory(), freed()
	for range 100 {
		f.applyOffsetCommit(commit)
	}
	if f.table.memory() != memory || freed() != freedFirst {
		t.Errorf("after 100 commits of the same 10 partitions the table takes %d bytes (first %d), %d slots freed (first %d)", f.table.memory(), memory, freed(), freedFirst)
	}
	if i, _ := find(f.table, hashOf(f.table, "g"), "g"); f.table.refAt(i) != ref {
		t.Error("a commit of the partitions the group holds moved its record")
	}
}

// A commit (and a delete) of many partitions in any order, with duplicates
// and a topic's partitions in several runs, stores what applying them one
// by one into a map would, in one merge per topic (a shift per partition
// made 40 000 partitions in random order take most of a second).
func TestLargeCommitsInAnyOrder(t *testing.T) {
	f := NewShardFSM(0, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[TopicPartition]Offset{}
	for round := range 3 {
		commit := &OffsetCommit{GroupID: "big", Timestamp: int64(round + 1)}
		for i := range 40_000 {
			tp := TopicPartition{Topic: []string{"a", "b"}[i%2], Partition: int32(rng.IntN(30_000))}
			o := Offset{Offset: int64(i), CommitTimestamp: int64(round + 1)}
			commit.Offsets = append(commit.Offsets, OffsetCommitPartition{Topic: tp.Topic, Partition: tp.Partition, Offset: o})
			model[tp] = o // the last one given wins
		}
		f.applyOffsetCommit(commit)
	}
	del := &OffsetDelete{GroupID: "big"}
	for range 20_000 {
		tp := TopicPartition{Topic: []string{"a", "b", "c"}[rng.IntN(3)], Partition: int32(rng.IntN(30_000))}
		del.Partitions = append(del.Partitions, tp)
		delete(model, tp)
	}
	f.applyOffsetDelete(del)
	got := f.Offsets("big")
	big, _ := f.table.offsets("big")
	if len(got) != len(model) || big.len() != len(model) {
		t.Fatalf("%d offsets (count %d), want %d", len(got), big.len(), len(model))
	}
	for tp, o := range model {
		if got[tp] != o {
			t.Fatalf("%v = %+v, want %+v", tp, got[tp], o)
		}
	}
	for _, tt := range big.topics {
		if !slices.IsSortedFunc(tt.parts, func(a, b partitionOffset) int { return cmp.Compare(a.partition, b.partition) }) {
			t.Errorf("topic %s's partitions are not sorted", tt.topic)
		}
	}
}

// One commit that replaces offsets and adds others, mixing offsets with
// and without metadata or expiry in either part, stores each exactly, and
// a topic whose offsets all come plain keeps no extras.
func TestCommitsMixingMetadataAndExpiry(t *testing.T) {
	plain := func(off int64) Offset {
		return Offset{Offset: off, LeaderEpoch: 1, CommitTimestamp: 5, ExpireTimestamp: -1}
	}
	f := NewShardFSM(0, nil)
	model := map[TopicPartition]Offset{}
	apply := func(offsets map[int32]Offset, topic string) {
		t.Helper()
		c := &OffsetCommit{GroupID: "g", Timestamp: 5}
		for p, o := range offsets {
			c.Offsets = append(c.Offsets, OffsetCommitPartition{Topic: topic, Partition: p, Offset: o})
			model[TopicPartition{Topic: topic, Partition: p}] = o
		}
		f.applyOffsetCommit(c)
		if g, _ := f.table.offsets("g"); g.check() != nil {
			t.Fatal(g.check())
		}
		got := f.Offsets("g")
		if len(got) != len(model) {
			t.Fatalf("%d offsets, want %d", len(got), len(model))
		}
		for tp, o := range model {
			if got[tp] != o {
				t.Fatalf("%v = %+v, want %+v", tp, got[tp], o)
			}
		}
	}
	apply(map[int32]Offset{0: plain(1), 2: plain(1), 4: plain(1)}, "t")
	apply(map[int32]Offset{9: plain(9)}, "plain")
	// Replace 2 with metadata and add 1 and 3 plain, in one commit.
	withMeta := plain(2)
	withMeta.Metadata = "m"
	apply(map[int32]Offset{2: withMeta, 1: plain(2), 3: plain(2)}, "t")
	// Add partitions mixing plain, an expiry and an expiry of 0.
	expiring, zero := plain(3), plain(3)
	expiring.ExpireTimestamp, zero.ExpireTimestamp = 99, 0
	apply(map[int32]Offset{5: expiring, 6: plain(3), 7: zero}, "t")
	// And to a topic without extras, new partitions mixing both.
	apply(map[int32]Offset{8: withMeta, 10: plain(4)}, "plain")
	del := &OffsetDelete{GroupID: "g", Partitions: []TopicPartition{{Topic: "t", Partition: 2}, {Topic: "t", Partition: 5}, {Topic: "plain", Partition: 9}}}
	for _, tp := range del.Partitions {
		delete(model, tp)
	}
	f.applyOffsetDelete(del)
	apply(nil, "t")
	apply(map[int32]Offset{0: plain(7)}, "only-plain")
	g, _ := f.table.offsets("g")
	for _, tt := range g.topics {
		if tt.topic == "only-plain" && tt.extra != nil {
			t.Errorf("a topic of plain offsets keeps %d extras", len(tt.extra))
		}
	}
}

// check reports a broken invariant of g: a group in the FSM holds at least
// one offset, no topic is empty, topics and partitions are sorted and
// unique, and n counts them.
func (g *groupOffsets) check() error {
	if g.len() == 0 {
		return fmt.Errorf("an empty offsets set is kept")
	}
	n := 0
	for i, t := range g.topics {
		if len(t.parts) == 0 {
			return fmt.Errorf("topic %q has no partitions", t.topic)
		}
		if t.extra != nil && len(t.extra) != len(t.parts) {
			return fmt.Errorf("topic %q: %d extras beside %d partitions", t.topic, len(t.extra), len(t.parts))
		}
		if i > 0 && g.topics[i-1].topic >= t.topic {
			return fmt.Errorf("topics %q, %q out of order", g.topics[i-1].topic, t.topic)
		}
		for j, p := range t.parts {
			if j > 0 && t.parts[j-1].partition >= p.partition {
				return fmt.Errorf("topic %q: partitions %d, %d out of order", t.topic, t.parts[j-1].partition, p.partition)
			}
		}
		n += len(t.parts)
	}
	if n != g.n {
		return fmt.Errorf("counts %d offsets, holds %d", g.n, n)
	}
	return nil
}

// A group's first offsets are laid out directly (fill) exactly as the
// merges of setAll would lay them out: the same topics, parts and
// extras, extras only where a topic has a non-plain offset. Filling a
// scratch that held another group's gives the same.
func TestFillingAnEmptyGroupIsMerging(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var scratch groupOffsets
	for round := range 200 {
		var batch []tpOffset
		for range rng.IntN(40) {
			o := Offset{Offset: rng.Int64N(1000), LeaderEpoch: rng.Int32N(5) - 1, CommitTimestamp: int64(round), ExpireTimestamp: -1}
			if rng.IntN(8) == 0 {
				o.Metadata = "m"
			}
			if rng.IntN(8) == 0 {
				o.ExpireTimestamp = 99
			}
			batch = append(batch, tpOffset{TopicPartition{Topic: []string{"a", "b", "c"}[rng.IntN(3)], Partition: rng.Int32N(20)}, o})
		}
		batch = sortBatch(batch)
		merged := &groupOffsets{}
		for i := 0; i < len(batch); { // setAll's path for a group that holds something
			j := i + 1
			for j < len(batch) && batch[j].tp.Topic == batch[i].tp.Topic {
				j++
			}
			merged.mergeTopic(batch[i].tp.Topic, batch[i:j])
			i = j
		}
		filled := &groupOffsets{}
		filled.setAll(batch)
		if !reflect.DeepEqual(filled.topics, merged.topics) && len(batch) > 0 || filled.n != merged.n {
			t.Fatalf("round %d: filled %+v, merged %+v", round, filled, merged)
		}
		scratch.topics, scratch.n = scratch.topics[:0], 0
		scratch.setAll(batch)
		if !reflect.DeepEqual(scratch.topics, merged.topics) && len(batch) > 0 || scratch.n != merged.n {
			t.Fatalf("round %d: filled after another group %+v, merged %+v", round, scratch, merged)
		}
	}
}

// set stores o as tp's offset, replacing any.
func (g *groupOffsets) set(tp TopicPartition, o Offset) { g.setAll([]tpOffset{{tp, o}}) }

// remove deletes tp's offset, if any.
func (g *groupOffsets) remove(tp TopicPartition) { g.removeAll([]TopicPartition{tp}) }

// get returns tp's offset.
func (g *groupOffsets) get(tp TopicPartition) (Offset, bool) {
	i, ok := g.topic(tp.Topic)
	if !ok {
		return Offset{}, false
	}
	t := &g.topics[i]
	j, ok := t.partition(tp.Partition)
	if !ok {
		return Offset{}, false
	}
	return t.at(j), true
}

// partition is the index of p's offset in t, or where it would go.
func (t *topicOffsets) partition(p int32) (int, bool) {
	return slices.BinarySearchFunc(t.parts, p, func(po partitionOffset, p int32) int { return cmp.Compare(po.partition, p) })
}
