package fsm

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/hashicorp/raft"
)

// appliedShard is a shard of groups × partitions offsets of one topic,
// built as a replica builds it: each group's commit encoded and applied
// through Apply, so every string in it is one a decoded command made.
func appliedShard(tb testing.TB, groups, partitions int) *ShardFSM {
	tb.Helper()
	f := NewShardFSM(0, nil)
	for g := range groups {
		c := &OffsetCommit{GroupID: fmt.Sprintf("group-%07d", g), Timestamp: 1_700_000_000_000 + int64(g)}
		for p := range int32(partitions) {
			c.Offsets = append(c.Offsets, OffsetCommitPartition{Topic: "orders", Partition: p,
				Offset: Offset{Offset: int64(g) + int64(p), LeaderEpoch: 3, ExpireTimestamp: -1}})
		}
		b, err := Encode(c)
		if err != nil {
			tb.Fatal(err)
		}
		if r := f.Apply(&raft.Log{Index: uint64(g + 1), Type: raft.LogCommand, Data: b}); r != nil {
			tb.Fatal(r)
		}
	}
	return f
}

// TestGroupsCommittingToATopicShareItsName: the topic's name is held once
// for all the groups that commit to it, not once a group (each commit
// decodes its own copy).
func TestGroupsCommittingToATopicShareItsName(t *testing.T) {
	f := appliedShard(t, 3, 2)
	var names []*byte
	f.table.eachOffsets(func(_ string, m groupOffsets) {
		names = append(names, unsafe.StringData(m.topics[0].topic))
	})
	if names[0] != names[1] || names[1] != names[2] {
		t.Fatal("three groups committing to one topic hold three copies of its name")
	}
}

// BenchmarkShardGC reports what a shard of 100 k groups × 10 partitions,
// built through Apply, costs the garbage collector: the heap objects it
// holds a group, its heap bytes an offset, and the time of a full
// collection with it live (what each GC cycle of a node marks, the state
// being most of a large node's heap).
//
//	go test ./fsm -run '^$' -bench ShardGC -benchtime 5x
func BenchmarkShardGC(b *testing.B) {
	const groups, partitions = 100_000, 10
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	f := appliedShard(b, groups, partitions)
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	var took time.Duration
	for b.Loop() {
		start := time.Now()
		runtime.GC()
		took += time.Since(start)
	}
	b.ReportMetric(float64(took.Microseconds())/float64(b.N)/1000, "gc-ms")
	b.ReportMetric(float64(ms1.HeapObjects-ms0.HeapObjects)/groups, "objects/group")
	b.ReportMetric(float64(ms1.HeapAlloc-ms0.HeapAlloc)/(groups*partitions), "B/offset")
	runtime.KeepAlive(f)
}
