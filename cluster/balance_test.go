package cluster

import "testing"

func TestBalanceQuota(t *testing.T) {
	four := []int32{1, 2, 3, 4}
	for _, tc := range []struct {
		name          string
		counts        map[int32]int
		live          []int32
		self          int32
		mine          int
		excess, limit int
	}{
		{"above ceil, the excess goes to nodes below ceil", map[int32]int{1: 17, 2: 17, 3: 16, 4: 0}, four, 1, 17, 4, 13},
		{"the excess counts only shards that can be handed off", map[int32]int{1: 17, 2: 17, 3: 16, 4: 0}, four, 1, 14, 1, 13},
		// 13/13/13/11 of 50: nobody is above ceil, and without the floor
		// rule node 4 would stay at 11 for good.
		{"at ceil with a node below floor, one goes to it", map[int32]int{1: 13, 2: 13, 3: 13, 4: 11}, four, 1, 13, 1, 12},
		{"at floor, nothing goes even with a node below it", map[int32]int{1: 12, 2: 13, 3: 13, 4: 12}, four, 1, 12, 0, 13},
		{"balanced, nothing goes", map[int32]int{1: 13, 2: 13, 3: 12, 4: 12}, four, 1, 13, 0, 13},
		{"with nothing to hand off, nothing goes", map[int32]int{1: 13, 2: 13, 3: 13, 4: 11}, four, 1, 0, 0, 13},
		// Node 4 is draining: it shares no leadership, so the floor is of
		// three nodes.
		{"a draining node is not a node to fill", map[int32]int{1: 17, 2: 17, 3: 16}, []int32{1, 2, 3}, 1, 17, 0, 17},
		{"no live node", map[int32]int{}, nil, 1, 3, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			excess, limit := balanceQuota(tc.counts, tc.live, tc.self, 50, tc.mine)
			if excess != tc.excess || limit != tc.limit {
				t.Errorf("balanceQuota = %d below %d, want %d below %d", excess, limit, tc.excess, tc.limit)
			}
		})
	}
}
