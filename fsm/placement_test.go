package fsm

import (
	"errors"
	"reflect"
	"testing"
)

// TestPlacementCommands: nodes register active and drain (never the last
// active one); a placement must name registered
// nodes, sorted and distinct, and a refused one changes nothing; all of it
// survives a snapshot.
func TestPlacementCommands(t *testing.T) {
	f := NewMetaFSM(nil)
	idx := uint64(0)
	do := func(cmd Command) any { idx++; return apply(t, f, idx, cmd) }
	for id := int32(1); id <= 3; id++ {
		if r := do(&NodeRegister{ID: id, RaftAddr: "old"}); r != nil {
			t.Fatalf("register %d: %v", id, r)
		}
	}
	if r := do(&NodeRegister{ID: 3, RaftAddr: "n3:9093"}); r != nil {
		t.Fatal(r)
	}
	if r := do(&PlacementSet{Shards: []ShardPlacement{{Shard: 0, Voters: []int32{1, 2, 3}}, {Shard: -1, Voters: []int32{1, 2}}}}); r != nil {
		t.Fatal(r)
	}
	for _, bad := range []struct {
		set  ShardPlacement
		want error
	}{
		{ShardPlacement{Shard: 1}, ErrInvalidPlacement},
		{ShardPlacement{Shard: 1, Voters: []int32{2, 1}}, ErrInvalidPlacement},
		{ShardPlacement{Shard: 1, Voters: []int32{1, 1}}, ErrInvalidPlacement},
		{ShardPlacement{Shard: 1, Voters: []int32{1, 9}}, ErrNodeNotFound},
	} {
		r := do(&PlacementSet{Shards: []ShardPlacement{{Shard: 2, Voters: []int32{1}}, bad.set}})
		if err, _ := r.(error); !errors.Is(err, bad.want) {
			t.Errorf("placement %v: %v, want %v", bad.set, r, bad.want)
		}
	}
	if _, ok := f.ShardVoters(2); ok {
		t.Error("a refused PlacementSet placed the valid shard it also named")
	}
	if r := do(&NodeDrain{ID: 3}); r != nil {
		t.Fatal(r)
	}
	if r := do(&NodeRegister{ID: 3, RaftAddr: "n3:9094"}); r != nil {
		t.Fatal(r)
	}
	if r, _ := do(&NodeDrain{ID: 7}).(error); !errors.Is(r, ErrNodeNotFound) {
		t.Errorf("drain of an unknown node: %v", r)
	}
	want := []Node{{1, "old", NodeActive}, {2, "old", NodeActive}, {3, "n3:9094", NodeDraining}}
	if got := f.Nodes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("nodes %+v, want %+v", got, want)
	}

	into := NewMetaFSM(nil)
	roundTrip(t, f, into)
	if !reflect.DeepEqual(into.Nodes(), want) || !reflect.DeepEqual(into.Placement(), f.Placement()) {
		t.Fatalf("after restore: %+v %+v", into.Nodes(), into.Placement())
	}

	if r := do(&PlacementSet{Shards: []ShardPlacement{{Shard: 0, Voters: []int32{1, 2}}}}); r != nil {
		t.Fatal(r)
	}
	if r := do(&NodeDrain{ID: 1}); r != nil {
		t.Fatal(r)
	}
	if r, _ := do(&NodeDrain{ID: 2}).(error); !errors.Is(r, ErrLastActiveNode) {
		t.Errorf("drain of the last active node: %v", r)
	}
	if v, _ := f.ShardVoters(-1); !reflect.DeepEqual(v, []int32{1, 2}) {
		t.Fatalf("meta shard voters %v", v)
	}
}

// TestPlacementCommandsInAShardLogAreForeign: placement belongs to the
// metadata group only.
func TestPlacementCommandsInAShardLogAreForeign(t *testing.T) {
	f := NewShardFSM(0, nil)
	for i, cmd := range []Command{&NodeRegister{ID: 1}, &NodeDrain{ID: 1}, &PlacementSet{}} {
		if r, _ := apply(t, f, uint64(i+1), cmd).(error); !errors.Is(r, ErrForeignCommand) {
			t.Errorf("%s in a shard log: %v", cmd.CommandType(), r)
		}
	}
}
