package server

import (
	"testing"
	"time"
)

func TestThreeNodesBootstrapAndBalance(t *testing.T) {
	servers := StartTestCluster(t, 3, nil)
	// Every node knows every shard's leader and the three live brokers.
	for i, s := range servers {
		n := s.Node()
		if got := len(n.Brokers()); got != 3 {
			t.Fatalf("node %d sees %d brokers", i+1, got)
		}
		for _, sh := range n.Shards() {
			if _, ok := n.LeaderOf(sh.ID); !ok {
				t.Fatalf("node %d: shard %d has no known leader", i+1, sh.ID)
			}
		}
	}
	// Leadership spreads: 8 shards on 3 nodes end 2/3/3.
	deadline := time.Now().Add(30 * time.Second)
	for {
		counts := leaderCounts(servers)
		lo, hi := counts[0], counts[0]
		for _, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
		}
		if hi-lo <= 1 {
			t.Logf("leaders per node: %v", counts)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leadership not balanced: %v", counts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func leaderCounts(servers []*Server) []int {
	counts := make([]int, len(servers))
	for i, s := range servers {
		for _, sh := range s.Node().Shards() {
			if sh.IsLeader() {
				counts[i]++
			}
		}
	}
	return counts
}
