package cluster

import (
	"testing"
	"time"
)

// TestFollowersOfASilentLeaderSettleUntilTheNextOne: when a shard's leader
// goes silent, its followers report the shard settling (they route to
// themselves and hold requests) until a new leader is heard from.
func TestFollowersOfASilentLeaderSettleUntilTheNextOne(t *testing.T) {
	nodes := startTestCluster(t, 3, 1)
	leader, _ := waitLeaderEpoch(t, nodes, 0)
	var follower *testNode
	for _, tn := range nodes {
		if tn != leader {
			follower = tn
			break
		}
	}
	eventually(t, 5*time.Second, "a steady follower", func() bool { return !follower.Shard(0).Settling() })
	heal := leader.Faults().Isolate()
	defer heal()
	eventually(t, 5*time.Second, "the follower sees the shard settling", func() bool {
		return follower.Shard(0).Settling() || follower.Shard(0).IsLeader()
	})
	if b, ok := follower.LeaderOf(0); follower.Shard(0).Settling() && (!ok || b.NodeID != follower.ID()) {
		t.Fatalf("a settling follower routes to %+v, %v; want itself", b, ok)
	}
	eventually(t, 10*time.Second, "a new leader settles the shard", func() bool {
		for _, tn := range nodes {
			if tn != leader && tn.Shard(0).Settling() {
				return false
			}
		}
		return leaderOfShard(nodes, 0) != nil && leaderOfShard(nodes, 0) != leader
	})
}
