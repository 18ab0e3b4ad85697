package server

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
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

func waitBalanced(t *testing.T, servers []*Server, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		counts := leaderCounts(servers)
		lo, hi, total := counts[0], counts[0], 0
		for _, c := range counts {
			lo, hi, total = min(lo, c), max(hi, c), total+c
		}
		if hi-lo <= 1 && total == int(servers[0].ShardCount()) {
			t.Logf("leaders per node: %v", counts)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leadership not balanced after %v: %v", within, counts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitAllReady(t *testing.T, servers []*Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, s := range servers {
		if err := s.WaitReady(ctx); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
}

func TestReturningNodeGetsItsShareOfLeaders(t *testing.T) {
	servers := StartTestCluster(t, 3, nil)
	waitBalanced(t, servers, 30*time.Second)
	if err := servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	// The two survivors lead everything.
	waitBalanced(t, servers[1:], 30*time.Second)
	servers[0] = RestartTestNode(t, servers, 0)
	waitAllReady(t, servers)
	waitBalanced(t, servers, 60*time.Second)
}

func TestPlannedShutdownMovesLeadershipFirst(t *testing.T) {
	servers := StartTestCluster(t, 3, nil)
	waitBalanced(t, servers, 30*time.Second)
	if err := servers[2].Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Right after a planned stop every shard already has a leader among
	// the others: nobody waited for an election timeout.
	for _, sh := range servers[0].Node().Shards() {
		if b, ok := servers[0].Node().LeaderOf(sh.ID); !ok || b.NodeID == 3 {
			t.Fatalf("shard %d: leader %+v %v right after node 3 left", sh.ID, b, ok)
		}
	}
}

func TestRestartingAllNodesLosesNothing(t *testing.T) {
	servers := StartTestCluster(t, 3, nil)
	// Commit through the shards' leaders.
	for g := range 20 {
		group := "restart-group-" + strconv.Itoa(g)
		s := servers[0]
		leader, ok := s.Node().LeaderOf(s.ShardFor(group))
		if !ok {
			t.Fatal("no leader")
		}
		owner := servers[leader.NodeID-1]
		c := owner.coords[owner.ShardFor(group)]
		_, err := c.Commit(context.Background(), groups.CommitRequest{GroupID: group, Generation: -1, Partitions: []groups.CommitPartition{
			{Topic: "t", Partition: int32(g), Offset: int64(100 + g)},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range servers {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range servers {
		servers[i] = RestartTestNode(t, servers, i)
	}
	waitAllReady(t, servers)
	// Every replica applies every acknowledged commit (followers as soon as
	// they learn the commit index).
	deadline := time.Now().Add(10 * time.Second)
	for g := range 20 {
		group := "restart-group-" + strconv.Itoa(g)
		for i, s := range servers {
			for {
				o, ok := s.states[s.ShardFor(group)].Offset(group, fsm.TopicPartition{Topic: "t", Partition: int32(g)})
				if ok && o.Offset == int64(100+g) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %d lost %s's commit: %+v %v", i+1, group, o, ok)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}
