package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

func apply(t testing.TB, f raft.FSM, index uint64, cmd Command) any {
	t.Helper()
	b, err := Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b})
}

func roundTrip(t *testing.T, from, into raft.FSM) {
	t.Helper()
	if err := into.Restore(io.NopCloser(bytes.NewReader(persisted(t, from)))); err != nil {
		t.Fatal(err)
	}
}

func sampleGroup(id string) Group {
	return Group{
		ID: id, ProtocolType: "consumer", Protocol: "range", Generation: 3, Leader: "m1",
		State: StateStable, StateTimestamp: 1700000000000,
		Members: []Member{{
			ID: "m1", InstanceID: "i1", ClientID: "c", ClientHost: "/127.0.0.1",
			SessionTimeoutMs: 10000, RebalanceTimeoutMs: 60000,
			Protocols:  []Protocol{{Name: "range", Metadata: []byte{0, 1, 2}}},
			Assignment: []byte{9, 8, 7},
		}},
	}
}

func TestShardCommandsAndSnapshotRoundTrip(t *testing.T) {
	f := NewShardFSM(7, nil)
	// GroupPut
	apply(t, f, 1, &GroupPut{Group: sampleGroup("g1")})
	apply(t, f, 2, &GroupPut{Group: Group{ID: "g2", State: StateEmpty, Generation: 1}})
	// OffsetCommit, creating a group for a simple consumer.
	apply(t, f, 3, &OffsetCommit{GroupID: "g1", Timestamp: 5, Offsets: []OffsetCommitPartition{
		{Topic: "a", Partition: 0, Offset: Offset{Offset: 10, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: 5, ExpireTimestamp: -1}},
		{Topic: "a", Partition: 1, Offset: Offset{Offset: 11, LeaderEpoch: -1, CommitTimestamp: 5, ExpireTimestamp: -1}},
	}})
	apply(t, f, 4, &OffsetCommit{GroupID: "simple", Timestamp: 6, Offsets: []OffsetCommitPartition{
		{Topic: "b", Partition: 3, Offset: Offset{Offset: 1, CommitTimestamp: 6, ExpireTimestamp: -1}},
	}})
	if g, ok := f.Group("simple"); !ok || g.State != StateEmpty || g.StateTimestamp != 6 {
		t.Fatalf("commit creating its group: group %+v %v", g, ok)
	}
	// OffsetDelete
	apply(t, f, 5, &OffsetDelete{GroupID: "g1", Partitions: []TopicPartition{{Topic: "a", Partition: 1}}})
	if _, ok := f.Offset("g1", TopicPartition{Topic: "a", Partition: 1}); ok {
		t.Fatal("offset delete did not delete")
	}
	// GroupDelete: business errors come back as the response.
	if r := apply(t, f, 6, &GroupDelete{GroupID: "g1"}); !errors.Is(r.(error), ErrGroupNotEmpty) {
		t.Fatalf("delete of non-empty group: %v", r)
	}
	if r := apply(t, f, 7, &GroupDelete{GroupID: "nope"}); !errors.Is(r.(error), ErrGroupNotFound) {
		t.Fatalf("delete of unknown group: %v", r)
	}
	if r := apply(t, f, 8, &GroupDelete{GroupID: "g2"}); r != nil {
		t.Fatalf("delete of empty group: %v", r)
	}

	restored := NewShardFSM(7, nil)
	roundTrip(t, f, restored)
	if !reflect.DeepEqual(f.Groups(), restored.Groups()) {
		t.Fatalf("groups differ after restore:\n%+v\n%+v", f.Groups(), restored.Groups())
	}
	for _, g := range []string{"g1", "simple"} {
		if !reflect.DeepEqual(f.Offsets(g), restored.Offsets(g)) {
			t.Fatalf("offsets of %s differ after restore", g)
		}
	}
	if restored.HasOffsets("g2") {
		t.Fatal("deleted group's offsets came back")
	}
}

func TestMetaCommandsAndSnapshotRoundTrip(t *testing.T) {
	f := NewMetaFSM(nil)
	topic := Topic{Name: "t", ID: [16]byte{1, 2}, Partitions: 12, ReplicationFactor: 3, Configs: map[string]string{"k": "v"}}
	if r := apply(t, f, 1, &TopicCreate{Topic: topic}); r != nil {
		t.Fatal(r)
	}
	if r := apply(t, f, 2, &TopicCreate{Topic: topic}); !errors.Is(r.(error), ErrTopicExists) {
		t.Fatalf("duplicate create: %v", r)
	}
	apply(t, f, 3, &TopicCreate{Topic: Topic{Name: "gone", Partitions: 1}})
	if r := apply(t, f, 4, &TopicDelete{Name: "gone"}); r != nil {
		t.Fatal(r)
	}
	if r := apply(t, f, 5, &TopicDelete{Name: "gone"}); !errors.Is(r.(error), ErrTopicNotFound) {
		t.Fatalf("delete missing: %v", r)
	}
	restored := NewMetaFSM(nil)
	roundTrip(t, f, restored)
	if !reflect.DeepEqual(f.Topics(), restored.Topics()) || len(restored.Topics()) != 1 {
		t.Fatalf("topics differ: %+v vs %+v", f.Topics(), restored.Topics())
	}
}

func TestApplyPanicsOnUndecodableEntry(t *testing.T) {
	for name, data := range map[string][]byte{
		"short":            {1},
		"unknown":          {200, 2, 0x80},
		"new version":      {byte(GroupPutType), 99, 0x80},
		"bad json body":    {byte(OffsetCommitType), 1, 'x'},
		"bad body":         {byte(OffsetCommitType), 2, 0xc1},
		"truncated body":   {byte(GroupDeleteType), 2, 0x81, 0xa8, 'g', 'r'},
		"trailing bytes":   {byte(GroupDeleteType), 2, 0x80, 0x80},
		"wrong field type": {byte(GroupDeleteType), 2, 0x81, 0xa8, 'g', 'r', 'o', 'u', 'p', '_', 'i', 'd', 0x81, 0xa1, 'x', 0x01},
		"json cluster id":  {byte(ClusterIDType), 1, '{', '}'},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Apply did not panic")
				}
			}()
			NewShardFSM(0, nil).Apply(&raft.Log{Type: raft.LogCommand, Data: data})
		})
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	f := NewShardFSM(0, nil)
	apply(t, f, 1, &GroupPut{Group: sampleGroup("g")})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var good memSink
	if err := snap.Persist(&good); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":            nil,
		"version 0":        {0},
		"future version":   {9, 0x80},
		"bad json":         {1, '['},
		"bad msgpack":      {2, 0xc1},
		"no document":      {2},
		"truncated":        good.Bytes()[:good.Len()-3],
		"data after it":    append(bytes.Clone(good.Bytes()), 0xc0),
		"two documents":    append(bytes.Clone(good.Bytes()), good.Bytes()[1:]...),
		"wrong field type": {2, 0x81, 0xa6, 'g', 'r', 'o', 'u', 'p', 's', 0x01},
	} {
		if err := NewShardFSM(0, nil).Restore(io.NopCloser(bytes.NewReader(b))); !errors.Is(err, ErrMalformedSnapshot) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

// TestEncodingIsStable pins the on-disk format of commands and snapshots:
// changing it needs a new body (or snapshot) version, not an edit.
func TestEncodingIsStable(t *testing.T) {
	for _, tc := range []struct {
		cmd  Command
		want string
	}{
		{&GroupDelete{GroupID: "g"}, "\x02\x02\x81\xa8group_id\xa1g"},
		{&ClusterStamp{ID: "c\xfe"}, "\x07\x02\x81\xa2id\xa2c\xfe"},
		{&OffsetDelete{GroupID: "g", Partitions: []TopicPartition{{Topic: "t", Partition: 1}}},
			"\x04\x02\x82\xa8group_id\xa1g\xaapartitions\x91\x82\xa1p\x01\xa1t\xa1t"},
		{&GroupPut{Group: Group{ID: "g", State: StateStable, Members: []Member{{ID: "m", Protocols: []Protocol{{Name: "p", Metadata: []byte{0}}}, Assignment: []byte{1}}}}},
			"\x01\x02\x81\xa5group\x85\xaageneration\x00\xa2id\xa1g\xa7members\x91\x87" +
				"\xaaassignment\xc4\x01\x01\xabclient_host\xa0\xa9client_id\xa0\xa2id\xa1m" +
				"\xa9protocols\x91\x82\xa8metadata\xc4\x01\x00\xa4name\xa1p" +
				"\xb4rebalance_timeout_ms\x00\xb2session_timeout_ms\x00\xa5state\xa6Stable\xa8state_ts\x00"},
	} {
		b, err := Encode(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s encoding changed:\n got %q\nwant %q", tc.cmd.CommandType(), b, tc.want)
		}
	}

	m := NewMetaFSM(nil)
	apply(t, m, 1, &ClusterStamp{ID: "c"})
	apply(t, m, 2, &TopicCreate{Topic: Topic{Name: "t", ID: [16]byte{15: 1}, Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"b": "2", "a": "1"}}})
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	want := "\x02\x83\xadapplied_index\x02\xaacluster_id\xa1c\xa6topics\x91\x85\xa7configs\x82\xa1a\xa11\xa1b\xa12" +
		"\xa2id\xc4\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01" +
		"\xa4name\xa1t\xaapartitions\x01\xb2replication_factor\x01"
	if got := sink.String(); got != want {
		t.Errorf("meta snapshot encoding changed:\n got %q\nwant %q", got, want)
	}
}

// TestEqualStatesWriteEqualSnapshots: snapshots are sorted, so replicas
// with the same state write the same bytes whatever their map order.
func TestEqualStatesWriteEqualSnapshots(t *testing.T) {
	var first []byte
	for i := range 5 {
		f := NewShardFSM(0, nil)
		for g := range 20 {
			apply(t, f, uint64(g+1), commitWith(fmt.Sprintf("g%d", g), int64(g)))
		}
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var sink memSink
		if err := snap.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = sink.Bytes()
		} else if !bytes.Equal(first, sink.Bytes()) {
			t.Fatal("two snapshots of one state differ")
		}
	}
}

// chunkSink is a raft.SnapshotSink that records the size of every write.
type chunkSink struct {
	memSink
	writes []int
}

func (s *chunkSink) Write(p []byte) (int, error) {
	s.writes = append(s.writes, len(p))
	return s.memSink.Write(p)
}

// TestSnapshotIsStreamedIntoTheSink: Persist writes the encoding in
// buffer-sized pieces as it goes, never the whole snapshot at once.
func TestSnapshotIsStreamedIntoTheSink(t *testing.T) {
	f := NewShardFSM(0, nil)
	for g := range 2000 {
		apply(t, f, uint64(g+1), commitWith(fmt.Sprintf("group-%04d", g), int64(g)))
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink chunkSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if sink.Len() < 4*msgpack.WriterBufferSize {
		t.Fatalf("snapshot of %d bytes is too small to show streaming", sink.Len())
	}
	for _, n := range sink.writes {
		if n > msgpack.WriterBufferSize {
			t.Fatalf("a write of %d bytes (snapshot %d bytes): the encoding was buffered", n, sink.Len())
		}
	}
	restored := NewShardFSM(0, nil)
	if err := restored.Restore(io.NopCloser(&sink.memSink)); err != nil {
		t.Fatal(err)
	}
	if n := len(restored.Groups()); n != 2000 {
		t.Fatalf("restored %d groups", n)
	}
}
