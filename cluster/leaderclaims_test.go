package cluster

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// TestGossipedLeaderClaimsAreCheckedAgainstRaft: a leader announcement
// that gossip brings (from any peer, forged or stale) is not taken when
// this node knows it false: one naming this node, whose own Raft says
// what it leads, and, on a voter of the shard, one naming a node outside
// the shard's configuration, whatever its term.
func TestGossipedLeaderClaimsAreCheckedAgainstRaft(t *testing.T) {
	const shards = 3
	nodes := make([]*testNode, 3)
	for i := range nodes {
		cfg := gossipConfig(t, t.TempDir(), int32(i+1), shards)
		cfg.BootstrapExpect, cfg.ReplicationFactor = 3, 2
		if i > 0 {
			cfg.Join = []string{nodes[0].GossipAddr()}
		}
		nodes[i] = startTestNode(t, cfg)
	}
	for _, tn := range nodes {
		waitReady(t, tn.Node, 20*time.Second)
	}
	leaders := waitShardLeaders(t, nodes, shards)
	forge := func(tn *testNode, shard, node int32) {
		b, _ := json.Marshal(leaderMsg{Shard: shard, Entry: leaderEntry{Node: node, Term: 1 << 40}})
		tn.gossip.NotifyMsg(b)
	}
	forged := func(tn *testNode, shard, node int32) bool {
		e, _ := tn.leaders.get(shard)
		return e.Node == node && e.Term == 1<<40
	}

	// This node's own leadership is its Raft's word.
	other := nodeByID(nodes, leaders[MetaShard].Node%3+1)
	forge(other, MetaShard, other.ID())
	if forged(other, MetaShard, other.ID()) {
		t.Fatalf("node %d took a gossiped claim that it leads the metadata group", other.ID())
	}

	// Placement moves replicas to two voters a shard: find a shard with a
	// node outside it, and forge that node's leadership to a voter.
	var shard, outsider int32 = -2, 0
	var voter *testNode
	eventually(t, 20*time.Second, "a shard of two voters", func() bool {
		for id := range int32(shards) {
			for _, tn := range nodes {
				conf, ok := tn.Shard(id).configuration()
				if !ok || !tn.Shard(id).votes() {
					continue
				}
				voters := membersOf(conf).voters
				if len(voters) != 2 {
					continue
				}
				for _, o := range nodes {
					if !slices.Contains(voters, o.ID()) {
						shard, voter, outsider = id, tn, o.ID()
						return true
					}
				}
			}
		}
		return false
	})
	forge(voter, shard, outsider)
	if forged(voter, shard, outsider) {
		t.Fatalf("voter %d of shard %d took node %d, outside the shard, as its leader", voter.ID(), shard, outsider)
	}

	// The outsider replicates nothing of the shard: it cannot check, and
	// takes a claim naming a voter (the term is not Raft's to check there).
	claimed := voter.ID()
	forge(nodeByID(nodes, outsider), shard, claimed)
	if !forged(nodeByID(nodes, outsider), shard, claimed) {
		t.Fatalf("node %d refused a claim it cannot check", outsider)
	}
}
