package bench

import (
	"testing"

	"github.com/kcoord/kcoord/groups"
)

func TestGroupOfShardMapsToTheShard(t *testing.T) {
	for shard := range int32(50) {
		if g := groupOfShard("p", shard, 50); groups.PartitionFor(g, 50) != shard {
			t.Errorf("groupOfShard(%d) = %q, which maps to shard %d", shard, g, groups.PartitionFor(g, 50))
		}
	}
}

func TestBusiestIsTheNodeLeadingTheMostShards(t *testing.T) {
	node, led := busiest(status(2, 3, 2, 1, 3))
	if node != 2 || len(led) != 2 || led[0] != 0 || led[1] != 2 {
		t.Errorf("busiest = node %d leading %v, want node 2 leading [0 2] (the lowest of those tied)", node, led)
	}
}
