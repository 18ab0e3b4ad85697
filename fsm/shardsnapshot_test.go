package fsm

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kcoord/kcoord/release"
	"github.com/tinylib/msgp/msgp"
)

// referenceSnapshot writes f's snapshot as releases before the streamed
// one did: the whole shardSnapshot document built, sorted and encoded by
// go-msgpack's reflection.
func referenceSnapshot(tb testing.TB, f *ShardFSM) []byte {
	tb.Helper()
	f.mu.RLock()
	s := &shardSnapshot{ClusterID: f.clusterID, Groups: make([]Group, 0, f.groups.len()), Features: slices.Clone(f.features)}
	f.groups.each(func(g Group) { s.Groups = append(s.Groups, g) })
	for _, g := range f.consumerGroups {
		s.ConsumerGroups = append(s.ConsumerGroups, g)
	}
	f.table.eachOffsets(func(group string, m groupOffsets) {
		m.each(func(tp TopicPartition, o Offset) {
			s.Offsets = append(s.Offsets, snapshotOffset{Group: group, TopicPartition: tp, Offset: o})
		})
	})
	f.mu.RUnlock()
	sort.Slice(s.Groups, func(i, j int) bool { return s.Groups[i].ID < s.Groups[j].ID })
	sort.Slice(s.ConsumerGroups, func(i, j int) bool { return s.ConsumerGroups[i].ID < s.ConsumerGroups[j].ID })
	sort.Slice(s.Offsets, func(i, j int) bool {
		a, b := s.Offsets[i], s.Offsets[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	var sink memSink
	if err := writeSnapshot(&sink, s); err != nil {
		tb.Fatal(err)
	}
	return sink.Bytes()
}

// persisted is f's snapshot as Persist writes it.
func persisted(tb testing.TB, f raft.FSM) []byte {
	tb.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		tb.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		tb.Fatal(err)
	}
	snap.Release()
	return sink.Bytes()
}

// applier returns a func that applies each command to f at the next index
// and fails t on a business error.
func applier(t testing.TB, f *ShardFSM) func(Command) {
	var index uint64
	return func(cmd Command) {
		t.Helper()
		index++
		if r := apply(t, f, index, cmd); r != nil {
			t.Fatalf("%T: %v", cmd, r)
		}
	}
}

// richShard holds every kind of state a shard snapshot carries, with
// awkward strings in every string and integers of every width.
func richShard(t *testing.T) *ShardFSM {
	f := NewShardFSM(0, nil)
	next := applier(t, f)
	next(&ClusterStamp{ID: "cluster\xfe"})
	for _, s := range awkwardStrings() {
		next(&GroupPut{Group: groupWith(s)})
		next(commitWith(s, 1000))
		next(commitWith(s+"/simple", 1<<40))
	}
	wide := &OffsetCommit{GroupID: "wide", Timestamp: 1}
	for i, v := range []int64{0, 1, 127, 128, 255, 256, 32767, 32768, 65535, 65536, 1<<31 - 1, 1 << 31, 1<<63 - 1, -1, -32, -33, -128, -129, -32768, -32769, -1 << 31, -1<<31 - 1, -1 << 63} {
		wide.Offsets = append(wide.Offsets, OffsetCommitPartition{Topic: "t", Partition: int32(v),
			Offset: Offset{Offset: v, LeaderEpoch: int32(v >> 32), CommitTimestamp: v, ExpireTimestamp: int64(i) - 1}})
	}
	next(wide)
	next(joinWrite("cg-b", "m1", 1, 5))
	next(joinWrite("cg-a\xff", "m2", 3, 6))
	next(&FeatureLevelSet{Feature: "kcoord.version", Level: 2})
	return f
}

// TestSnapshotBytesAreGoMsgpacks: the streamed snapshot is, byte for
// byte, the document go-msgpack writes, for every kind of state, so no
// persisted byte changed and a release before it reads it.
func TestSnapshotBytesAreGoMsgpacks(t *testing.T) {
	onlyGroups := NewShardFSM(0, nil)
	apply(t, onlyGroups, 1, &GroupPut{Group: sampleGroup("g")})
	onlyOffsets := NewShardFSM(0, nil)
	apply(t, onlyOffsets, 1, commitWith("g", 1))
	apply(t, onlyOffsets, 2, &GroupDelete{GroupID: "g"}) // an Empty group's delete keeps no offsets: commit again
	apply(t, onlyOffsets, 3, commitWith("h", 2))
	for name, f := range map[string]*ShardFSM{
		"empty":        NewShardFSM(0, nil),
		"rich":         richShard(t),
		"only groups":  onlyGroups,
		"only offsets": onlyOffsets,
		"large":        scaleShard(t, 2000, 10), // many buffers' worth
	} {
		got, want := persisted(t, f), referenceSnapshot(t, f)
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: %d bytes, go-msgpack wrote %d; first difference at %d:\n got % x\nwant % x",
				name, len(got), len(want), i, got[i:min(i+24, len(got))], want[i:min(i+24, len(want))])
		}
	}
}

// shardState is everything a ShardFSM holds, comparable with DeepEqual.
func shardState(f *ShardFSM) any {
	f.mu.RLock()
	defer f.mu.RUnlock()
	offsets := map[string]map[TopicPartition]Offset{}
	f.table.eachOffsets(func(g string, m groupOffsets) {
		offsets[g] = map[TopicPartition]Offset{}
		m.each(func(tp TopicPartition, o Offset) { offsets[g][tp] = o })
	})
	var groups []Group
	f.groups.each(func(g Group) { groups = append(groups, g) })
	slices.SortFunc(groups, func(a, b Group) int { return cmp.Compare(a.ID, b.ID) })
	return []any{f.clusterID, groups, f.consumerGroups, offsets, []FeatureLevel(f.features)}
}

// TestStreamedRestoreMatchesGoMsgpacks: what the streamed reader restores
// from a snapshot is what decoding the whole document with go-msgpack
// restored.
func TestStreamedRestoreMatchesGoMsgpacks(t *testing.T) {
	f := richShard(t)
	b := persisted(t, f)
	var doc shardSnapshot
	if err := readSnapshot(bytes.NewReader(b), &doc); err != nil {
		t.Fatal(err)
	}
	want := NewShardFSM(0, nil)
	s := restoredFrom(&doc)
	want.clusterID, want.groups, want.consumerGroups, want.table = s.clusterID, s.groups, s.consumerGroups, s.table
	want.features.restore(s.features)

	got := NewShardFSM(0, nil)
	if err := got.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
	if g, w := shardState(got), shardState(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("streamed restore:\n got %s\nwant %s", short(g), short(w))
	}
	if g, w := shardState(got), shardState(f); !reflect.DeepEqual(g, w) {
		t.Fatalf("restored state is not the snapshotted one:\n got %s\nwant %s", short(g), short(w))
	}
}

// TestStreamedRestoreReadsAnyKeyOrder: the reader takes what go-msgpack
// would from a document it did not write itself: keys in another order,
// keys it does not know, offsets out of order with a later duplicate, and
// a group's offsets in two runs.
func TestStreamedRestoreReadsAnyKeyOrder(t *testing.T) {
	record := func(b []byte, group, topic string, p int32, offset int64, extra bool) []byte {
		n := uint32(4)
		if extra {
			n++
		}
		b = msgp.AppendMapHeader(b, n)
		b = msgp.AppendString(b, "p")
		b = msgp.AppendInt32(b, p)
		if extra {
			b = msgp.AppendString(b, "future")
			b = msgp.AppendArrayHeader(b, 1)
			b = msgp.AppendString(b, "skipped")
		}
		b = msgp.AppendString(b, "o")
		b = msgp.AppendMapHeader(b, 3)
		b = msgp.AppendString(b, "offset")
		b = msgp.AppendInt64(b, offset)
		b = msgp.AppendString(b, "unknown")
		b = msgp.AppendFloat64(b, 1.5)
		b = msgp.AppendString(b, "expire_ts")
		b = msgp.AppendInt64(b, -1)
		b = msgp.AppendString(b, "t")
		b = msgp.AppendString(b, topic)
		b = msgp.AppendString(b, "g")
		return msgp.AppendString(b, group)
	}
	b := []byte{snapshotVersionMsgpack}
	b = msgp.AppendMapHeader(b, 5)
	b = msgp.AppendString(b, "offsets")
	b = msgp.AppendArrayHeader(b, 5)
	b = record(b, "g2", "t", 9, 1, false)
	b = record(b, "g1", "t", 3, 2, true)
	b = record(b, "g2", "t", 1, 3, false)
	b = record(b, "g1", "t", 3, 4, false) // replaces g1's earlier t-3
	b = record(b, "g1", "s", 0, 5, false)
	b = msgp.AppendString(b, "added_later")
	b = msgp.AppendMapHeader(b, 1)
	b = msgp.AppendString(b, "k")
	b = msgp.AppendNil(b)
	b = msgp.AppendString(b, "groups")
	b = msgp.AppendNil(b)
	b = msgp.AppendString(b, strings.Repeat("long key ", 20)) // longer than any key read
	b = msgp.AppendString(b, "skipped")
	b = msgp.AppendString(b, "cluster_id")
	b = msgp.AppendString(b, "c")

	f := NewShardFSM(0, nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
	o := func(v int64) Offset { return Offset{Offset: v, ExpireTimestamp: -1} }
	want := map[string]map[TopicPartition]Offset{
		"g1": {{"t", 3}: o(4), {"s", 0}: o(5)},
		"g2": {{"t", 9}: o(1), {"t", 1}: o(3)},
	}
	for g, w := range want {
		if got := f.Offsets(g); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %v, want %v", g, got, w)
		}
	}
	if f.ClusterID() != "c" || len(f.Groups()) != 0 {
		t.Errorf("cluster %q, groups %v", f.ClusterID(), f.Groups())
	}
}

// TestStreamedRestoreRefusesBrokenOffsets: a snapshot broken inside its
// offsets is refused whole, with ErrMalformedSnapshot, and the state
// stays as it was; a length it claims but does not hold costs no memory.
func TestStreamedRestoreRefusesBrokenOffsets(t *testing.T) {
	good := persisted(t, richShard(t))
	head := []byte{snapshotVersionMsgpack}
	head = msgp.AppendMapHeader(head, 1)
	head = msgp.AppendString(head, "offsets")
	for name, b := range map[string][]byte{
		"truncated in an offset": good[:len(good)-5],
		"offsets not a list":     msgp.AppendInt32(slices.Clone(head), 3),
		"a record not a map":     msgp.AppendString(msgp.AppendArrayHeader(slices.Clone(head), 1), "x"),
		"a partition too large":  msgp.AppendInt64(msgp.AppendString(msgp.AppendMapHeader(msgp.AppendArrayHeader(slices.Clone(head), 1), 1), "p"), 1<<40),
		"a group not a string":   msgp.AppendInt64(msgp.AppendString(msgp.AppendMapHeader(msgp.AppendArrayHeader(slices.Clone(head), 1), 1), "g"), 1),
		"more records promised":  msgp.AppendArrayHeader(slices.Clone(head), 3),
		"a key claiming 4 GiB":   append([]byte{snapshotVersionMsgpack, 0x81, 0xdb, 0xff, 0xff, 0xff, 0xff}, "groups"...),
		"a group claiming 2 GiB": append(msgp.AppendString(msgp.AppendMapHeader(msgp.AppendArrayHeader(slices.Clone(head), 1), 1), "g"), 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x'),
	} {
		f := richShard(t)
		before := shardState(f)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		err := f.Restore(io.NopCloser(bytes.NewReader(b)))
		runtime.ReadMemStats(&ms1)
		if !errors.Is(err, ErrMalformedSnapshot) {
			t.Errorf("%s: got %v", name, err)
		}
		if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 16<<20 {
			t.Errorf("%s: restoring %d bytes allocated %d MiB", name, len(b), alloc>>20)
		}
		if !reflect.DeepEqual(shardState(f), before) {
			t.Errorf("%s: a failed restore changed the state", name)
		}
	}
}

// scaleShard is a shard of groups × partitions offsets of one topic, made
// by commits as clients make them (each group Empty, with no protocol).
func scaleShard(tb testing.TB, groups, partitions int) *ShardFSM {
	tb.Helper()
	f := NewShardFSM(0, nil)
	for g := range groups {
		c := &OffsetCommit{GroupID: fmt.Sprintf("consumer-group-%07d", g), Timestamp: 1_700_000_000_000 + int64(g)}
		for p := range int32(partitions) {
			c.Offsets = append(c.Offsets, OffsetCommitPartition{Topic: "orders", Partition: p,
				Offset: Offset{Offset: int64(g)*1000 + int64(p), LeaderEpoch: 3, ExpireTimestamp: -1}})
		}
		f.applyOffsetCommit(c)
	}
	return f
}

// BenchmarkShardSnapshot reports, for a shard of 100 k groups × 10
// partitions, what its snapshot and its restore cost a node, streamed
// (version 2) and packed (version 3, packedsnapshot.go) beside the whole
// document through go-msgpack's reflection (as before),
// per offset: the time of Snapshot (on raft's FSM goroutine, where
// applies wait), the heap its copy holds until Persist ends, the time of
// Persist, and the time and allocations of Restore.
//
//	go test ./fsm -run '^$' -bench ShardSnapshot -benchtime 3x
func BenchmarkShardSnapshot(b *testing.B) {
	const groups, partitions = 100_000, 10
	const offsets = groups * partitions
	f := scaleShard(b, groups, partitions)
	packed := stampedAt(b, scaleShard(b, groups, partitions), release.Level3)
	// persist writes s's snapshot into a sink grown to the size of the
	// last one, so that what is timed is the snapshot, not the sink.
	var last int
	persist := func(s *ShardFSM) (any, []byte) {
		snap, _ := s.Snapshot()
		var sink memSink
		sink.Grow(last)
		if err := snap.Persist(&sink); err != nil {
			b.Fatal(err)
		}
		last = sink.Len()
		return snap, sink.Bytes()
	}
	restore := func(p []byte) error { return NewShardFSM(0, nil).Restore(io.NopCloser(bytes.NewReader(p))) }
	type pair struct {
		snapshot func() (any, []byte) // what is held, and the bytes
		restore  func([]byte) error
	}
	for _, tc := range []struct {
		name string
		pair
	}{
		{"streamed", pair{snapshot: func() (any, []byte) { return persist(f) }, restore: restore}},
		{"packed", pair{snapshot: func() (any, []byte) { return persist(packed) }, restore: restore}},
		{"go-msgpack-document", pair{
			snapshot: func() (any, []byte) { return nil, referenceSnapshot(b, f) },
			restore: func(p []byte) error {
				var doc shardSnapshot
				if err := readSnapshot(bytes.NewReader(p), &doc); err != nil {
					return err
				}
				restoredFrom(&doc)
				return nil
			},
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			last = 0
			for b.Loop() {
				start := time.Now()
				held, p := tc.snapshot()
				took := time.Since(start)
				runtime.KeepAlive(held)

				var ms0, ms1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms0)
				start = time.Now()
				if err := tc.restore(p); err != nil {
					b.Fatal(err)
				}
				restored := time.Since(start)
				runtime.ReadMemStats(&ms1)
				b.ReportMetric(float64(took.Nanoseconds())/offsets, "snapshot+persist-ns/offset")
				b.ReportMetric(float64(restored.Nanoseconds())/offsets, "restore-ns/offset")
				b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/offsets, "restore-alloc-B/offset")
				b.ReportMetric(float64(len(p))/offsets, "snapshot-B/offset")
			}
		})
	}
	b.Run("copy-held", func(b *testing.B) {
		for b.Loop() {
			before := heapAfterGC()
			start := time.Now()
			snap, _ := f.Snapshot()
			took := time.Since(start)
			b.ReportMetric(float64(heapAfterGC()-before)/offsets, "streamed-copy-B/offset")
			b.ReportMetric(float64(took.Nanoseconds())/offsets, "streamed-snapshot-ns/offset")
			runtime.KeepAlive(snap)
		}
	})
}
