package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kcoord/kcoord/release"
	"github.com/tinylib/msgp/msgp"
)

// stampedAt applies a stamp of kcoord.version at level to f.
func stampedAt(t testing.TB, f *ShardFSM, level release.Level) *ShardFSM {
	t.Helper()
	if r := apply(t, f, 1<<20, &FeatureLevelSet{Feature: release.Feature, Level: int16(level)}); r != nil {
		t.Fatal(r)
	}
	return f
}

// TestAShardStampedAtLevel3WritesPackedSnapshots: a shard writes the
// packed snapshot once, and only once, its replicas are stamped to read
// it; before that it writes version 2, which every earlier build reads.
// Either restores to the state it was taken of, and writes it again byte
// for byte.
func TestAShardStampedAtLevel3WritesPackedSnapshots(t *testing.T) {
	for _, tc := range []struct {
		level release.Level
		want  byte
	}{
		{release.Level1, snapshotVersionMsgpack},
		{release.Level2, snapshotVersionMsgpack},
		{release.Level3, snapshotVersionPacked},
	} {
		f := richShard(t) // stamped at level 2
		if tc.level == release.Level1 {
			f = NewShardFSM(0, nil)
			apply(t, f, 1, commitWith("g", 1))
		} else {
			stampedAt(t, f, tc.level)
		}
		b := persisted(t, f)
		if b[0] != tc.want {
			t.Fatalf("level %d: snapshot version %d, want %d", tc.level, b[0], tc.want)
		}
		restored := NewShardFSM(0, nil)
		if err := restored.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
			t.Fatalf("level %d: %v", tc.level, err)
		}
		if got, want := shardState(restored), shardState(f); !reflect.DeepEqual(got, want) {
			t.Fatalf("level %d: restored another state:\n got %s\nwant %s", tc.level, short(got), short(want))
		}
		if again := persisted(t, restored); !bytes.Equal(again, b) {
			t.Fatalf("level %d: the restored state writes another snapshot", tc.level)
		}
	}
}

// TestPackedSnapshotHoldsEveryByte: the awkward strings, integers of
// every width, metadata and explicit expiries, consumer groups and whole
// groups all come back from a packed snapshot as they went in.
func TestPackedSnapshotHoldsEveryByte(t *testing.T) {
	f := stampedAt(t, richShard(t), release.Level3)
	restored := NewShardFSM(0, nil)
	roundTrip(t, f, restored)
	if got, want := shardState(restored), shardState(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored another state:\n got %s\nwant %s", short(got), short(want))
	}
	for _, s := range awkwardStrings() {
		want := map[TopicPartition]Offset{}
		for _, o := range commitWith(s, 1000).Offsets {
			want[TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
		if got := restored.Offsets(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: offsets lost bytes:\n got %s\nwant %s", short(s), short(got), short(want))
		}
	}
}

// TestPackedSnapshotIsAThirdOfVersion2: at scale (groups made by commits,
// ten partitions each), the packed snapshot takes well under half the
// bytes of version 2, what a large shard rewrites each snapshot.
func TestPackedSnapshotIsAThirdOfVersion2(t *testing.T) {
	f := scaleShard(t, 2000, 10)
	v2 := persisted(t, f)
	v3 := persisted(t, stampedAt(t, f, release.Level3))
	if v2[0] != snapshotVersionMsgpack || v3[0] != snapshotVersionPacked {
		t.Fatalf("versions %d and %d", v2[0], v3[0])
	}
	if len(v3)*2 > len(v2) {
		t.Fatalf("packed %d bytes, version 2 %d", len(v3), len(v2))
	}
	t.Logf("20000 offsets: version 2 %d bytes, packed %d (%.2f×)", len(v2), len(v3), float64(len(v3))/float64(len(v2)))
}

// packedDoc builds a packed snapshot's document by hand: head's keys, then
// offsets holding the given group records (each appended by its func).
func packedDoc(keys uint32, head func([]byte) []byte, groups ...func([]byte) []byte) []byte {
	b := msgp.AppendMapHeader([]byte{snapshotVersionPacked}, keys)
	if head != nil {
		b = head(b)
	}
	b = msgp.AppendString(b, "offsets")
	b = msgp.AppendArrayHeader(b, uint32(len(groups)))
	for _, g := range groups {
		b = g(b)
	}
	return b
}

// part is one offset as a topic's parts hold it.
func part(b []byte, partition int32, offset int64) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(partition))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(offset))
	return binary.LittleEndian.AppendUint64(b, 7)
}

// groupRecord appends a group of one topic whose parts are raw.
func groupRecord(group, topic string, raw []byte) func([]byte) []byte {
	return func(b []byte) []byte {
		b = msgp.AppendArrayHeader(b, 2)
		b = msgp.AppendString(b, group)
		b = msgp.AppendArrayHeader(b, 1)
		b = msgp.AppendArrayHeader(b, 2)
		b = msgp.AppendString(b, topic)
		return msgp.AppendBytes(b, raw)
	}
}

// TestPackedRestoreSkipsWhatItDoesNotKnow: keys in any order, keys and
// record fields a later version may add, and nil extras are read past.
func TestPackedRestoreSkipsWhatItDoesNotKnow(t *testing.T) {
	head := func(b []byte) []byte {
		b = msgp.AppendString(b, "added_later")
		b = msgp.AppendMapHeader(b, 1)
		b = msgp.AppendString(b, "k")
		b = msgp.AppendNil(b)
		b = msgp.AppendString(b, "simple_groups")
		b = msgp.AppendArrayHeader(b, 2)
		b = msgp.AppendString(b, "g1")
		b = msgp.AppendInt64(b, 42)
		return b
	}
	withMore := func(b []byte) []byte {
		b = msgp.AppendArrayHeader(b, 3)
		b = msgp.AppendString(b, "g2")
		b = msgp.AppendArrayHeader(b, 1)
		b = msgp.AppendArrayHeader(b, 4)
		b = msgp.AppendString(b, "t")
		b = msgp.AppendBytes(b, part(part(nil, 0, 10), 5, 15))
		b = msgp.AppendNil(b)                 // no extras
		b = msgp.AppendString(b, "a topic's") // a field added later
		return msgp.AppendFloat64(b, 1.5)     // a group's
	}
	b := packedDoc(3, head, groupRecord("g1", "s", part(nil, 3, 30)), withMore)
	f := NewShardFSM(0, nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
	o := func(v int64) Offset { return Offset{Offset: v, CommitTimestamp: 7, ExpireTimestamp: -1} }
	for g, want := range map[string]map[TopicPartition]Offset{
		"g1": {{"s", 3}: o(30)},
		"g2": {{"t", 0}: o(10), {"t", 5}: o(15)},
	} {
		if got := f.Offsets(g); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", g, got, want)
		}
	}
	if g, ok := f.Group("g1"); !ok || !g.Simple() || g.StateTimestamp != 42 {
		t.Errorf("simple group g1: %+v, %v", g, ok)
	}
}

// TestPackedRestoreRefusesBrokenRecords: a packed snapshot that breaks
// what its writer guarantees (whole offsets, each list in order and
// without repeats, an extra per offset) is refused whole with
// ErrMalformedSnapshot, the state left as it was, and a length it claims
// but does not hold costs no memory.
func TestPackedRestoreRefusesBrokenRecords(t *testing.T) {
	good := persisted(t, stampedAt(t, richShard(t), release.Level3))
	one := part(nil, 1, 1)
	twoTopics := func(first, second string) func([]byte) []byte {
		return func(b []byte) []byte {
			b = msgp.AppendArrayHeader(b, 2)
			b = msgp.AppendString(b, "g")
			b = msgp.AppendArrayHeader(b, 2)
			for _, topic := range []string{first, second} {
				b = msgp.AppendArrayHeader(b, 2)
				b = msgp.AppendString(b, topic)
				b = msgp.AppendBytes(b, one)
			}
			return b
		}
	}
	extras := func(n int) func([]byte) []byte {
		return func(b []byte) []byte {
			b = msgp.AppendArrayHeader(b, 2)
			b = msgp.AppendString(b, "g")
			b = msgp.AppendArrayHeader(b, 1)
			b = msgp.AppendArrayHeader(b, 3)
			b = msgp.AppendString(b, "t")
			b = msgp.AppendBytes(b, part(one, 2, 2))
			b = msgp.AppendArrayHeader(b, uint32(n))
			for range n {
				b = msgp.AppendArrayHeader(b, 2)
				b = msgp.AppendString(b, "m")
				b = msgp.AppendInt64(b, -1)
			}
			return b
		}
	}
	simple := func(items ...any) func([]byte) []byte {
		return func(b []byte) []byte {
			b = msgp.AppendString(b, "simple_groups")
			b = msgp.AppendArrayHeader(b, uint32(len(items)))
			for _, it := range items {
				b, _ = msgp.AppendIntf(b, it)
			}
			return b
		}
	}
	hugeParts := func(b []byte) []byte {
		b = msgp.AppendArrayHeader(b, 2)
		b = msgp.AppendString(b, "g")
		b = msgp.AppendArrayHeader(b, 1)
		b = msgp.AppendArrayHeader(b, 2)
		b = msgp.AppendString(b, "t")
		b = msgp.AppendBytesHeader(b, packedPartSize*(1<<26)) // 1.5 GiB claimed
		return append(b, one...)
	}
	for name, b := range map[string][]byte{
		"truncated":                   good[:len(good)-3],
		"trailing bytes":              append(slices.Clone(good), 0xc0),
		"parts not whole offsets":     packedDoc(1, nil, groupRecord("g", "t", one[:20])),
		"partitions out of order":     packedDoc(1, nil, groupRecord("g", "t", part(part(nil, 5, 1), 2, 1))),
		"a partition twice":           packedDoc(1, nil, groupRecord("g", "t", part(part(nil, 5, 1), 5, 2))),
		"topics out of order":         packedDoc(1, nil, twoTopics("u", "t")),
		"a topic twice":               packedDoc(1, nil, twoTopics("t", "t")),
		"a group twice":               packedDoc(1, nil, groupRecord("g", "t", one), groupRecord("g", "u", one)),
		"fewer extras than offsets":   packedDoc(1, nil, extras(1)),
		"more extras than offsets":    packedDoc(1, nil, extras(3)),
		"a group record of one field": packedDoc(1, nil, func(b []byte) []byte { return msgp.AppendString(msgp.AppendArrayHeader(b, 1), "g") }),
		"an id without its time":      packedDoc(2, simple("g", int64(1), "h")),
		"a simple group twice":        packedDoc(2, simple("g", int64(1), "g", int64(2))),
		"parts claiming 1.5 GiB":      packedDoc(1, nil, hugeParts),
		"a topic without offsets":     packedDoc(1, nil, groupRecord("g", "t", nil)),
		"a group without topics": packedDoc(1, nil, func(b []byte) []byte {
			return msgp.AppendArrayHeader(msgp.AppendString(msgp.AppendArrayHeader(b, 2), "g"), 0)
		}),
	} {
		f := richShard(t)
		before := shardState(f)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		err := f.Restore(io.NopCloser(bytes.NewReader(b)))
		runtime.ReadMemStats(&ms1)
		if !errors.Is(err, ErrMalformedSnapshot) || !strings.Contains(err.Error(), "version 3:") {
			t.Errorf("%s: got %v, want ErrMalformedSnapshot of version 3", name, err)
		}
		if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 16<<20 {
			t.Errorf("%s: restoring %d bytes allocated %d MiB", name, len(b), alloc>>20)
		}
		if !reflect.DeepEqual(shardState(f), before) {
			t.Errorf("%s: a failed restore changed the state", name)
		}
	}
}

// TestVersion2ShardSnapshotsOfLevel2BuildsRestore: a version-2 snapshot
// that a build supporting level 2 at most wrote (the last landing before
// level 3, da44c16) restores to the state it was taken of; this build,
// at level 2, writes it again byte for byte, so such a build reads what
// this one writes until level 3; and once stamped at level 3 the same
// state goes through the packed snapshot unchanged.
func TestVersion2ShardSnapshotsOfLevel2BuildsRestore(t *testing.T) {
	old, err := os.ReadFile("testdata/da44c16/shard-snapshot-v2.bin")
	if err != nil {
		t.Fatal(err)
	}
	want := level2Shard(t)
	restored := NewShardFSM(0, nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	if got, want := shardState(restored), shardState(want); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored another state:\n got %s\nwant %s", short(got), short(want))
	}
	if again := persisted(t, restored); !bytes.Equal(again, old) {
		t.Fatalf("at level 2 this build writes %d bytes where the old build wrote %d", len(again), len(old))
	}
	stampedAt(t, want, release.Level3)
	packed := NewShardFSM(0, nil)
	roundTrip(t, stampedAt(t, restored, release.Level3), packed)
	if got, want := shardState(packed), shardState(want); !reflect.DeepEqual(got, want) {
		t.Fatalf("the packed snapshot restored another state:\n got %s\nwant %s", short(got), short(want))
	}
}

// level2Shard is the state of testdata/da44c16/shard-snapshot-v2.bin: a
// shard stamped at level 2 with every kind of state, built by the
// commands a build that supports level 2 at most applies.
func level2Shard(t testing.TB) *ShardFSM {
	f := NewShardFSM(0, nil)
	next := applier(t, f)
	next(&ClusterStamp{ID: "cluster-da44c16"})
	next(&GroupPut{Group: sampleGroup("stable\xff")})
	next(commitWith("stable\xff", 1000))
	for g := range 3 {
		c := &OffsetCommit{GroupID: fmt.Sprintf("simple-%d", g), Timestamp: 1_700_000_000_000 + int64(g)}
		for p := range int32(4) {
			c.Offsets = append(c.Offsets, OffsetCommitPartition{Topic: "orders", Partition: 3 - p,
				Offset: Offset{Offset: int64(g)*100 + int64(p), LeaderEpoch: p - 1, ExpireTimestamp: -1}})
		}
		next(c)
	}
	wide := &OffsetCommit{GroupID: "wide", Timestamp: 1}
	for i, v := range []int64{0, 127, 128, 1<<31 - 1, 1 << 31, 1<<63 - 1, -1, -129, -1 << 63} {
		wide.Offsets = append(wide.Offsets, OffsetCommitPartition{Topic: "t", Partition: int32(v),
			Offset: Offset{Offset: v, LeaderEpoch: int32(v >> 32), Metadata: fmt.Sprint("m", i%2), CommitTimestamp: v, ExpireTimestamp: int64(i) - 1}})
	}
	next(wide)
	next(joinWrite("cg-b", "m1", 1, 5))
	next(&FeatureLevelSet{Feature: "kcoord.version", Level: 2})
	return f
}

// TestASnapshotIsTheStateItWasTakenOf: what Persist writes is the state at
// Snapshot, whatever Apply does to the shard before Persist runs (raft
// persists on another goroutine while applies go on): offsets replaced
// in place, partitions and topics added, offsets deleted, metadata added.
func TestASnapshotIsTheStateItWasTakenOf(t *testing.T) {
	for _, level := range []release.Level{release.Level2, release.Level3} {
		f := stampedAt(t, richShard(t), level)
		want := shardState(f)
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		index := uint64(1 << 21)
		for _, s := range awkwardStrings() {
			index++
			apply(t, f, index, commitWith(s, 5000)) // the same partitions, in place
			index++
			apply(t, f, index, &OffsetCommit{GroupID: s, Timestamp: 9, Offsets: []OffsetCommitPartition{
				{Topic: s, Partition: 3, Offset: Offset{Offset: 1, Metadata: "new", ExpireTimestamp: -1}},
				{Topic: "zz-new", Partition: 0, Offset: Offset{Offset: 2, ExpireTimestamp: 7}},
			}})
			index++
			apply(t, f, index, &OffsetDelete{GroupID: s + "/simple", Partitions: []TopicPartition{{Topic: s + "/simple", Partition: 0}}})
		}
		var sink memSink
		if err := snap.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		restored := NewShardFSM(0, nil)
		if err := restored.Restore(io.NopCloser(&sink)); err != nil {
			t.Fatal(err)
		}
		if got := shardState(restored); !reflect.DeepEqual(got, want) {
			t.Fatalf("level %d: the snapshot holds applies made after it was taken", level)
		}
	}
}

// TestAGroupWithEmptyMembersIsPackedAsRestored: a whole group whose
// Members is empty but not nil (what an old body or snapshot holding
// "members: []" decodes to) reads back simple, so the packed snapshot
// writes it simple: the replica that applied it and one that restored
// it write the same bytes.
func TestAGroupWithEmptyMembersIsPackedAsRestored(t *testing.T) {
	f := stampedAt(t, NewShardFSM(0, nil), release.Level3)
	f.mu.Lock()
	f.groups.put(Group{ID: "g", State: StateEmpty, StateTimestamp: 5, Members: []Member{}})
	f.mu.Unlock()
	b := persisted(t, f)
	restored := NewShardFSM(0, nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
	if again := persisted(t, restored); !bytes.Equal(again, b) {
		t.Fatal("the restored replica writes other bytes than the one that applied the group")
	}
}
