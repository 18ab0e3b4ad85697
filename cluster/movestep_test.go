package cluster

import (
	"testing"

	"github.com/kcoord/kcoord/fsm"
)

// registered returns a registry of active nodes, with those in draining
// marked draining.
func registered(active []int32, draining ...int32) map[int32]fsm.Node {
	m := map[int32]fsm.Node{}
	for _, id := range active {
		m[id] = fsm.Node{ID: id, State: fsm.NodeActive}
	}
	for _, id := range draining {
		m[id] = fsm.Node{ID: id, State: fsm.NodeDraining}
	}
	return m
}

func idSet(ids ...int32) map[int32]bool {
	m := map[int32]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func TestNextMove(t *testing.T) {
	all := func(int32) bool { return true }
	except := func(behind ...int32) func(int32) bool {
		return func(id int32) bool { return !idSet(behind...)[id] }
	}
	for _, tc := range []struct {
		name string
		v    moveView
		want moveStep
	}{
		{
			name: "a desired node without a replica joins as a non-voter",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3}, live: idSet(1, 2, 3, 4), caughtUp: all},
			want: moveStep{moveAddNonvoter, 4},
		},
		{
			name: "a dead desired node gets no replica, and the move waits",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3}, live: idSet(1, 2, 3), caughtUp: all},
			want: moveStep{},
		},
		{
			name: "a dead desired node is skipped and the next one joins",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 4, 5}, voters: []int32{1, 2, 3}, live: idSet(1, 2, 3, 5), caughtUp: all},
			want: moveStep{moveAddNonvoter, 5},
		},
		{
			name: "a caught-up desired non-voter is promoted",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3}, nonvoters: []int32{4}, live: idSet(1, 2, 3, 4), caughtUp: all},
			want: moveStep{movePromote, 4},
		},
		{
			name: "a non-voter still behind is not promoted",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3}, nonvoters: []int32{4}, live: idSet(1, 2, 3, 4), caughtUp: except(4)},
			want: moveStep{},
		},
		{
			// A removal may never reach the removed voter; a demotion does.
			name: "a surplus voter is demoted, not removed",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3, 4}, live: idSet(1, 2, 3, 4), caughtUp: all},
			want: moveStep{moveDemote, 3},
		},
		{
			name: "no voter leaves while a desired voter is dead",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3, 4}, live: idSet(1, 2, 3), caughtUp: all},
			want: moveStep{},
		},
		{
			name: "no voter leaves while a desired voter is behind",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3, 4}, live: idSet(1, 2, 3, 4), caughtUp: except(2)},
			want: moveStep{},
		},
		{
			name: "a surplus leader hands off to a caught-up desired voter first",
			v:    moveView{shard: 0, self: 3, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3, 4}, live: idSet(1, 2, 3, 4), caughtUp: all, nodes: registered([]int32{1, 2, 4}, 3)},
			want: moveStep{moveHandOff, 1},
		},
		{
			name: "the hand-off goes to the desired voter that leads fewest shards",
			v:    moveView{shard: 0, self: 3, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3, 4}, live: idSet(1, 2, 3, 4), caughtUp: all, leads: map[int32]int{1: 17, 2: 16, 3: 17, 4: 0}, nodes: registered([]int32{1, 2, 3, 4})},
			want: moveStep{moveHandOff, 4},
		},
		{
			// Node 4 was removed after placement desired it: the shard
			// would only be handed on again.
			name: "the hand-off skips a desired voter that is draining, however few it leads",
			v:    moveView{shard: 0, self: 3, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3, 4}, live: idSet(1, 2, 3, 4), caughtUp: all, leads: map[int32]int{1: 17, 2: 16, 3: 17, 4: 0}, nodes: registered([]int32{1, 2, 3}, 4)},
			want: moveStep{moveHandOff, 2},
		},
		{
			name: "the leader counts as caught up: a surplus voter is demoted while the leader is a desired voter",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3, 4}, live: idSet(1, 2, 3, 4), caughtUp: except(1), nodes: registered([]int32{1, 2, 3, 4})},
			want: moveStep{moveDemote, 3},
		},
		{
			name: "no hand-off while a desired voter is behind, however few it leads",
			v:    moveView{shard: 0, self: 3, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3, 4}, nonvoters: nil, live: idSet(1, 2, 3, 4), caughtUp: except(4), leads: map[int32]int{1: 17, 2: 16, 3: 17}},
			want: moveStep{},
		},
		{
			name: "a demoted voter is removed",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 4}, nonvoters: []int32{3}, live: idSet(1, 2, 3, 4), caughtUp: all},
			want: moveStep{moveRemove, 3},
		},
		{
			name: "a dead node's replica is replaced: add on the new node first",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3}, live: idSet(1, 2, 4), caughtUp: all},
			want: moveStep{moveAddNonvoter, 4},
		},
		{
			name: "then the dead voter is demoted once the new one votes",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 4}, voters: []int32{1, 2, 3, 4}, live: idSet(1, 2, 4), caughtUp: all},
			want: moveStep{moveDemote, 3},
		},
		{
			name: "a group shard with its desired voters takes no step",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 3}, voters: []int32{1, 2, 3}, live: idSet(1, 2, 3, 4), caughtUp: all, nodes: registered([]int32{1, 2, 3, 4})},
			want: moveStep{},
		},
		{
			name: "the metadata shard gains a live registered node as a read replica",
			v:    moveView{shard: MetaShard, self: 1, want: []int32{1, 2, 3}, voters: []int32{1, 2, 3}, live: idSet(1, 2, 3, 4), caughtUp: all, nodes: registered([]int32{1, 2, 3, 4})},
			want: moveStep{moveAddReadReplica, 4},
		},
		{
			name: "a group shard's non-voter that is not desired is removed, on an active node too",
			v:    moveView{shard: 0, self: 1, want: []int32{1, 2, 3}, voters: []int32{1, 2, 3}, nonvoters: []int32{4}, live: idSet(1, 2, 3, 4), caughtUp: all, nodes: registered([]int32{1, 2, 3, 4})},
			want: moveStep{moveRemove, 4},
		},
		{
			name: "the metadata shard adds no read replica while a desired voter is behind",
			v:    moveView{shard: MetaShard, self: 1, want: []int32{1, 2, 3}, voters: []int32{1, 2, 3}, live: idSet(1, 2, 3, 4), caughtUp: except(2), nodes: registered([]int32{1, 2, 3, 4})},
			want: moveStep{},
		},
		{
			name: "the metadata shard adds no read replica on a dead node",
			v:    moveView{shard: MetaShard, self: 1, want: []int32{1, 2, 3}, voters: []int32{1, 2, 3}, live: idSet(1, 2, 3), caughtUp: all, nodes: registered([]int32{1, 2, 3, 4})},
			want: moveStep{},
		},
		{
			name: "the metadata shard keeps a live draining node as a read replica",
			v:    moveView{shard: MetaShard, self: 1, want: []int32{1, 2, 3}, voters: []int32{1, 2, 3}, nonvoters: []int32{4}, live: idSet(1, 2, 3, 4), caughtUp: all, nodes: registered([]int32{1, 2, 3}, 4)},
			want: moveStep{},
		},
		{
			name: "the metadata shard drops a dead draining node",
			v:    moveView{shard: MetaShard, self: 1, want: []int32{1, 2, 3}, voters: []int32{1, 2, 3}, nonvoters: []int32{4}, live: idSet(1, 2, 3), caughtUp: all, nodes: registered([]int32{1, 2, 3}, 4)},
			want: moveStep{moveRemove, 4},
		},
		{
			name: "the metadata shard keeps a dead active node, which may come back",
			v:    moveView{shard: MetaShard, self: 1, want: []int32{1, 2, 3}, voters: []int32{1, 2, 3}, nonvoters: []int32{4}, live: idSet(1, 2, 3), caughtUp: all, nodes: registered([]int32{1, 2, 3, 4})},
			want: moveStep{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextMove(tc.v); got != tc.want {
				t.Errorf("nextMove = %v %d, want %v %d", got.kind, got.node, tc.want.kind, tc.want.node)
			}
		})
	}
}
