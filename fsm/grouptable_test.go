package fsm

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// tableModel is what a groupTable's offsets should be, kept in plain
// maps.
type tableModel map[string]map[TopicPartition]Offset

// checkTable compares t with want and simple (the groups marked simple)
// and checks t's own invariants: every record found from its home, holding
// offsets or marked simple, the counts, each record's topics sorted and
// unique, its partitions sorted, and each topic name counted once per
// record holding it and let go when none does.
func checkTable(tb testing.TB, t *groupTable, want tableModel, simple map[string]int64) {
	tb.Helper()
	if t.offsetGroupCount() != len(want) || t.simpleGroupCount() != len(simple) {
		tb.Fatalf("%d groups with offsets and %d simple, want %d and %d", t.offsetGroupCount(), t.simpleGroupCount(), len(want), len(simple))
	}
	refs := map[uint32]uint32{}
	seen := 0
	for i, e := range t.index {
		if e == 0 {
			continue
		}
		seen++
		rec := t.arena.record(t.refAt(i))
		id := string(recordID(rec))
		if j, ok := find(t, hashOf(t, id), id); !ok || j != i {
			tb.Fatalf("group %q at %d is found at %d (%v)", id, i, j, ok)
		}
		if home := int(hashOf(t, id) >> t.shift); t.home(e) != home {
			tb.Fatalf("group %q's entry says it belongs at %d, its hash at %d", id, t.home(e), home)
		}
		_, hasOffsets := want[id]
		ts, isSimple := simple[id]
		if m := simpleMarkOf(rec); m != (simpleMark{isSimple, ts}) || !hasOffsets && !isSimple {
			tb.Fatalf("group %q is marked %+v, want simple %v since %d (offsets: %v)", id, m, isSimple, ts, hasOffsets)
		}
		recordTopics(rec, func(rt recordTopic) bool {
			refs[rt.id]++
			return true
		})
	}
	if seen != t.records {
		tb.Fatalf("%d entries, count %d", seen, t.records)
	}
	for id, n := range t.topics.refs {
		if n == 0 {
			if !slices.Contains(t.topics.free, uint32(id)) {
				tb.Fatalf("topic id %d, held by no record, is not free", id)
			}
			continue
		}
		if refs[uint32(id)] != n {
			tb.Fatalf("topic %q is counted %d times, held by %d records", t.topics.names[id], n, refs[uint32(id)])
		}
		if t.topics.byName[t.topics.names[id]] != uint32(id) {
			tb.Fatalf("topic %q is not found by its name", t.topics.names[id])
		}
	}
	if len(t.topics.byName) != len(t.topics.names)-len(t.topics.free) {
		tb.Fatalf("%d names found by name, %d held", len(t.topics.byName), len(t.topics.names)-len(t.topics.free))
	}
	for group, offsets := range want {
		g, ok := t.offsets(group)
		if !ok {
			tb.Fatalf("group %q is missing", group)
		}
		if err := g.check(); err != nil {
			tb.Fatalf("group %q: %v", group, err)
		}
		got := map[TopicPartition]Offset{}
		g.each(func(tp TopicPartition, o Offset) { got[tp] = o })
		if !maps.Equal(got, offsets) {
			tb.Fatalf("group %q holds %v, want %v", group, got, offsets)
		}
		for tp, o := range offsets {
			if got, ok := t.offset(group, tp); !ok || got != o {
				tb.Fatalf("get(%q, %v) = %+v, %v; want %+v", group, tp, got, ok, o)
			}
		}
	}
}

// TestGroupTableHoldsWhatMapsWould drives a table and maps through the
// same random writes (commits that add and replace, with and without
// metadata and expiry, groups too large for a shared chunk, removals of
// partitions and of whole groups' offsets, groups marked simple and
// unmarked, enough groups to grow the index and shift its entries back)
// and compares them after each step.
func TestGroupTableHoldsWhatMapsWould(t *testing.T) { holdsWhatMapsWould(t) }

// TestGroupTableHoldsWhatMapsWouldPastItsTagsHomes is the same with the
// entries' tags naming their homes only in an index of up to 32 places,
// so that growing and removing in a larger one rehash the ids, as an
// index of more than 2^23 places does.
func TestGroupTableHoldsWhatMapsWouldPastItsTagsHomes(t *testing.T) {
	defer func(bits uint) { tagHomeBits = bits }(tagHomeBits)
	tagHomeBits = 5
	holdsWhatMapsWould(t)
}

func holdsWhatMapsWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	table, model, simple := newGroupTable(), tableModel{}, map[string]int64{}
	// The last topics are rare, so that they come and go: their names
	// are let go and their ids reused.
	topics := []string{"orders", "payments", "a", strings.Repeat("long-topic-", 20), "rare-0", "rare-1", "rare-2"}
	topic := func() string {
		if rng.IntN(500) == 0 {
			return topics[4+rng.IntN(3)]
		}
		return topics[rng.IntN(4)]
	}
	for step := range 3000 {
		group := fmt.Sprintf("group-%d", rng.IntN(80))
		switch r := rng.IntN(20); {
		case r < 13: // a commit
			n := 1 + rng.IntN(12)
			if rng.IntN(500) == 0 {
				n = 12_000 // a record of its own chunk
			}
			batch := make([]tpOffset, 0, n)
			for range n {
				o := Offset{Offset: rng.Int64N(1 << 40), LeaderEpoch: rng.Int32N(5) - 1, CommitTimestamp: int64(step), ExpireTimestamp: -1}
				switch rng.IntN(10) {
				case 0:
					o.Metadata = strings.Repeat("m", rng.IntN(40))
				case 1:
					o.ExpireTimestamp = rng.Int64N(1000)
				}
				tp := TopicPartition{Topic: topic(), Partition: rng.Int32N(int32(max(16, n)))}
				batch = append(batch, tpOffset{tp, o})
				if model[group] == nil {
					model[group] = map[TopicPartition]Offset{}
				}
				model[group][tp] = o
			}
			table.setOffsets(group, sortBatch(batch))
		case r < 16: // a removal of partitions
			var tps []TopicPartition
			for range 1 + rng.IntN(8) {
				tp := TopicPartition{Topic: topic(), Partition: rng.Int32N(16)}
				tps = append(tps, tp)
				delete(model[group], tp)
			}
			if len(model[group]) == 0 {
				delete(model, group)
			}
			slices.SortFunc(tps, compareTP)
			table.removeOffsets(group, slices.Compact(tps))
		case r < 18: // a group's offsets deleted
			table.deleteOffsets(group)
			delete(model, group)
		case r < 19: // marked simple
			markSimple(table, group, simpleMark{simple: true, ts: int64(step)})
			simple[group] = int64(step)
		default: // unmarked
			markSimple(table, group, simpleMark{})
			delete(simple, group)
		}
		if step%100 == 0 || step > 2950 {
			checkTable(t, table, model, simple)
		}
	}
	checkTable(t, table, model, simple)
}

// TestASnapshotsCloneKeepsItsPointInTime: writes after the clone change
// nothing it holds, even those that reuse the slots of records freed.
func TestASnapshotsCloneKeepsItsPointInTime(t *testing.T) {
	table, model := newGroupTable(), tableModel{}
	commit := func(group string, partitions int, offset int64) {
		var batch []tpOffset
		for p := range int32(partitions) {
			batch = append(batch, tpOffset{TopicPartition{"t", p}, Offset{Offset: offset, ExpireTimestamp: -1}})
		}
		table.setOffsets(group, batch)
	}
	for g := range 100 {
		commit(fmt.Sprint("g", g), 3, 1)
	}
	table.eachOffsets(func(group string, g groupOffsets) {
		model[group] = map[TopicPartition]Offset{}
		g.each(func(tp TopicPartition, o Offset) { model[group][tp] = o })
	})
	clone := table.readOnlyClone()
	for g := range 100 {
		switch g % 3 {
		case 0:
			table.deleteOffsets(fmt.Sprint("g", g))
		case 1:
			commit(fmt.Sprint("g", g), 3, 2) // in place
		default:
			commit(fmt.Sprint("g", g), 40, 3) // a bigger slot
		}
		commit(fmt.Sprint("new", g), 3, 4)
	}
	got := tableModel{}
	var g groupOffsets
	for _, rec := range clone.sortedRecords() {
		clone.decode(rec, &g)
		m := map[TopicPartition]Offset{}
		g.each(func(tp TopicPartition, o Offset) { m[tp] = o })
		got[string(recordID(rec))] = m
	}
	if !maps.EqualFunc(got, model, maps.Equal) {
		t.Fatalf("the clone holds %d groups, changed by writes after it", len(got))
	}
}

// TestACommitOfHeldPartitionsAllocatesNothing: a consumer's every commit
// after its first overwrites its offsets where they are.
func TestACommitOfHeldPartitionsAllocatesNothing(t *testing.T) {
	table := newGroupTable()
	batch := make([]tpOffset, 10)
	for p := range batch {
		batch[p] = tpOffset{TopicPartition{"orders", int32(p)}, Offset{Offset: 1, ExpireTimestamp: -1}}
	}
	table.setOffsets("g", batch)
	allocs := testing.AllocsPerRun(100, func() {
		batch[3].o.Offset++
		table.setOffsets("g", batch)
	})
	if allocs != 0 {
		t.Errorf("a commit of held partitions allocated %.0f times", allocs)
	}
	if o, _ := table.offset("g", TopicPartition{"orders", 3}); o.Offset != batch[3].o.Offset {
		t.Errorf("offset %d, want %d", o.Offset, batch[3].o.Offset)
	}
	id := []byte("g") // as a restore finds it
	if allocs := testing.AllocsPerRun(100, func() { hasOffsets(table, id) }); allocs != 0 {
		t.Errorf("finding a group by its bytes allocated %.0f times", allocs)
	}
}

// TestTheArenaReusesWhatItFrees: a freed slot is the next of its class,
// and the chunk a large record gave back is the next chunk made.
func TestTheArenaReusesWhatItFrees(t *testing.T) {
	a := newRecordArena()
	small := a.alloc(100)
	large := a.alloc(maxClassSize + 1)
	if got := len(a.record(large)); got != maxClassSize+1 {
		t.Fatalf("a large record's chunk holds %d bytes", got)
	}
	a.release(small)
	if again := a.alloc(110); again != small {
		t.Errorf("a slot of the class freed was not reused")
	}
	a.release(large)
	chunks := len(a.chunks)
	for a.cur == 0 { // fill the first shared chunk
		a.alloc(maxClassSize)
	}
	if len(a.chunks) != chunks || a.cur != int(large>>refOffsetBits) {
		t.Errorf("the next shared chunk is %d of %d, not the one given back (%d)", a.cur, len(a.chunks), large>>refOffsetBits)
	}
}

// TestALargeGroupsWriteLeavesNoLargeScratch: the arrays a write of
// thousands of partitions needed are not kept for the next.
func TestALargeGroupsWriteLeavesNoLargeScratch(t *testing.T) {
	table := newGroupTable()
	var batch []tpOffset
	for p := range int32(20_000) {
		batch = append(batch, tpOffset{TopicPartition{"orders", p}, Offset{Offset: 1, ExpireTimestamp: -1, Metadata: "m"}})
	}
	table.setOffsets("big", batch)
	table.setOffsets("big", batch[:1]) // a merge: metadata makes it one
	if cap(table.buf) > maxScratchBytes || cap(table.scratch.topics) > 0 {
		t.Errorf("the scratch keeps %d bytes of buffer and %d topics", cap(table.buf), cap(table.scratch.topics))
	}
	table.removeOffsets("big", []TopicPartition{{"orders", 7}})
	if cap(table.buf) > maxScratchBytes || cap(table.scratch.topics) > 0 {
		t.Errorf("after a removal the scratch keeps %d bytes of buffer and %d topics", cap(table.buf), cap(table.scratch.topics))
	}
	if g, _ := table.offsets("big"); g.len() != len(batch)-1 {
		t.Errorf("%d offsets, want %d", g.len(), len(batch)-1)
	}
}

// eachOffsets calls fn with a copy of each group's offsets, in no order.
func (t *groupTable) eachOffsets(fn func(group string, g groupOffsets)) {
	t.eachRecord(func(rec []byte) {
		if recordCount(rec) > 0 {
			var g groupOffsets
			decodeRecord(rec, t.topics.names, &g)
			fn(string(recordID(rec)), g)
		}
	})
}
