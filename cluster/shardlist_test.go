package cluster

import "testing"

func TestShardListWritesRunsAsRanges(t *testing.T) {
	for _, tc := range []struct {
		ids  []int32
		want string
	}{
		{nil, ""},
		{[]int32{3}, "3"},
		{[]int32{2, 0, 1, 7, -1, 9, 8, 8}, "-1,0-2,7-9"},
		{[]int32{5, 3}, "3,5"},
	} {
		if got := shardList(tc.ids); got != tc.want {
			t.Errorf("shardList(%v) = %q, want %q", tc.ids, got, tc.want)
		}
	}
}
