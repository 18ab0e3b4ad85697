package fsm

import (
	"bytes"
	"errors"
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

func apply(t *testing.T, f raft.FSM, index uint64, cmd Command) any {
	t.Helper()
	b, err := Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b})
}

func roundTrip(t *testing.T, from, into raft.FSM) {
	t.Helper()
	snap, err := from.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if err := into.Restore(io.NopCloser(&sink)); err != nil {
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
		"short":       {1},
		"unknown":     {200, 1, '{', '}'},
		"new version": {byte(GroupPutType), 99, '{', '}'},
		"bad body":    {byte(OffsetCommitType), 1, 'x'},
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
	for _, b := range [][]byte{nil, {0}, {9, '{'}, {1, '['}} {
		if err := NewShardFSM(0, nil).Restore(io.NopCloser(bytes.NewReader(b))); !errors.Is(err, ErrMalformedSnapshot) {
			t.Fatalf("%v: got %v", b, err)
		}
	}
}

// TestEncodingIsStable pins the on-disk format of a command: changing it
// needs a new body version, not an edit.
func TestEncodingIsStable(t *testing.T) {
	b, err := Encode(&GroupDelete{GroupID: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "\x02\x01{\"group_id\":\"g\"}"; string(b) != want {
		t.Fatalf("encoding changed: %q, want %q", b, want)
	}
}
