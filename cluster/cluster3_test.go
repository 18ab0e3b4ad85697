package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// startTestCluster starts n nodes in this process on loopback ports, each
// with shards group shards, and bootstraps every shard by hand across all of
// them (NewNode only bootstraps single nodes for now). mutate, if given,
// adjusts each node's configuration last.
func startTestCluster(t testing.TB, n int, shards int32, mutate ...func(*Config)) []*testNode {
	t.Helper()
	nodes := make([]*testNode, n)
	for i := range nodes {
		cfg := testConfig(t, t.TempDir(), int32(i+1), shards)
		cfg.BootstrapExpect = 0
		cfg.HeartbeatTimeout = 200 * time.Millisecond
		cfg.ElectionTimeout = 200 * time.Millisecond
		cfg.LeaderLeaseTimeout = 100 * time.Millisecond
		cfg.CommitTimeout, cfg.GroupCommitTimeout = 10*time.Millisecond, 10*time.Millisecond
		cfg.TransportTimeout = 2 * time.Second
		for _, m := range mutate {
			m(&cfg)
		}
		nodes[i] = startTestNode(t, cfg)
	}
	var servers []raft.Server
	for _, tn := range nodes {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(tn.ID()), Address: raft.ServerAddress(tn.RaftAddr())})
		for _, other := range nodes {
			other.members.set(tn.Self(), tn.RaftAddr())
		}
	}
	for _, tn := range nodes {
		for _, id := range allShardIDs(shards) {
			err := tn.Shard(id).Raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
			if errors.Is(err, raft.ErrCantBootstrap) {
				// The nodes bootstrapped before this one already elected a
				// leader, which replicated this configuration here: as
				// Node.bootstrap, take it as done.
				err = nil
			}
			if err != nil {
				t.Fatalf("node %d shard %d: bootstrap: %v", tn.ID(), id, err)
			}
		}
	}
	for _, tn := range nodes {
		waitReady(t, tn.Node, 10*time.Second)
	}
	return nodes
}

func nodeByID(nodes []*testNode, id int32) *testNode {
	for _, tn := range nodes {
		if tn.ID() == id {
			return tn
		}
	}
	return nil
}

// TestClusterPartitionLeader runs three nodes whose shards all share one
// port per node, isolates the leader of shard 0 with the mux fault hooks,
// and checks that the majority elects new leaders and that the old leader
// catches up after healing.
func TestClusterPartitionLeader(t *testing.T) {
	const shards = 3
	nodes := startTestCluster(t, 3, shards)
	ctx := context.Background()

	// Every node agrees on each shard's leader and knows it as a broker.
	for _, id := range allShardIDs(shards) {
		var leader Broker
		eventually(t, 5*time.Second, fmt.Sprintf("agreement on shard %d's leader", id), func() bool {
			b0, ok := nodes[0].LeaderOf(id)
			if !ok {
				return false
			}
			for _, tn := range nodes[1:] {
				if b, ok := tn.LeaderOf(id); !ok || b != b0 {
					return false
				}
			}
			leader = b0
			return true
		})
		if !nodeByID(nodes, leader.NodeID).Shard(id).IsLeader() {
			t.Errorf("shard %d: LeaderOf says node %d, which is not leader", id, leader.NodeID)
		}
	}
	if got := len(nodes[0].Brokers()); got != 3 {
		t.Errorf("Brokers() has %d nodes", got)
	}

	// Replication through the mux, on every shard.
	leaderOf := func(id int32, among []*testNode) *testNode {
		for _, tn := range among {
			if tn.Shard(id).IsLeader() {
				return tn
			}
		}
		return nil
	}
	for _, id := range allShardIDs(shards) {
		l := leaderOf(id, nodes)
		if l == nil {
			t.Fatalf("shard %d: no leader", id)
		}
		if _, err := l.Shard(id).Apply(ctx, []byte("set k before"), 2*time.Second); err != nil {
			t.Fatalf("shard %d: Apply: %v", id, err)
		}
		for _, tn := range nodes {
			eventually(t, 5*time.Second, fmt.Sprintf("node %d shard %d replicated", tn.ID(), id), func() bool {
				v, _ := tn.fsm(id).get("k")
				return v == "before"
			})
		}
	}
	// A follower refuses applies with raft.ErrNotLeader.
	old := leaderOf(0, nodes)
	for _, tn := range nodes {
		if tn != old {
			if _, err := tn.Shard(0).Apply(ctx, []byte("set x y"), time.Second); err != raft.ErrNotLeader {
				t.Errorf("Apply on follower: %v, want raft.ErrNotLeader", err)
			}
			break
		}
	}

	// Isolate shard 0's leader.
	var rest []*testNode
	for _, tn := range nodes {
		if tn != old {
			rest = append(rest, tn)
		}
	}
	t.Logf("isolating node %d, leader of shard 0 (term %d)", old.ID(), old.Shard(0).Term())
	start := time.Now()
	heal := old.Faults().Isolate()
	for _, id := range allShardIDs(shards) {
		eventually(t, 10*time.Second, fmt.Sprintf("shard %d led by the majority", id), func() bool {
			l := leaderOf(id, rest)
			if l == nil {
				return false
			}
			b, ok := rest[0].LeaderOf(id)
			return ok && b.NodeID == l.ID()
		})
	}
	t.Logf("every shard led by the majority %v after isolation", time.Since(start))
	eventually(t, 5*time.Second, "the isolated node steps down", func() bool {
		for _, id := range allShardIDs(shards) {
			if old.Shard(id).IsLeader() {
				return false
			}
		}
		return true
	})
	if _, err := old.Shard(0).Apply(ctx, []byte("set k lost"), time.Second); err != raft.ErrNotLeader {
		t.Errorf("Apply on the isolated old leader: %v, want raft.ErrNotLeader", err)
	}
	for _, id := range allShardIDs(shards) {
		if _, err := leaderOf(id, rest).Shard(id).Apply(ctx, []byte("set k during"), 2*time.Second); err != nil {
			t.Fatalf("shard %d: Apply on the new leader: %v", id, err)
		}
	}
	if v, _ := old.fsm(0).get("k"); v != "before" {
		t.Errorf("isolated node applied %q", v)
	}

	// Heal: the old leader catches up on every shard.
	heal()
	for _, id := range allShardIDs(shards) {
		eventually(t, 10*time.Second, fmt.Sprintf("node %d shard %d catches up", old.ID(), id), func() bool {
			v, _ := old.fsm(id).get("k")
			return v == "during"
		})
	}
	for _, tn := range nodes {
		waitReady(t, tn.Node, 10*time.Second)
	}
	for _, tn := range nodes {
		if err := tn.Shutdown(); err != nil {
			t.Errorf("node %d: Shutdown: %v", tn.ID(), err)
		}
	}
}
