package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/release"
)

func applyShard(t *testing.T, f *ShardFSM, index uint64, cmd Command) any {
	t.Helper()
	b, err := Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b})
}

// A finalized level is raised, kept when set again, never lowered, and
// travels in both FSMs' snapshots; until one is finalized the snapshots
// are what release 0.1.0 writes.
func TestFeatureLevelsAreRaisedNeverLowered(t *testing.T) {
	meta := NewMetaFSM(nil)
	applyAt(t, meta, 1, &TopicCreate{Topic: Topic{Name: "a", Partitions: 1}})
	atLevel1 := snapshotBytes(t, meta)
	if meta.FinalizedLevel() != release.Level1 {
		t.Fatalf("a cluster that finalized nothing is at %d", meta.FinalizedLevel())
	}

	set := func(level int16) any {
		b, err := Encode(&FeatureLevelSet{Feature: release.Feature, Level: level})
		if err != nil {
			t.Fatal(err)
		}
		return meta.Apply(&raft.Log{Index: meta.AppliedIndex() + 1, Type: raft.LogCommand, Data: b})
	}
	if r := set(2); r != nil {
		t.Fatalf("finalize 2: %v", r)
	}
	if r := set(2); r != nil {
		t.Fatalf("finalize 2 again: %v", r)
	}
	if r, _ := set(1).(error); !errors.Is(r, ErrFeatureDowngrade) {
		t.Fatalf("lowering to 1 answered %v, want ErrFeatureDowngrade", r)
	}
	if r, _ := meta.Apply(&raft.Log{Index: 99, Type: raft.LogCommand, Data: mustEncode(t, &FeatureLevelSet{Level: 3})}).(error); !errors.Is(r, ErrInvalidFeatureLevel) {
		t.Fatalf("a level without a feature answered %v", r)
	}
	if meta.FinalizedLevel() != release.Level2 {
		t.Fatalf("finalized level %d, want 2", meta.FinalizedLevel())
	}

	snap := snapshotBytes(t, meta)
	if bytes.Equal(snap, atLevel1) {
		t.Fatal("the snapshot does not carry the finalized level")
	}
	restored := NewMetaFSM(nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if restored.FinalizedLevel() != release.Level2 {
		t.Fatalf("restored level %d, want 2", restored.FinalizedLevel())
	}

	shard := NewShardFSM(3, nil)
	applyShard(t, shard, 1, &OffsetCommit{GroupID: "g", Offsets: []OffsetCommitPartition{{Topic: "t", Partition: 0, Offset: Offset{Offset: 5}}}})
	shardAtLevel1 := persist(t, shard)
	if r := applyShard(t, shard, 2, &FeatureLevelSet{Feature: release.Feature, Level: 2}); r != nil {
		t.Fatalf("stamp: %v", r)
	}
	if shard.StampedLevel() != release.Level2 {
		t.Fatalf("stamped level %d", shard.StampedLevel())
	}
	stamped := persist(t, shard)
	if bytes.Equal(stamped, shardAtLevel1) {
		t.Fatal("the shard snapshot does not carry the stamp")
	}
	again := NewShardFSM(3, nil)
	if err := again.Restore(io.NopCloser(bytes.NewReader(stamped))); err != nil {
		t.Fatal(err)
	}
	if again.StampedLevel() != release.Level2 {
		t.Fatalf("restored stamp %d", again.StampedLevel())
	}
	if _, ok := again.Offset("g", TopicPartition{Topic: "t", Partition: 0}); !ok {
		t.Fatal("the offset did not survive the snapshot")
	}
}

// Every command type release 0.1.0 applies may be written at level 1;
// FeatureLevelSet only from level 2.
func TestCommandTypesNameTheLevelThatIntroducedThem(t *testing.T) {
	for typ := GroupPutType; typ <= ACLDeleteType; typ++ {
		if typ.Level() != release.Level1 {
			t.Errorf("%s needs level %d", typ, typ.Level())
		}
	}
	if FeatureLevelSetType.Level() != release.Level2 {
		t.Errorf("FeatureLevelSet needs level %d", FeatureLevelSetType.Level())
	}
	if LatestCommandType.Level() > release.MaxLevel {
		t.Errorf("the latest type needs level %d, above the %d this release supports", LatestCommandType.Level(), release.MaxLevel)
	}
}

func mustEncode(t *testing.T, cmd Command) []byte {
	t.Helper()
	b, err := Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
