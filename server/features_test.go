package server

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/release"
)

// playReleaseOne makes a test node gossip and behave as release 0.1.0
// does: it applies command types up to ACLDelete and supports
// kcoord.version 1 alone.
func playReleaseOne(c *Config) {
	raft := c.Raft
	c.Raft = func(rc *cluster.Config) {
		if raft != nil {
			raft(rc)
		}
		rc.PlayApplyLevel = int(fsm.ACLDeleteType)
	}
}

// nodeJSON reads a node's node.json as a map.
func nodeJSON(t *testing.T, s *Server) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.BoundConfig().DataDir, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// stamped reports whether every replica of every group shard on these
// servers holds the stamp of level.
func stamped(servers []*Server, level release.Level) bool {
	for _, s := range servers {
		for _, sh := range s.Node().Shards() {
			if sh.FSM.(*fsm.ShardFSM).StampedLevel() != level {
				return false
			}
		}
	}
	return true
}

// A rolling upgrade: while one node runs the previous release, nothing is
// finalized, the new formats are not written, and a finalization by hand
// is refused naming that node; once it runs the new release, the cluster
// finalizes the new level by itself, stamps it into every group shard and
// records it in every node.json (version 4, which the previous release
// refuses).
func TestFeatureLevelFinalizedOnceEveryNodeRunsTheRelease(t *testing.T) {
	servers := StartTestCluster(t, 3, func(i int, c *Config) {
		if i == 2 {
			playReleaseOne(c)
		}
	})
	ctx := testCtx(t, 90*time.Second)

	time.Sleep(3 * time.Second) // three feature rounds
	for i, s := range servers {
		if l := s.Node().FinalizedLevel(); l != release.Level1 {
			t.Fatalf("node %d finalized %d with a node of the previous release in the cluster", i+1, l)
		}
		if v := nodeJSON(t, s)["version"]; v != float64(3) {
			t.Fatalf("node %d's node.json is version %v before anything was finalized, want 3 (the previous release's)", i+1, v)
		}
	}
	if !stamped(servers, release.Level1) {
		t.Fatal("a group shard was stamped before the level was finalized")
	}
	st, err := servers[0].Node().Features()
	if err != nil {
		t.Fatal(err)
	}
	if st.Finalizable != 1 || len(st.Nodes) != 3 || st.Nodes[2].Release != "" || st.Nodes[2].Supported[release.Feature].Max != 1 {
		t.Fatalf("features with node 3 behind: %+v", st)
	}
	if _, err := servers[1].Node().FinalizeFeature(ctx, release.Level2, 5*time.Second); !errors.Is(err, cluster.ErrFeatureUnsupported) {
		t.Fatalf("finalizing 2 by hand with node 3 behind: %v, want ErrFeatureUnsupported", err)
	}
	// A level-2 command is refused before Raft sees it.
	cmd, err := fsm.Encode(&fsm.FeatureLevelSet{Feature: release.Feature, Level: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range servers[0].Node().Shards() {
		if sh.IsLeader() {
			if _, err := sh.Apply(ctx, cmd, time.Second); !errors.Is(err, cluster.ErrFeatureNotFinalized) {
				t.Fatalf("a FeatureLevelSet written to shard %d before finalization: %v", sh.ID, err)
			}
			break
		}
	}

	if err := servers[2].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	servers[2] = RestartTestNodeWith(t, servers, 2, func(c *Config) {
		raft := c.Raft
		c.Raft = func(rc *cluster.Config) { raft(rc); rc.PlayApplyLevel = 0 }
	})
	waitFor(t, 30*time.Second, "every node to finalize the latest level and stamp every shard", func() bool {
		for _, s := range servers {
			if s.Node().FinalizedLevel() != release.MaxLevel {
				return false
			}
		}
		return stamped(servers, release.MaxLevel)
	})
	waitFor(t, 10*time.Second, "every node.json to record the latest level", func() bool {
		for _, s := range servers {
			m := nodeJSON(t, s)
			f, _ := m["features"].(map[string]any)
			if m["version"] != float64(4) || f[release.Feature] != float64(release.MaxLevel) {
				return false
			}
		}
		return true
	})
}

// With kcoord.features.auto.finalize=false the level waits for an
// operator, and a finalization by hand through any node takes effect on
// every node; a lower level is then refused, and the level stays.
func TestFeatureLevelFinalizedByHand(t *testing.T) {
	servers := StartTestCluster(t, 3, func(_ int, c *Config) { c.FeaturesAutoFinalize = false })
	ctx := testCtx(t, 60*time.Second)
	time.Sleep(2 * time.Second)
	if l := servers[0].Node().FinalizedLevel(); l != release.Level1 {
		t.Fatalf("finalized %d by itself with auto-finalize off", l)
	}
	leader := servers[0]
	for _, s := range servers {
		if s.Node().Shard(cluster.MetaShard).IsLeader() {
			leader = s
		}
	}
	var follower *Server
	for _, s := range servers {
		if s != leader {
			follower = s
			break
		}
	}
	got, err := follower.Node().FinalizeFeature(ctx, 0, 5*time.Second)
	if err != nil || got != release.MaxLevel {
		t.Fatalf("finalizing by hand through a follower: %d, %v", got, err)
	}
	waitFor(t, 20*time.Second, "every node to hold the latest level and every shard its stamp", func() bool {
		for _, s := range servers {
			if s.Node().FinalizedLevel() != release.MaxLevel {
				return false
			}
		}
		return stamped(servers, release.MaxLevel)
	})
	if got, err := follower.Node().FinalizeFeature(ctx, release.Level1, 5*time.Second); !errors.Is(err, fsm.ErrFeatureDowngrade) || got != release.MaxLevel {
		t.Fatalf("asking for level 1 after the latest: %d, %v; want ErrFeatureDowngrade, and the level stays", got, err)
	}
}

// A node whose replica learns of a finalized level its binary does not
// support (here written straight into the metadata group, as a newer
// release would) stops, saying why.
func TestANodeTooOldForTheFinalizedLevelStops(t *testing.T) {
	s := StartTestServer(t, TestConfig(t.TempDir()))
	ctx := testCtx(t, 30*time.Second)
	cmd, err := fsm.Encode(&fsm.FeatureLevelSet{Feature: release.Feature, Level: int16(release.MaxLevel + 1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Node().Shard(cluster.MetaShard).Apply(ctx, cmd, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Fatal():
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not stop on a level it does not support")
	}
	if err := s.FatalErr(); !errors.Is(err, cluster.ErrFeatureUnsupported) {
		t.Fatalf("FatalErr = %v", err)
	}
}

// Once the cluster finalized a level, a node whose binary does not support
// it (a node of the previous release started afterwards) is refused at
// gossip: it never becomes a member, so it is given no replica whose
// entries it could not apply.
func TestANodeTooOldForTheFinalizedLevelIsNotLetIn(t *testing.T) {
	servers := StartTestCluster(t, 3, nil)
	waitFor(t, 20*time.Second, "the cluster to finalize the latest level", func() bool {
		for _, s := range servers {
			if s.Node().FinalizedLevel() != release.MaxLevel {
				return false
			}
		}
		return true
	})
	cfg := TestClusterConfig(t.TempDir(), 3, 0)
	cfg.BootstrapExpect = 0
	for _, o := range servers {
		cfg.Join = append(cfg.Join, o.BoundConfig().GossipAddr)
	}
	playReleaseOne(&cfg)
	old, err := New(cfg, TestLogger(t).Named("node4"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Kill() })
	time.Sleep(5 * time.Second) // gossip probes every 200 ms, pushes and pulls every second
	for i, s := range servers {
		for _, b := range s.Node().Brokers() {
			if b.NodeID == 4 {
				t.Fatalf("node %d lets node 4 (release 0.1.0) in after the latest level was finalized", i+1)
			}
		}
	}
	st := servers[0].Node().Status(testCtx(t, 10*time.Second))
	for _, sh := range st.Shards {
		if slices.Contains(sh.Voters, 4) || slices.Contains(sh.Nonvoters, 4) {
			t.Fatalf("shard %d placed a replica on the too-old node 4: voters %v, non-voters %v", sh.Shard, sh.Voters, sh.Nonvoters)
		}
	}
}

// A node that is down holds a finalization back, whatever it gossiped
// before it went down (it may come back on the previous release); once
// finalized, asking again with a node down changes nothing and succeeds.
func TestADownNodeHoldsTheFinalizationBack(t *testing.T) {
	servers := StartTestCluster(t, 3, func(_ int, c *Config) { c.FeaturesAutoFinalize = false })
	ctx := testCtx(t, 90*time.Second)
	waitFor(t, 10*time.Second, "every node to know the others' support", func() bool {
		st, err := servers[0].Node().Features()
		return err == nil && st.Finalizable == int16(release.MaxLevel)
	})
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	// By both live nodes: the finalization runs on the metadata leader,
	// either of them, whose gossip may see the death later than the other.
	waitFor(t, 20*time.Second, "node 3 to be seen down", func() bool {
		for _, s := range servers[:2] {
			if _, err := s.Node().CheckFinalize(0); !errors.Is(err, cluster.ErrFeatureUnsupported) {
				return false
			}
		}
		return true
	})
	if _, err := servers[1].Node().FinalizeFeature(ctx, release.Level2, 5*time.Second); !errors.Is(err, cluster.ErrFeatureUnsupported) {
		t.Fatalf("finalizing with node 3 down: %v, want ErrFeatureUnsupported", err)
	}
	servers[2] = RestartTestNode(t, servers, 2)
	waitFor(t, 30*time.Second, "a finalization with node 3 back", func() bool {
		got, err := servers[0].Node().FinalizeFeature(ctx, 0, 5*time.Second)
		return err == nil && got == release.MaxLevel
	})
	if err := servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	for _, level := range []release.Level{0, release.MaxLevel} {
		if got, err := servers[0].Node().FinalizeFeature(ctx, level, 5*time.Second); err != nil || got != release.MaxLevel {
			t.Fatalf("finalizing %d again with node 2 down: %d, %v; want nothing to do", level, got, err)
		}
	}
}
