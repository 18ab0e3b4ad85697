package cluster

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// A node whose data dir was made with 3 shards and that restarts with the
// count unset runs the 3 it recorded, not DefaultShards: an upgrade that
// changes the default keeps every existing node's count. A set count that
// differs is refused with ErrDataDirMismatch, saying what to do.
func TestARestartedNodeKeepsItsRecordedShardCount(t *testing.T) {
	dir := t.TempDir()
	tn := startTestNode(t, testConfig(t, dir, 1, 3))
	waitReady(t, tn.Node, 5*time.Second)
	if _, err := tn.Shard(2).Apply(t.Context(), []byte("set a 1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := tn.Shutdown(); err != nil {
		t.Fatal(err)
	}

	tn = startTestNode(t, testConfig(t, dir, 1, 0))
	waitReady(t, tn.Node, 5*time.Second)
	if got := tn.ShardCount(); got != 3 || len(tn.Shards()) != 3 || tn.Shard(3) != nil {
		t.Fatalf("restarted with the count unset: ShardCount %d, %d shards; want the recorded 3", got, len(tn.Shards()))
	}
	eventually(t, 5*time.Second, "shard 2 replays its state", func() bool {
		v, _ := tn.fsm(2).get("a")
		return v == "1"
	})
	if err := tn.Shutdown(); err != nil {
		t.Fatal(err)
	}

	_, err := NewNode(withFSMs(testConfig(t, dir, 1, DefaultShards)))
	if !errors.Is(err, ErrDataDirMismatch) || !strings.Contains(err.Error(), "unset") {
		t.Fatalf("restart with offsets.topic.num.partitions=%d on a data dir of 3: %v; want ErrDataDirMismatch advising to leave it unset", DefaultShards, err)
	}
	t.Logf("refused: %v", err)
}

// A fresh node started with Join and the count unset adopts the count of
// its seeds' cluster (3, not DefaultShards) before it opens a shard, and
// records it; a fresh node set to another count is refused before it
// writes anything to its data dir.
func TestAFreshJoinerAdoptsTheClustersShardCount(t *testing.T) {
	nodes := startGossipCluster(t, 1, 3)
	seed := []string{nodes[0].GossipAddr()}

	t.Run("unset adopts", func(t *testing.T) {
		cfg := gossipConfig(t, t.TempDir(), 2, 0)
		cfg.BootstrapExpect, cfg.Join = 0, seed
		joiner := startTestNode(t, cfg)
		if got := joiner.ShardCount(); got != 3 || joiner.Shard(2) == nil || joiner.Shard(3) != nil {
			t.Fatalf("joiner runs %d shards, want the cluster's 3", got)
		}
		waitReady(t, joiner.Node, 10*time.Second)
		if joiner.ClusterID() != nodes[0].ClusterID() {
			t.Fatalf("joiner's cluster id %q, want %q", joiner.ClusterID(), nodes[0].ClusterID())
		}
		id, ok, err := readIdentity(cfg.DataDir)
		if err != nil || !ok || id.Shards != 3 {
			t.Fatalf("joiner's node.json: %+v, %v, %v; want 3 shards recorded", id, ok, err)
		}
		for _, s := range nodes[0].Shards() {
			b, ok := joiner.LeaderOf(s.ID)
			if !ok || b.NodeID != 1 {
				t.Errorf("joiner: LeaderOf(%d) = %+v, %v; want node 1", s.ID, b, ok)
			}
		}
	})

	t.Run("set to another count is refused", func(t *testing.T) {
		cfg := withFSMs(gossipConfig(t, t.TempDir(), 3, 5))
		cfg.BootstrapExpect, cfg.Join = 0, seed
		n, err := NewNode(cfg)
		if err == nil {
			_ = n.Shutdown()
		}
		if !errors.Is(err, ErrShardCountMismatch) || !strings.Contains(err.Error(), "runs 3 shards") || !strings.Contains(err.Error(), "unset") {
			t.Fatalf("joiner set to 5 shards: %v; want ErrShardCountMismatch naming the cluster's 3", err)
		}
		t.Logf("refused: %v", err)
		if entries, err := os.ReadDir(cfg.DataDir); err != nil || len(entries) != 0 {
			t.Fatalf("the refused joiner's data dir holds %v (%v); want it empty", entries, err)
		}
	})
}

// A join-only node that found no peer holding state before it opened its
// shards (its seed was still waiting for a bootstrap) runs DefaultShards;
// when the cluster then bootstraps with another count, it does not join
// it: it adopts no cluster id (so its Raft admits none of the cluster's
// traffic), says why once and stops (Fatal), so that it serves no client
// with groups hashed over another count than the cluster's.
func TestANodeThatOpenedAnotherCountNeverJoins(t *testing.T) {
	a := gossipConfig(t, t.TempDir(), 1, 3)
	a.BootstrapExpect = 2
	first := startTestNode(t, a)

	j := gossipConfig(t, t.TempDir(), 3, 0)
	j.BootstrapExpect, j.Join, j.JoinTimeout = 0, []string{first.GossipAddr()}, 300*time.Millisecond
	logs := capture(t, &j)
	joiner := startTestNode(t, j)
	if got := joiner.ShardCount(); got != DefaultShards {
		t.Fatalf("joiner that found no cluster runs %d shards, want DefaultShards %d", got, DefaultShards)
	}

	b := gossipConfig(t, t.TempDir(), 2, 3)
	b.BootstrapExpect, b.Join = 2, []string{first.GossipAddr()}
	second := startTestNode(t, b)
	waitReady(t, first.Node, 20*time.Second)
	waitReady(t, second.Node, 20*time.Second)
	eventually(t, 10*time.Second, "the joiner says why it does not join", func() bool {
		return len(logs.Lines("the peers' cluster runs another shard count", "runs 3")) > 0
	})
	select {
	case <-joiner.Fatal():
		if !errors.Is(joiner.FatalErr(), ErrShardCountMismatch) {
			t.Errorf("the joiner stopped with %v, want ErrShardCountMismatch", joiner.FatalErr())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the joiner of another shard count did not stop")
	}
	time.Sleep(500 * time.Millisecond) // a few more cluster loop rounds
	if id := joiner.ClusterID(); id != "" {
		t.Fatalf("the joiner adopted cluster id %q of a cluster with another shard count", id)
	}
	if n := len(logs.Lines("the peers' cluster runs another shard count")); n != 1 {
		t.Errorf("the refusal was logged %d times, want once", n)
	}
}

// The count a cluster runs, as a joiner reads it from the metas of the
// peers holding state: the one they advertise; 50 (the default of 0.1.0,
// which advertises none) when none does; an error when they differ.
func TestClusterShardsFromGossip(t *testing.T) {
	for _, tc := range []struct {
		name        string
		peers       []nodeMeta
		count       int32
		release, ok bool
		wantErr     bool
	}{
		{name: "no peer holding state"},
		{name: "advertised", peers: []nodeMeta{{ID: 1, Shards: 16}, {ID: 2, Shards: 16}}, count: 16, ok: true},
		{name: "a 0.1.0 node among upgraded ones", peers: []nodeMeta{{ID: 1}, {ID: 2, Shards: 8}}, count: 8, ok: true},
		{name: "0.1.0 nodes only", peers: []nodeMeta{{ID: 1}, {ID: 2}}, count: 50, release: true, ok: true},
		{name: "different counts", peers: []nodeMeta{{ID: 1, Shards: 8}, {ID: 2, Shards: 16}}, ok: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			count, release, ok, err := clusterShards(tc.peers)
			if (err != nil) != tc.wantErr || ok != tc.ok || !tc.wantErr && (count != tc.count || release != tc.release) {
				t.Fatalf("clusterShards = %d, %v, %v, %v; want %d, %v, %v, error %v", count, release, ok, err, tc.count, tc.release, tc.ok, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, ErrShardCountMismatch) {
				t.Fatalf("error %v, want ErrShardCountMismatch", err)
			}
		})
	}
}

// Nodes of a multi-node bootstrap that advertise different shard counts
// (one set explicitly, or one of 0.1.0, which runs 50) do not bootstrap,
// and say why; the same view with one count bootstraps.
func TestBootstrapNeedsOneShardCount(t *testing.T) {
	view := []int32{1, 2, 3}
	metas := func(counts ...int32) []nodeMeta {
		var out []nodeMeta
		for i, c := range counts {
			out = append(out, nodeMeta{Version: metaVersion, ID: int32(i + 1), Raft: "r", Expect: 3, Proposal: "p" + string(rune('a'+i)), View: view, Shards: c})
		}
		return out
	}
	if d := decideBootstrap(3, metas(16, 16, 16)); d.kind != bootGo {
		t.Fatalf("one count: %+v, want bootGo", d)
	}
	if d := decideBootstrap(3, metas(50, 0, 50)); d.kind != bootGo {
		t.Fatalf("50 and a node of 0.1.0 (which runs 50): %+v, want bootGo", d)
	}
	for _, counts := range [][]int32{{16, 16, 8}, {16, 0, 16}} {
		d := decideBootstrap(3, metas(counts...))
		if d.kind != bootWait || !strings.Contains(d.problem, "offsets.topic.num.partitions") {
			t.Errorf("counts %v: %+v, want bootWait with a problem naming offsets.topic.num.partitions", counts, d)
		}
	}
}

// release010Meta is the gossip meta of release 0.1.0 (commit 6c692b4,
// cluster/gossip.go), which knows no shard count.
type release010Meta struct {
	Version         int     `json:"v,omitempty"`
	ID              int32   `json:"id"`
	Kafka           string  `json:"kafka"`
	Raft            string  `json:"raft"`
	HasState        bool    `json:"state"`
	Expect          int     `json:"expect"`
	ClusterID       string  `json:"cid,omitempty"`
	Proposal        string  `json:"prop,omitempty"`
	View            []int32 `json:"view,omitempty"`
	Agreement       string  `json:"agreed,omitempty"`
	Voters          []int32 `json:"voters,omitempty"`
	VotersTruncated bool    `json:"vtrunc,omitempty"`
	Applies         int     `json:"fsm,omitempty"`
}

// The shard count rides in the gossip meta without a new meta version:
// 0.1.0 decodes a meta that carries it (json.Unmarshal, as 0.1.0's
// decodeMeta, skips the field), and this release decodes 0.1.0's meta
// as one that advertises no count, which counts as 50.
func TestShardCountInGossipMetaCrossesReleases(t *testing.T) {
	g := &gossip{self: nodeMeta{ID: 1, Kafka: "k:9092", Raft: "r:9093", HasState: true, Expect: 3, ClusterID: "c", Voters: []int32{1, 2}, Shards: 16}}
	b := g.NodeMeta(512)
	if !strings.Contains(string(b), `"shards":16`) {
		t.Fatalf("meta %s does not carry the shard count", b)
	}
	var old release010Meta
	if err := json.Unmarshal(b, &old); err != nil || old.ID != 1 || old.Raft != "r:9093" || !old.HasState || old.ClusterID != "c" || !slices.Equal(old.Voters, []int32{1, 2}) {
		t.Fatalf("0.1.0 decodes %s as %+v, %v", b, old, err)
	}

	fromOld, _ := json.Marshal(release010Meta{Version: 2, ID: 2, Kafka: "k:9092", Raft: "r2:9093", HasState: true, Expect: 3, ClusterID: "c", Voters: []int32{1, 2}, Applies: 15})
	nm, ok := decodeMeta(fromOld)
	if !ok || nm.Shards != 0 || advertisedShards(nm) != 50 {
		t.Fatalf("0.1.0's meta %s decodes as %+v (ok %v): shards %d, counting as %d; want none, counting as 50", fromOld, nm, ok, nm.Shards, advertisedShards(nm))
	}
}

// Open with the count unset on a fresh data dir and no seeds opens
// DefaultShards; Validate refuses a negative count.
func TestAFreshNodeWithoutSeedsRunsDefaultShards(t *testing.T) {
	n, err := Open(withFSMs(testConfig(t, t.TempDir(), 1, 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	if n.ShardCount() != DefaultShards || n.Shard(DefaultShards-1) == nil || n.Shard(DefaultShards) != nil {
		t.Fatalf("ShardCount %d, want DefaultShards %d", n.ShardCount(), DefaultShards)
	}
	cfg := withFSMs(testConfig(t, t.TempDir(), 1, -1))
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate with -1 shards: %v, want ErrInvalidConfig", err)
	}
}

// A cluster of a release that gossips no shard count still gossips its
// leaders: the highest group shard they name, when they name all below
// it, tells a joiner whether that cluster runs the release's default.
func TestTheLeaderTableShowsTheTopGroupShard(t *testing.T) {
	var tab leaderTable
	if _, ok := tab.topGroupShard(); ok {
		t.Fatal("an empty table named a top shard")
	}
	tab.update(MetaShard, leaderEntry{Node: 1, Term: 1})
	if _, ok := tab.topGroupShard(); ok {
		t.Fatal("a table naming only the metadata shard named a top group shard")
	}
	for s := range int32(16) {
		tab.update(s, leaderEntry{Node: 1 + s%3, Term: 1})
	}
	if top, ok := tab.topGroupShard(); !ok || top != 15 {
		t.Fatalf("16 shards led: top %d (%v), want 15", top, ok)
	}
	tab.update(20, leaderEntry{Node: 2, Term: 1})
	if top, ok := tab.topGroupShard(); ok {
		t.Fatalf("a table with shards 16-19 unknown named top %d", top)
	}
}
