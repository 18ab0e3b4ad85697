package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestBootstrapPeerThatCrashedBeforeBootstrappingTakesItsSeat: in a
// three-node first boot, node 2 crashes the moment its peers agree, before
// its own shards take the configuration (its node.json awaits its peers, it
// holds no Raft state); nodes 1 and 3 bootstrap with it in every shard.
// Restarted on the same data dir and addresses, with the same flags or
// with --join alone, it shows with the proposal node.json kept that it took
// part, takes its seat (no wiped-voter refusal), gets every shard's
// configuration from the leaders, and is ready; the cluster replicates to
// it. With another proposal in its node.json (a node that did not take
// part in that agreement) it is still refused.
func TestBootstrapPeerThatCrashedBeforeBootstrappingTakesItsSeat(t *testing.T) {
	for i, tc := range []struct {
		name   string
		expect int // BootstrapExpect of the restart
	}{
		{"restarted with the same flags", 3},
		{"restarted with --join alone", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]*testNode, 3)
			for j := range nodes {
				cfg := gossipConfig(t, t.TempDir(), int32(j+1), testShards)
				cfg.BootstrapExpect = 3
				if j > 0 {
					cfg.Join = []string{nodes[0].GossipAddr()}
				}
				cfg.stallBootstrap = j == 1
				logs := capture(t, &cfg)
				nodes[j] = startTestNode(t, cfg)
				nodes[j].logs = logs
			}
			a, b, c := nodes[0], nodes[1], nodes[2]
			for _, tn := range []*testNode{a, c} {
				waitReady(t, tn.Node, 20*time.Second)
			}
			waitShardLeaders(t, []*testNode{a, c}, testShards)
			cid := a.ClusterID()
			if cid == "" || c.ClusterID() != cid {
				t.Fatalf("cluster ids %q and %q", cid, c.ClusterID())
			}
			for _, id := range allShardIDs(testShards) {
				if got := shardVoters(a.Shard(id)); !slices.Equal(got, []int32{1, 2, 3}) {
					t.Fatalf("shard %d: voters %v, want [1 2 3] (node 2 in the agreement)", id, got)
				}
				if s := b.Shard(id); s.Raft.CurrentTerm() != 0 || s.Raft.LastIndex() != 0 {
					t.Fatalf("shard %d on node 2: term %d, last index %d; want no Raft state", id, s.Raft.CurrentTerm(), s.Raft.LastIndex())
				}
			}

			// Node 2 crashes: node.json awaits its peers, as it would
			// have after any first boot's crash at this point.
			bcfg := b.cfg
			gossipAddr, raftAddr := b.GossipAddr(), b.RaftAddr()
			if err := b.Shutdown(); err != nil {
				t.Fatal(err)
			}
			nodeJSON := filepath.Join(bcfg.DataDir, identityFile)
			crashed, err := os.ReadFile(nodeJSON)
			if err != nil {
				t.Fatal(err)
			}
			id, ok, err := readIdentity(bcfg.DataDir)
			if err != nil || !ok || !id.AwaitingPeers || id.ClusterID != "" || id.Proposal == "" || id.Agreement != "" {
				t.Fatalf("node 2's node.json after the crash: %+v, %v, %v; want awaiting peers, a proposal, no cluster id, no agreement", id, ok, err)
			}
			restart := bcfg
			restart.GossipAddr, restart.RaftAddr = gossipAddr, raftAddr
			restart.stallBootstrap = false
			restart.BootstrapExpect = tc.expect

			if i == 0 {
				// The same data dir with another proposal, as a node
				// that did not take part in that agreement has: refused.
				other := id
				other.Proposal = "a proposal this node never made"
				if err := writeIdentity(bcfg.DataDir, other); err != nil {
					t.Fatal(err)
				}
				nc := restart
				nlogs := capture(t, &nc)
				stranger := startTestNode(t, nc)
				eventually(t, 10*time.Second, "the stranger logs the wiped-voter refusal", func() bool {
					return len(nlogs.Lines("replica removal is a later issue")) == 1
				})
				time.Sleep(time.Second)
				if stranger.Ready() || stranger.ClusterID() != "" {
					t.Errorf("the node with another proposal is ready %v with cluster id %q", stranger.Ready(), stranger.ClusterID())
				}
				if !stranger.noRaftState() {
					t.Error("the node with another proposal took Raft state")
				}
				if len(nlogs.Lines("taking its seat")) > 0 {
					t.Error("the node with another proposal took a seat")
				}
				if err := stranger.Shutdown(); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(nodeJSON, crashed, 0o640); err != nil {
					t.Fatal(err)
				}
			}

			logs := capture(t, &restart)
			again := startTestNode(t, restart)
			waitReady(t, again.Node, 20*time.Second)
			all := []*testNode{a, again, c}
			eventually(t, 10*time.Second, "node 2 holds every shard", func() bool {
				for _, id := range allShardIDs(testShards) {
					if !again.Shard(id).replicated() {
						return false
					}
				}
				return true
			})
			for _, id := range allShardIDs(testShards) {
				if got := shardVoters(again.Shard(id)); !slices.Equal(got, []int32{1, 2, 3}) {
					t.Errorf("shard %d on node 2: voters %v, want [1 2 3]", id, got)
				}
			}
			waitShardLeaders(t, all, testShards)
			if again.ClusterID() != cid {
				t.Errorf("node 2's cluster id %q, want %q", again.ClusterID(), cid)
			}
			if got := logs.Lines("replica removal is a later issue"); len(got) > 0 {
				t.Errorf("node 2 logged the wiped-voter refusal: %v", got)
			}
			id2, _, err := readIdentity(bcfg.DataDir)
			if err != nil || id2.AwaitingPeers || id2.ClusterID != cid || id2.Proposal != id.Proposal || !slices.Equal(id2.View, []int32{1, 2, 3}) {
				t.Errorf("node 2's node.json after taking its seat: %+v, %v", id2, err)
			}
			if ida, _, _ := readIdentity(a.cfg.DataDir); id2.Agreement == "" || id2.Agreement != ida.Agreement {
				t.Errorf("node 2 records agreement %q, node 1 %q", id2.Agreement, ida.Agreement)
			}

			// The cluster replicates to it: a commit on each shard's
			// leader reaches node 2's FSM.
			leaders := shardLeaders(t, all, testShards)
			for _, shard := range []int32{0, testShards - 1} {
				leader := all[slices.IndexFunc(all, func(tn *testNode) bool { return tn.ID() == leaders[shard].Node })]
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := leader.Shard(shard).Apply(ctx, []byte(fmt.Sprintf("set k%d v", shard)), 5*time.Second)
				cancel()
				if err != nil {
					t.Fatalf("shard %d: %v", shard, err)
				}
				eventually(t, 5*time.Second, fmt.Sprintf("shard %d's commit reaches node 2", shard), func() bool {
					v, _ := again.fsm(shard).get(fmt.Sprintf("k%d", shard))
					return v == "v"
				})
			}
		})
	}
}

// TestAgreementWithRecognisesOnlyParticipants checks, on gossip metas, how
// a node without Raft state tells that it took part in the agreement that
// placed it.
func TestAgreementWithRecognisesOnlyParticipants(t *testing.T) {
	m := func(id int32) nodeMeta {
		return nodeMeta{Version: metaVersion, ID: id, Raft: "r", Expect: 3, Proposal: fmt.Sprintf("p%d", id), View: []int32{1, 2, 3}}
	}
	agreement := agreementDigest([]nodeMeta{m(1), m(2), m(3)})
	stateful := func(nm nodeMeta) nodeMeta {
		nm.HasState, nm.ClusterID, nm.Agreement, nm.Voters = true, "p1", agreement, []int32{1, 2, 3}
		return nm
	}
	a, c := stateful(m(1)), stateful(m(3))
	cases := []struct {
		name     string
		proposal string
		peers    []nodeMeta
		found    bool
		missing  []int32
	}{
		{"a participant", "p2", []nodeMeta{a, c}, true, nil},
		{"a participant that sees one stateful peer and the other's proposal", "p2", []nodeMeta{a, m(3)}, true, nil},
		{"another proposal (a wiped node)", "p2 after the wipe", []nodeMeta{a, c}, false, nil},
		{"a member's proposal not in gossip yet", "p2", []nodeMeta{a}, false, []int32{3}},
		{"a member that gossips no proposal", "p2", []nodeMeta{{Version: metaVersion, ID: 1, Raft: "r", HasState: true, ClusterID: "p1", Voters: []int32{1, 2, 3}}, c}, false, []int32{1}},
		{"no peer advertises an agreement", "p2", []nodeMeta{{Version: metaVersion, ID: 1, Raft: "r", HasState: true, ClusterID: "p1"}}, false, nil},
		{"an agreement without this node", "p2", []nodeMeta{func() nodeMeta { p := a; p.View = []int32{1, 3}; return p }(), m(3)}, false, nil},
	}
	for _, tc := range cases {
		d, missing := agreementWith(2, tc.proposal, tc.peers)
		if (d.kind == bootGo) != tc.found || !slices.Equal(missing, tc.missing) {
			t.Errorf("%s: %+v, missing %v; want found %v, missing %v", tc.name, d, missing, tc.found, tc.missing)
			continue
		}
		if tc.found && (!slices.Equal(d.ids, []int32{1, 2, 3}) || d.clusterID != "p1" || d.digest != agreement) {
			t.Errorf("%s: %+v, want view [1 2 3], cluster p1, digest %s", tc.name, d, agreement)
		}
	}
}

// TestNodeJSONKeepsTheBootstrapRecord: node.json round-trips the proposal,
// view and agreement, and a file without them (as earlier version-2 files
// are) still loads.
func TestNodeJSONKeepsTheBootstrapRecord(t *testing.T) {
	dir := t.TempDir()
	want := identity{NodeID: 2, Shards: 4, ClusterID: "c", Proposal: "p2", View: []int32{1, 2, 3}, Agreement: "d"}
	if err := writeIdentity(dir, want); err != nil {
		t.Fatal(err)
	}
	want.Version = identityVersion
	got, ok, err := readIdentity(dir)
	if err != nil || !ok || !got.equal(want) {
		t.Fatalf("read back %+v, %v, %v; want %+v", got, ok, err, want)
	}
	b, _ := os.ReadFile(filepath.Join(dir, identityFile))
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil || raw["proposal"] != "p2" || raw["agreement"] != "d" {
		t.Errorf("node.json: %s", b)
	}
	old := `{"version": 2, "node_id": 2, "shards": 4, "awaiting_peers": true}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, identityFile), []byte(old), 0o640); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := readIdentity(dir); err != nil || !ok || got.Proposal != "" || got.View != nil || !got.AwaitingPeers {
		t.Errorf("earlier version-2 file: %+v, %v, %v", got, ok, err)
	}
}
