package cluster

import (
	"encoding/json"
	"testing"
	"time"
)

// TestWipedVoterBehindOversizedMetasNeverVotes: the survivors' gossip
// metas are too large to carry their voters, so nothing shows whether the
// wiped node 3 holds a seat. It must fail closed: no cluster id adopted, no
// term, no entry, however long it runs. (Before, it adopted the seeds' id,
// which let their Raft traffic in, and voted with an empty log.)
func TestWipedVoterBehindOversizedMetasNeverVotes(t *testing.T) {
	// No disk counts as slow here: "slow" would grow the survivors' metas
	// past a limit sized one byte short of their voters.
	nodes := startGossipCluster(t, 3, testShards, func(cfg *Config) { cfg.slowSyncFloor = time.Hour })
	cfg3 := nodes[2].cfg
	gossipAddr, raftAddr := nodes[2].GossipAddr(), nodes[2].RaftAddr()
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		g := n.gossip
		g.metaMu.Lock()
		m := g.self
		g.metaMu.Unlock()
		// What NodeMeta keeps before the voters go: no bootstrap record,
		// no sync time (which grows with the load).
		m.Version, m.View, m.Proposal, m.Agreement = metaVersion, nil, "", ""
		m.SyncMicros = 0
		b, _ := json.Marshal(m)
		g.metaLimit.Store(int64(len(b) - 1)) // too small for the voters
		g.announce()
	}
	eventually(t, 5*time.Second, "the survivors' metas leave their voters out", func() bool {
		for _, p := range nodes[0].gossip.others() {
			if p.HasState && !p.VotersTruncated {
				return false
			}
		}
		return true
	})

	c := cfg3
	c.DataDir = t.TempDir() // wiped
	c.GossipAddr, c.RaftAddr = gossipAddr, raftAddr
	c.Join = []string{nodes[0].GossipAddr()}
	c.JoinTimeout = 2 * time.Second
	logs := capture(t, &c)
	wiped := startTestNode(t, c)
	time.Sleep(3 * time.Second) // the survivors keep heartbeating and asking for votes
	for _, id := range allShardIDs(testShards) {
		if s := wiped.Shard(id); s.Raft.CurrentTerm() != 0 || s.Raft.LastIndex() != 0 {
			t.Errorf("shard %d: the wiped node took term %d, last index %d; want 0, 0", id, s.Raft.CurrentTerm(), s.Raft.LastIndex())
		}
	}
	if wiped.ClusterID() != "" {
		t.Errorf("the wiped node adopted cluster id %q", wiped.ClusterID())
	}
	// Under load the join's timeout and its explanation may come later
	// than the 3 s above.
	eventually(t, 10*time.Second, "the wiped node says why it does not join", func() bool {
		return len(logs.Lines("do not advertise their voters in full")) > 0
	})
}
