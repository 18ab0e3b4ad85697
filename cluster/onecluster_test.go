package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/internal/testkit"
)

// Invariant 8, "one cluster per data dir": bootstrap writes a cluster id,
// nodes refuse peers of another cluster, a node added with Join never
// bootstraps, and a node whose data dir was wiped does not vote under its
// old id.

// TestJoinOnlyNodeNeverBootstraps: a fourth node started with only seeds of
// a running three-node cluster joins it: it adopts the cluster's id, leads
// nothing and holds no replica, answers every shard's leader from gossip,
// and the cluster keeps exactly one leader per shard, one of the original
// three. Both as `kcoord serve --join` gives it (BootstrapExpect 0) and
// with an explicit BootstrapExpect 1, which joins the live cluster it finds
// rather than bootstrapping a cluster of its own.
func TestJoinOnlyNodeNeverBootstraps(t *testing.T) {
	nodes := startGossipCluster(t, 3, testShards)
	cid := nodes[0].ClusterID()
	if cid == "" {
		t.Fatal("bootstrapped cluster has no cluster id")
	}
	for _, tn := range nodes[1:] {
		if tn.ClusterID() != cid {
			t.Fatalf("node %d has cluster id %q, node 1 %q", tn.ID(), tn.ClusterID(), cid)
		}
	}
	before := shardLeaders(t, nodes, testShards)

	for i, tc := range []struct {
		name   string
		expect int
	}{
		{"join only, as kcoord serve --join gives it", 0},
		{"bootstrap-expect 1 with seeds of a live cluster", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gossipConfig(t, t.TempDir(), int32(4+i), testShards)
			cfg.BootstrapExpect = tc.expect
			cfg.Join = []string{nodes[1].GossipAddr()}
			joiner := startTestNode(t, cfg)
			if got := joiner.ClusterID(); got != cid {
				t.Fatalf("joiner's cluster id %q, want the cluster's %q", got, cid)
			}
			waitReady(t, joiner.Node, 10*time.Second)
			for _, id := range allShardIDs(testShards) {
				s := joiner.Shard(id)
				if s.IsLeader() || s.bootstrapped || s.replicated() || s.Raft.LastIndex() != 0 {
					t.Errorf("shard %d on the joiner: leader %v, bootstrapped %v, replica %v, last index %d; want none",
						id, s.IsLeader(), s.bootstrapped, s.replicated(), s.Raft.LastIndex())
				}
				b, ok := joiner.LeaderOf(id)
				if !ok || b.NodeID != before[id].Node {
					t.Errorf("joiner: LeaderOf(%d) = %+v, %v; want node %d", id, b, ok, before[id].Node)
				}
			}
			if after := shardLeaders(t, append(slices.Clone(nodes), joiner), testShards); !mapsEqualLeaders(after, before) {
				t.Errorf("leaders changed: %v, were %v", after, before)
			}
			for _, tn := range nodes {
				eventually(t, 5*time.Second, fmt.Sprintf("node %d sees the joiner", tn.ID()), func() bool {
					return slices.Contains(brokerIDs(tn.Node), joiner.ID())
				})
			}
			b, _ := os.ReadFile(filepath.Join(cfg.DataDir, identityFile))
			if !strings.Contains(string(b), cid) {
				t.Errorf("joiner's node.json does not record the cluster id:\n%s", b)
			}
			joiner.Leave(time.Second)
			if err := joiner.Shutdown(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mapsEqualLeaders(a, b map[int32]leaderEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !b[k].equal(v) {
			return false
		}
	}
	return true
}

// TestNodeOfAnotherClusterIsRefused: a node whose data dir belongs to
// another cluster, started with this cluster's seeds, is refused in gossip
// (by both sides, each logging both ids once) and on Raft connections, and
// the cluster's membership and leaders are unaffected.
func TestNodeOfAnotherClusterIsRefused(t *testing.T) {
	nodes := startGossipCluster(t, 3, testShards)
	cid := nodes[0].ClusterID()
	before := shardLeaders(t, nodes, testShards)

	// A node bootstrapped alone, in a cluster of its own.
	ocfg := gossipConfig(t, t.TempDir(), 9, testShards)
	ocfg.BootstrapExpect = 1
	otherLogs := capture(t, &ocfg)
	other := startTestNode(t, ocfg)
	waitReady(t, other.Node, 5*time.Second)
	otherID := other.ClusterID()
	if otherID == "" || otherID == cid {
		t.Fatalf("the other node's cluster id %q (cluster's %q)", otherID, cid)
	}
	if err := other.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// Restarted with the cluster's seeds: it stays in its own cluster.
	ocfg.Join = []string{nodes[0].GossipAddr(), nodes[1].GossipAddr()}
	other = startTestNode(t, ocfg)
	waitReady(t, other.Node, 5*time.Second)

	eventually(t, 10*time.Second, "the cluster logs the refusal", func() bool {
		return len(nodes[0].logs.Lines("refusing gossip peer of another cluster", otherID, cid)) > 0
	})
	eventually(t, 10*time.Second, "the other node logs the refusal", func() bool {
		return len(otherLogs.Lines("refusing gossip peer of another cluster", otherID, cid)) > 0
	})
	// Several push/pull rounds later nobody let the other in.
	time.Sleep(3 * ocfg.GossipPushPullInterval)
	for _, tn := range nodes {
		if got := brokerIDs(tn.Node); !slices.Equal(got, []int32{1, 2, 3}) {
			t.Errorf("node %d: Brokers %v, want [1 2 3]", tn.ID(), got)
		}
		if got := len(tn.logs.Lines("refusing gossip peer of another cluster", "peer_name=kcoord-9 ")); got > 1 {
			t.Errorf("node %d logged the refusal %d times, want once", tn.ID(), got)
		}
	}
	if got := brokerIDs(other.Node); !slices.Equal(got, []int32{9}) {
		t.Errorf("other node: Brokers %v, want [9]", got)
	}
	if other.ClusterID() != otherID {
		t.Errorf("other node's cluster id changed to %q", other.ClusterID())
	}

	// Raft: a connection naming the other cluster is dropped on accept.
	m, err := raftnet.ListenMux("127.0.0.1:0", "", testLogger(t).Named("mux"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	m.SetClusterID(otherID)
	l, err := m.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Dial(raft.ServerAddress(nodes[0].RaftAddr()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	testkit.ExpectClosed(t, c)
	eventually(t, 5*time.Second, "the raft refusal is logged", func() bool {
		return len(nodes[0].logs.Lines("refusing raft connections from a node of another cluster", otherID, cid)) == 1
	})

	if after := shardLeaders(t, nodes, testShards); !mapsEqualLeaders(after, before) {
		t.Errorf("leaders changed: %v, were %v", after, before)
	}
	for _, tn := range nodes {
		if tn.ClusterID() != cid {
			t.Errorf("node %d's cluster id changed to %q", tn.ID(), tn.ClusterID())
		}
	}
}

// TestWipedVoterRefusesToStart: a voter whose data dir was wiped, started
// again under its old id with the cluster's seeds, refuses to start before
// its Raft can vote, and says how to fix it.
func TestWipedVoterRefusesToStart(t *testing.T) {
	nodes := startGossipCluster(t, 3, testShards)
	cfg3 := nodes[2].cfg
	gossipAddr, raftAddr := nodes[2].GossipAddr(), nodes[2].RaftAddr()
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, expect := range []int{3, 0} {
		c := withFSMs(cfg3)
		c.DataDir = t.TempDir() // wiped
		c.GossipAddr, c.RaftAddr = gossipAddr, raftAddr
		c.Join = []string{nodes[0].GossipAddr()}
		c.BootstrapExpect = expect
		n, err := NewNode(c)
		if err == nil {
			_ = n.Shutdown()
			t.Fatalf("bootstrap-expect %d: a wiped voter started", expect)
		}
		if !errors.Is(err, ErrEmptyDataDirVoter) {
			t.Fatalf("bootstrap-expect %d: NewNode = %v, want ErrEmptyDataDirVoter", expect, err)
		}
		for _, want := range []string{nodes[0].ClusterID(), "restore this node's data dir", "new --node-id", "removed from the shards' configurations", "replica removal is a later issue"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if _, err := os.Stat(filepath.Join(c.DataDir, identityFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused start initialised the data dir: %v", err)
		}
	}
}

// TestWipedVoterWithoutSeedsNeverVotes: a wiped voter whose seeds do not
// answer starts after JoinTimeout, but its Raft accepts none of the
// cluster's traffic (no vote, no entry) even on its old Raft address; when
// gossip later shows it is a voter there, it logs the fix and still adopts
// nothing, also after a restart.
func TestWipedVoterWithoutSeedsNeverVotes(t *testing.T) {
	nodes := startGossipCluster(t, 3, testShards)
	cid := nodes[0].ClusterID()
	cfg3 := nodes[2].cfg
	gossipAddr, raftAddr := nodes[2].GossipAddr(), nodes[2].RaftAddr()
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()

	c := cfg3
	c.DataDir = t.TempDir() // wiped
	c.GossipAddr, c.RaftAddr = gossipAddr, raftAddr
	c.Join = []string{deadAddr}
	c.JoinTimeout = 300 * time.Millisecond
	logs := capture(t, &c)
	wiped := startTestNode(t, c)
	// The survivors keep sending it heartbeats and votes at its old address.
	eventually(t, 5*time.Second, "the wiped node refuses the cluster's raft traffic", func() bool {
		return len(logs.Lines("refusing raft connections: this node has not confirmed", cid)) > 0
	})
	// Gossip reaches it later: it learns it is a voter there.
	if _, err := nodes[0].gossip.ml.Join([]string{wiped.GossipAddr()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the wiped node logs the fix", func() bool {
		return len(logs.Lines("replica removal is a later issue")) == 1
	})
	time.Sleep(time.Second)
	for _, id := range allShardIDs(testShards) {
		s := wiped.Shard(id)
		if s.Raft.CurrentTerm() != 0 || s.Raft.LastIndex() != 0 {
			t.Errorf("shard %d: the wiped node took term %d, last index %d; want 0, 0", id, s.Raft.CurrentTerm(), s.Raft.LastIndex())
		}
	}
	if wiped.ClusterID() != "" {
		t.Errorf("the wiped node adopted cluster id %q", wiped.ClusterID())
	}
	if len(logs.Lines("replica removal is a later issue")) != 1 {
		t.Errorf("the fix was logged %d times, want once", len(logs.Lines("replica removal is a later issue")))
	}
	if err := wiped.Shutdown(); err != nil {
		t.Fatal(err)
	}
	id, ok, err := readIdentity(c.DataDir)
	// It records a proposal of its own, which is not the one the cluster
	// bootstrapped with: it cannot pass for a node that took part.
	if err != nil || !ok || !id.AwaitingPeers || id.ClusterID != "" || id.Proposal == "" || id.Agreement != "" {
		t.Fatalf("node.json after the unconfirmed start: %+v, %v, %v; want awaiting peers, a proposal, no cluster id, no agreement", id, ok, err)
	}

	// Restarted with seeds that answer: still refused, still no vote.
	c.Join = []string{nodes[0].GossipAddr()}
	logs2 := capture(t, &c)
	again := startTestNode(t, c)
	eventually(t, 5*time.Second, "the restarted wiped node logs the fix", func() bool {
		return len(logs2.Lines("replica removal is a later issue")) == 1
	})
	time.Sleep(time.Second)
	for _, id := range allShardIDs(testShards) {
		if s := again.Shard(id); s.Raft.CurrentTerm() != 0 || s.Raft.LastIndex() != 0 {
			t.Errorf("shard %d after restart: term %d, last index %d; want 0, 0", id, s.Raft.CurrentTerm(), s.Raft.LastIndex())
		}
	}
	if again.ClusterID() != "" {
		t.Errorf("the restarted wiped node adopted cluster id %q", again.ClusterID())
	}
}

// startConcurrently starts cfgs' nodes at once, as processes started
// together would, and returns them in order.
func startConcurrently(t *testing.T, cfgs []Config) []*testNode {
	t.Helper()
	out := make([]*testNode, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i := range cfgs {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("%v", r)
				}
			}()
			tn := &testNode{fsms: map[int32]*kvFSM{}, lead: &leadershipLog{}}
			var mu sync.Mutex
			c := cfgs[i]
			c.NewShardFSM = func(shard int32) raft.FSM {
				f := newKVFSM()
				mu.Lock()
				tn.fsms[shard] = f
				mu.Unlock()
				return f
			}
			c.NewMetaFSM = func() raft.FSM { return newKVFSM() }
			n, err := NewNode(c)
			if err != nil {
				errs[i] = err
				return
			}
			tn.Node, tn.cfg = n, c
			out[i] = tn
		})
	}
	wg.Wait()
	for _, tn := range out {
		if tn != nil {
			t.Cleanup(func() { _ = tn.Shutdown() })
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// noneBootstrapped fails the test if any node holds Raft state or a
// cluster id.
func noneBootstrapped(t *testing.T, nodes []*testNode) {
	t.Helper()
	for _, tn := range nodes {
		if tn.ClusterID() != "" {
			t.Errorf("node %d has cluster id %q", tn.ID(), tn.ClusterID())
		}
		for _, id := range allShardIDs(testShards) {
			s := tn.Shard(id)
			if conf := s.Raft.GetConfiguration().Configuration(); len(conf.Servers) > 0 || s.Raft.LastIndex() != 0 {
				t.Errorf("node %d shard %d was bootstrapped: configuration %v", tn.ID(), id, conf.Servers)
			}
		}
	}
}

// TestBootstrapWithMoreNodesThanExpectedBootstrapsNothing: four nodes
// started at once, all with BootstrapExpect 3, bootstrap nothing (no shard
// gets a second configuration) and each logs the error once; when the
// extra node leaves, the three bootstrap one cluster.
func TestBootstrapWithMoreNodesThanExpectedBootstrapsNothing(t *testing.T) {
	first := gossipConfig(t, t.TempDir(), 1, testShards)
	first.BootstrapExpect = 3
	logs := map[int32]*logCapture{1: capture(t, &first)}
	seed := startConcurrently(t, []Config{first})[0]
	var cfgs []Config
	for id := int32(2); id <= 4; id++ {
		c := gossipConfig(t, t.TempDir(), id, testShards)
		c.BootstrapExpect = 3
		c.Join = []string{seed.GossipAddr()}
		logs[id] = capture(t, &c)
		cfgs = append(cfgs, c)
	}
	nodes := append([]*testNode{seed}, startConcurrently(t, cfgs)...)

	const problem = "more than the 3 of --bootstrap-expect"
	for _, tn := range nodes {
		eventually(t, 10*time.Second, fmt.Sprintf("node %d logs the error", tn.ID()), func() bool {
			return len(logs[tn.ID()].Lines(problem)) > 0
		})
	}
	time.Sleep(4 * bootstrapSettle)
	noneBootstrapped(t, nodes)
	for _, tn := range nodes {
		if got := len(logs[tn.ID()].Lines(problem)); got != 1 {
			t.Errorf("node %d logged the error %d times, want once", tn.ID(), got)
		}
	}

	// The extra node leaves: the expected three bootstrap one cluster.
	nodes[3].Leave(time.Second)
	if err := nodes[3].Shutdown(); err != nil {
		t.Fatal(err)
	}
	three := nodes[:3]
	for _, tn := range three {
		waitReady(t, tn.Node, 20*time.Second)
	}
	waitShardLeaders(t, three, testShards)
	cid := three[0].ClusterID()
	for _, tn := range three {
		if tn.ClusterID() != cid || cid == "" {
			t.Errorf("node %d: cluster id %q, node 1 %q", tn.ID(), tn.ClusterID(), cid)
		}
		for _, id := range allShardIDs(testShards) {
			if got := shardVoters(tn.Shard(id)); !slices.Equal(got, []int32{1, 2, 3}) {
				t.Errorf("node %d shard %d: voters %v, want [1 2 3]", tn.ID(), id, got)
			}
		}
	}
}

// TestMismatchedViewsNeverBootstrapTwoConfigurations: three nodes expecting
// two, where nodes 1 and 3 cannot see each other (node 2 sees both), see
// different two-node views; none bootstraps, rather than 1 bootstrapping
// {1,2} and 3 bootstrapping {2,3} with node 2 in both.
func TestMismatchedViewsNeverBootstrapTwoConfigurations(t *testing.T) {
	c2 := gossipConfig(t, t.TempDir(), 2, testShards)
	c2.BootstrapExpect = 2
	logs2 := capture(t, &c2)
	middle := startConcurrently(t, []Config{c2})[0]
	c1 := gossipConfig(t, t.TempDir(), 1, testShards)
	c3 := gossipConfig(t, t.TempDir(), 3, testShards)
	c1.BootstrapExpect, c3.BootstrapExpect = 2, 2
	c1.Join, c3.Join = []string{middle.GossipAddr()}, []string{middle.GossipAddr()}
	c1.hiddenPeers, c3.hiddenPeers = []int32{3}, []int32{1}
	ends := startConcurrently(t, []Config{c1, c3})
	nodes := []*testNode{ends[0], middle, ends[1]}

	eventually(t, 10*time.Second, "views settle", func() bool {
		return slices.Equal(brokerIDs(ends[0].Node), []int32{1, 2}) &&
			slices.Equal(brokerIDs(middle.Node), []int32{1, 2, 3}) &&
			slices.Equal(brokerIDs(ends[1].Node), []int32{2, 3})
	})
	eventually(t, 10*time.Second, "node 2 logs the error", func() bool {
		return len(logs2.Lines("more than the 2 of --bootstrap-expect")) == 1
	})
	time.Sleep(4 * bootstrapSettle)
	noneBootstrapped(t, nodes)
}

// TestBootstrapActsOnlyOnASharedView checks the bootstrap rule on gossip
// metas directly.
func TestBootstrapActsOnlyOnASharedView(t *testing.T) {
	m := func(id int32, expect int, view ...int32) nodeMeta {
		return nodeMeta{Version: metaVersion, ID: id, Raft: "r", Expect: expect, Proposal: fmt.Sprintf("p%d", id), View: view}
	}
	stateful := func(nm nodeMeta, cid string) nodeMeta { nm.HasState, nm.ClusterID = true, cid; return nm }
	three := []nodeMeta{m(1, 3, 1, 2, 3), m(2, 3, 1, 2, 3), m(3, 3, 1, 2, 3)}
	bootstrapped := stateful(m(1, 3, 1, 2, 3), "p1")
	bootstrapped.Agreement = agreementDigest(three)
	wiped := m(3, 3, 1, 2, 3)
	wiped.Proposal = "p3 after the wipe"
	joinOnly := nodeMeta{Version: metaVersion, ID: 9, Raft: "r"}
	v1 := nodeMeta{ID: 3, Raft: "r", Expect: 3} // a first-release node
	cases := []struct {
		name    string
		metas   []nodeMeta
		want    bootKind
		problem string
	}{
		{"all three share the view", []nodeMeta{m(2, 3, 1, 2, 3), m(1, 3, 1, 2, 3), m(3, 3, 1, 2, 3)}, bootGo, ""},
		{"a join-only node does not count", []nodeMeta{m(1, 3, 1, 2, 3), m(2, 3, 1, 2, 3), m(3, 3, 1, 2, 3), joinOnly}, bootGo, ""},
		{"too few", []nodeMeta{m(1, 3, 1, 2), m(2, 3, 1, 2)}, bootWait, ""},
		{"a view still converging", []nodeMeta{m(1, 3, 1, 2, 3), m(2, 3, 1, 2), m(3, 3, 1, 2, 3)}, bootWait, ""},
		{"no proposal yet", []nodeMeta{m(1, 3, 1, 2, 3), m(2, 3, 1, 2, 3), {Version: metaVersion, ID: 3, Raft: "r", Expect: 3, View: []int32{1, 2, 3}}}, bootWait, ""},
		{"more nodes than expected", []nodeMeta{m(1, 3, 1, 2, 3, 4), m(2, 3, 1, 2, 3, 4), m(3, 3, 1, 2, 3, 4), m(4, 3, 1, 2, 3, 4)}, bootWait, "more than the 3"},
		{"another expectation", []nodeMeta{m(1, 3, 1, 2, 3), m(2, 3, 1, 2, 3), m(3, 2, 1, 2, 3)}, bootWait, "expects 2"},
		{"a first-release node", []nodeMeta{m(1, 3, 1, 2, 3), m(2, 3, 1, 2, 3), v1}, bootWait, ""},
		{"a peer bootstrapped this agreement", []nodeMeta{bootstrapped, m(2, 3, 1, 2, 3), m(3, 3, 1, 2, 3)}, bootGo, ""},
		{"a peer bootstrapped with a wiped node's old proposal", []nodeMeta{bootstrapped, m(2, 3, 1, 2, 3), wiped}, bootStop, ""},
		{"a peer holds state without an agreement", []nodeMeta{stateful(m(1, 3, 1, 2, 3), "p1"), m(2, 3, 1, 2, 3), m(3, 3, 1, 2, 3)}, bootStop, ""},
		{"a peer bootstrapped another view", []nodeMeta{stateful(m(1, 3, 1, 2, 3), "p1"), m(2, 3, 1, 2, 3, 4), m(3, 3, 1, 2, 3, 4), m(4, 3, 1, 2, 3, 4)}, bootStop, ""},
		{"a peer holds state under another id", []nodeMeta{stateful(m(1, 3, 1, 2, 3), "x"), m(2, 3, 1, 2, 3), m(3, 3, 1, 2, 3)}, bootStop, ""},
		{"a live cluster", []nodeMeta{m(4, 3), stateful(nodeMeta{Version: metaVersion, ID: 1, Raft: "r"}, "x")}, bootStop, ""},
	}
	for _, c := range cases {
		d := decideBootstrap(3, c.metas)
		if d.kind != c.want || !strings.Contains(d.problem, c.problem) || (c.problem == "" && d.problem != "") {
			t.Errorf("%s: %+v, want kind %d, problem %q", c.name, d, c.want, c.problem)
			continue
		}
		if d.kind == bootGo && (!slices.Equal(d.ids, []int32{1, 2, 3}) || d.clusterID != "p1") {
			t.Errorf("%s: bootstraps %v under %q, want [1 2 3] under p1 (node 1's proposal)", c.name, d.ids, d.clusterID)
		}
	}
	// Nodes that see different views never bootstrap different sets: each
	// node decides on its own view, and none of the views is shared.
	views := map[int32][]nodeMeta{
		1: {m(1, 2, 1, 2), m(2, 2, 1, 2, 3)},
		2: {m(1, 2, 1, 2), m(2, 2, 1, 2, 3), m(3, 2, 2, 3)},
		3: {m(2, 2, 1, 2, 3), m(3, 2, 2, 3)},
	}
	for id, metas := range views {
		if d := decideBootstrap(2, metas); d.kind == bootGo {
			t.Errorf("node %d bootstraps %v on a view not everyone shares", id, d.ids)
		}
	}
}

// TestSingleNodeWithNoFlagsIsReady: `kcoord serve` with no flags (one node,
// BootstrapExpect 1, gossip on its default loopback address, no seeds) is
// ready at once under a new cluster id that node.json keeps across
// restarts.
func TestSingleNodeWithNoFlagsIsReady(t *testing.T) {
	for _, withGossip := range []bool{true, false} {
		t.Run(fmt.Sprintf("gossip=%v", withGossip), func(t *testing.T) {
			cfg := testConfig(t, t.TempDir(), 1, testShards)
			if withGossip {
				cfg.GossipAddr = "127.0.0.1:0"
			}
			tn := startTestNode(t, cfg)
			if d := waitReady(t, tn.Node, 5*time.Second); d > 2*time.Second {
				t.Errorf("ready after %v", d)
			}
			cid := tn.ClusterID()
			if len(cid) != 36 {
				t.Fatalf("cluster id %q, want a UUID", cid)
			}
			id, ok, err := readIdentity(cfg.DataDir)
			if err != nil || !ok || id.Version != identityVersion || id.ClusterID != cid || id.AwaitingPeers {
				t.Fatalf("node.json: %+v, %v, %v", id, ok, err)
			}
			if err := tn.Shutdown(); err != nil {
				t.Fatal(err)
			}
			again := startTestNode(t, cfg)
			waitReady(t, again.Node, 5*time.Second)
			if again.ClusterID() != cid {
				t.Errorf("cluster id after restart %q, want %q", again.ClusterID(), cid)
			}
		})
	}
}

// TestNodeJSONVersion1Loads: a data dir of the release before cluster ids
// (node.json version 1, no cluster_id) still starts; a single-voter node
// mints its cluster id and node.json becomes the current version.
func TestNodeJSONVersion1Loads(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), 1, testShards)
	cfg.LogStore = LogStoreShard
	runAndSetK(t, cfg)
	v1 := `{"version": 1, "node_id": 1, "shards": 4}` + "\n" // as the first release wrote it
	if err := os.WriteFile(filepath.Join(cfg.DataDir, identityFile), []byte(v1), 0o640); err != nil {
		t.Fatal(err)
	}
	again := restartSeesK(t, cfg)
	cid := again.ClusterID()
	if cid == "" {
		t.Fatal("no cluster id minted for a single-voter cluster")
	}
	b, _ := os.ReadFile(filepath.Join(cfg.DataDir, identityFile))
	var id identity
	if err := json.Unmarshal(b, &id); err != nil || id.Version != identityVersion || id.ClusterID != cid || id.LogStore != "" {
		t.Errorf("node.json after the upgrade: %s (%v)", b, err)
	}
}

// TestAdoptClusterID: an id learned elsewhere (the metadata FSM's stamp) is
// recorded once; another id is refused with ErrClusterIDMismatch.
func TestAdoptClusterID(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), 1, 1)
	cfg.BootstrapExpect = 0
	tn := startTestNode(t, cfg)
	if tn.ClusterID() != "" {
		t.Fatalf("a node that never bootstrapped has cluster id %q", tn.ClusterID())
	}
	if err := tn.AdoptClusterID(""); err == nil {
		t.Error("AdoptClusterID(\"\") accepted")
	}
	const a, b = "6f1d2c1e-0000-4000-8000-000000000001", "6f1d2c1e-0000-4000-8000-000000000002"
	if err := tn.AdoptClusterID(a); err != nil {
		t.Fatal(err)
	}
	if err := tn.AdoptClusterID(a); err != nil {
		t.Errorf("adopting the same id again: %v", err)
	}
	if err := tn.AdoptClusterID(b); !errors.Is(err, ErrClusterIDMismatch) {
		t.Errorf("adopting another id: %v, want ErrClusterIDMismatch", err)
	}
	if tn.ClusterID() != a || tn.mux.ClusterID() != a {
		t.Errorf("cluster id %q (mux %q), want %q", tn.ClusterID(), tn.mux.ClusterID(), a)
	}
	if err := tn.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := tn.AdoptClusterID(a); !errors.Is(err, ErrShutdown) {
		t.Errorf("after Shutdown: %v", err)
	}
	again := startTestNode(t, cfg)
	if again.ClusterID() != a {
		t.Errorf("after restart: %q, want %q", again.ClusterID(), a)
	}
	if err := again.AdoptClusterID(b); !errors.Is(err, ErrClusterIDMismatch) {
		t.Errorf("after restart, another id: %v", err)
	}
}

// TestNodeJSONBecomesVersion3BeforeTheNodeStoreChanges: a version-2 data
// dir's node store was a bolt file, which a start imports into the
// write-ahead log and removes. The start first rewrites node.json as
// version 3, which a kcoord that knows only version 2 refuses: started on
// the data dir, it would make a new, empty raft.db and forget every
// shard's term and vote.
func TestNodeJSONBecomesVersion3BeforeTheNodeStoreChanges(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), 1, testShards)
	cfg.LogStore = LogStoreNode
	runAndSetK(t, cfg)
	path := filepath.Join(cfg.DataDir, identityFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil || id.Version != 3 || id.LogStore != LogStoreNode {
		t.Fatalf("node.json of a new data dir: %s (%v)", b, err)
	}
	id.Version = 2
	if err := writeIdentityVersion(path, id); err != nil {
		t.Fatal(err)
	}
	restartSeesK(t, cfg)
	b, _ = os.ReadFile(path)
	if err := json.Unmarshal(b, &id); err != nil || id.Version != 3 {
		t.Fatalf("node.json after a start on version 2: %s (%v)", b, err)
	}
}

// runAndSetK starts a single node on cfg, sets k to v on shard 0 and shuts
// it down, leaving a data dir to restart on.
func runAndSetK(t *testing.T, cfg Config) {
	t.Helper()
	tn := startTestNode(t, cfg)
	waitReady(t, tn.Node, 5*time.Second)
	if _, err := tn.Shard(0).Apply(context.Background(), []byte("set k v"), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := tn.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// restartSeesK starts the node of runAndSetK again and waits until its
// log is applied: once the new term commits its first entry, a moment
// after the election.
func restartSeesK(t *testing.T, cfg Config) *testNode {
	t.Helper()
	again := startTestNode(t, cfg)
	waitReady(t, again.Node, 5*time.Second)
	eventually(t, 5*time.Second, "the restarted log applied", func() bool {
		v, _ := again.fsm(0).get("k")
		return v == "v"
	})
	return again
}

// writeIdentityVersion writes id as node.json with the version it holds
// (writeIdentity always writes the current one).
func writeIdentityVersion(path string, id identity) error {
	b, err := json.Marshal(id)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o640)
}
