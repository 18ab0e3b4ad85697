package cluster

import (
	"slices"
	"testing"

	"github.com/kcoord/kcoord/fsm"
)

// settledOn is a shard whose configuration is what it desires.
func settledOn(shard int32, voters ...int32) shardState {
	return shardState{shard: shard, current: shardMembers{voters: voters}, known: true, desired: voters, placed: true}
}

func plannedShards(out []fsm.ShardPlacement) []int32 {
	var ids []int32
	for _, sp := range out {
		ids = append(ids, sp.Shard)
	}
	return ids
}

func TestPlanShardsThrottlesMovesToTheLimit(t *testing.T) {
	nodes := registered([]int32{1, 2, 3, 4})
	var shards []shardState
	for id := range int32(20) {
		shards = append(shards, settledOn(id, 1, 2, 3))
	}
	out := planShards(shards, nodes, 3, 4)
	if len(out) != 4 {
		t.Fatalf("%d shards revised at once (%v), the limit is 4", len(out), plannedShards(out))
	}
	for _, sp := range out {
		if want := placement(sp.Shard, []int32{1, 2, 3, 4}, 3); !slices.Equal(sp.Voters, want) {
			t.Errorf("shard %d desires %v, rendezvous places it on %v", sp.Shard, sp.Voters, want)
		}
	}

	// Shards already moving hold their slots.
	moving := slices.Clone(shards)
	for i := range 3 {
		moving[i].current.nonvoters = []int32{4}
	}
	if out := planShards(moving, nodes, 3, 4); len(out) != 1 {
		t.Errorf("with 3 moves in flight, %d more started (%v); the limit is 4", len(out), plannedShards(out))
	}
	// A shard whose leader has not reported counts as moving.
	unknown := slices.Clone(shards)
	for i := range 4 {
		unknown[i].known = false
	}
	if out := planShards(unknown, nodes, 3, 4); len(out) != 0 {
		t.Errorf("with 4 shards unreported, %d moves started (%v)", len(out), plannedShards(out))
	}
}

func TestPlanShardsRetargetsAMoveTowardsARemovedNode(t *testing.T) {
	// Shards 0-3 are moving towards node 4, which was then removed: the
	// limit is reached, yet each is retargeted at once, since the move
	// would wait for node 4 for ever.
	nodes := registered([]int32{1, 2, 3}, 4)
	var shards []shardState
	for id := range int32(4) {
		shards = append(shards, shardState{shard: id, current: shardMembers{voters: []int32{1, 2, 3}, nonvoters: []int32{4}}, known: true, desired: []int32{1, 2, 4}, placed: true})
	}
	out := planShards(shards, nodes, 3, 4)
	if len(out) != 4 {
		t.Fatalf("%d of 4 moves retargeted: %v", len(out), out)
	}
	for _, sp := range out {
		if !slices.Equal(sp.Voters, []int32{1, 2, 3}) {
			t.Errorf("shard %d retargeted to %v, want the active nodes 1 2 3", sp.Shard, sp.Voters)
		}
	}
	// More stale moves than the limit: every one is retargeted.
	for id := int32(4); id < 7; id++ {
		shards = append(shards, shardState{shard: id, current: shardMembers{voters: []int32{1, 2, 3}, nonvoters: []int32{4}}, known: true, desired: []int32{1, 2, 4}, placed: true})
	}
	if out := planShards(shards, nodes, 3, 4); len(out) != 7 {
		t.Errorf("%d of 7 moves retargeted with a limit of 4: %v", len(out), plannedShards(out))
	}
	shards = shards[:4]
	// A move towards an active node is left to finish.
	nodes[4] = fsm.Node{ID: 4, State: fsm.NodeActive}
	if out := planShards(shards, nodes, 3, 4); len(out) != 0 {
		t.Errorf("moves towards an active node retargeted: %v", out)
	}
}

func TestPlanShardsLeavesAnUnreportedShardAlone(t *testing.T) {
	// Shard 0's leader died and its successor has not reported yet; node 3
	// (among its desired voters) was removed meanwhile. Shards 1 and 2 are
	// moving. Shard 0 holds a slot and is not retargeted before its
	// configuration is known: retargeting it made a third move with a limit
	// of 2 (found by TestADeadNodeIsRemovedAndItsReplicasRecreated in CI).
	nodes := registered([]int32{1, 2, 4}, 3)
	moving := func(id int32) shardState {
		return shardState{shard: id, current: shardMembers{voters: []int32{1, 2, 3}}, known: true, desired: []int32{1, 2, 4}, placed: true}
	}
	shards := []shardState{{shard: 0, desired: []int32{1, 2, 3}, placed: true}, moving(1), moving(2), settledOn(3, 1, 2, 3)}
	if out := planShards(shards, nodes, 3, 3); len(out) != 0 {
		t.Errorf("plan = %v, want nothing: two moves and an unreported shard fill the limit of 3", out)
	}
	// Once it reports, it is revised like any settled shard, within the
	// limit.
	shards[0] = settledOn(0, 1, 2, 3)
	out := planShards(shards, nodes, 3, 3)
	if len(out) != 1 || out[0].Shard != 0 {
		t.Errorf("plan = %v, want shard 0 revised", out)
	}
}

func TestPlanShardsCountsAShardBetweenStepsAsMoving(t *testing.T) {
	// Voters 1 2 3 4 after a promotion, desired 1 2 4: no non-voter, but the
	// move is not over.
	nodes := registered([]int32{1, 2, 3, 4})
	shards := []shardState{{shard: 0, current: shardMembers{voters: []int32{1, 2, 3, 4}}, known: true, desired: []int32{1, 2, 4}, placed: true}}
	for id := int32(1); id < 10; id++ {
		shards = append(shards, settledOn(id, 1, 2, 3))
	}
	if out := planShards(shards, nodes, 3, 2); len(out) != 1 {
		t.Errorf("with one move between steps and a limit of 2, %d more started: %v", len(out), plannedShards(out))
	}
}

func TestPlanShardsMovesDrainingReplicasFirst(t *testing.T) {
	// Node 4 joined (every shard could move some replica to it) and node 3
	// is draining: the shards on node 3 go first.
	nodes := registered([]int32{1, 2, 4, 5}, 3)
	var shards []shardState
	onDraining := map[int32]bool{}
	for id := range int32(12) {
		if id%3 == 0 {
			shards = append(shards, settledOn(id, 1, 2, 3))
			onDraining[id] = true
		} else {
			shards = append(shards, settledOn(id, 1, 2, 4))
		}
	}
	out := planShards(shards, nodes, 3, 4)
	if len(out) != 4 {
		t.Fatalf("%d shards revised, want 4: %v", len(out), plannedShards(out))
	}
	for _, sp := range out {
		if !onDraining[sp.Shard] {
			t.Errorf("shard %d revised before the shards on the draining node: %v", sp.Shard, plannedShards(out))
		}
		if slices.Contains(sp.Voters, 3) {
			t.Errorf("shard %d placed on draining node 3: %v", sp.Shard, sp.Voters)
		}
	}
}

func TestPlanShardsAdoptsTheVotersOfAShardFromBeforePlacement(t *testing.T) {
	nodes := registered([]int32{1, 2, 3})
	shards := []shardState{
		{shard: 0, current: shardMembers{voters: []int32{1, 2, 3}}, known: true},
		{shard: 1, known: false}, // no report yet
		{shard: 2, current: shardMembers{voters: []int32{1, 2, 9}}, known: true}, // node 9 not registered
		{shard: 3, known: true}, // a report with no voters
	}
	out := planShards(shards, nodes, 3, 4)
	if len(out) != 1 || out[0].Shard != 0 || !slices.Equal(out[0].Voters, []int32{1, 2, 3}) {
		t.Errorf("plan = %v, want shard 0 to desire its voters 1 2 3 and nothing else", out)
	}
}

func TestPlanShardsLeavesTheMetadataReadReplicasAlone(t *testing.T) {
	// MetaShard's non-voters are read replicas, not a move: with them it
	// is settled, and the limit's slots are free for the group shards.
	nodes := registered([]int32{1, 2, 3, 4})
	meta := settledOn(MetaShard, placement(MetaShard, []int32{1, 2, 3, 4}, 3)...)
	meta.current.nonvoters = []int32{4}
	shards := []shardState{meta}
	for id := range int32(8) {
		shards = append(shards, settledOn(id, 1, 2, 3))
	}
	out := planShards(shards, nodes, 3, 2)
	if len(out) != 2 || slices.Contains(plannedShards(out), MetaShard) {
		t.Errorf("plan = %v, want two group shards revised", plannedShards(out))
	}
}

func TestPlanShardsWithFewerActiveNodesThanTheFactor(t *testing.T) {
	nodes := registered([]int32{1, 2})
	out := planShards([]shardState{settledOn(0, 1)}, nodes, 3, 4)
	if len(out) != 1 || !slices.Equal(out[0].Voters, []int32{1, 2}) {
		t.Errorf("plan = %v, want shard 0 on both active nodes", out)
	}
	if out := planShards([]shardState{settledOn(0, 1)}, registered(nil, 1), 3, 4); len(out) != 0 {
		t.Errorf("with no active node, plan = %v", out)
	}
}
