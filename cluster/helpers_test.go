package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/internal/testkit"
)

// testLogger returns a logger writing to t.Log (testkit.Logger).
func testLogger(t testing.TB) hclog.Logger { return testkit.Logger(t) }

// kvFSM is a test FSM: commands are "set <key> <value>" (response: the
// previous value) and "fail <message>" (response: an error).
type kvFSM struct {
	mu       sync.Mutex
	data     map[string]string
	applied  int
	restores int
}

func newKVFSM() *kvFSM { return &kvFSM{data: map[string]string{}} }

func (f *kvFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied++
	op, rest, _ := strings.Cut(string(l.Data), " ")
	switch op {
	case "set":
		k, v, _ := strings.Cut(rest, " ")
		prev := f.data[k]
		f.data[k] = v
		return prev
	case "fail":
		return errors.New(rest)
	}
	return fmt.Errorf("unknown command %q", l.Data)
}

func (f *kvFSM) get(k string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.data[k]
	return v, ok
}

func (f *kvFSM) snapshotData() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.data)
}

func (f *kvFSM) restoreCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restores
}

func (f *kvFSM) Snapshot() (raft.FSMSnapshot, error) {
	return kvSnapshot(f.snapshotData()), nil
}

func (f *kvFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data := map[string]string{}
	if err := json.NewDecoder(rc).Decode(&data); err != nil {
		return err
	}
	f.mu.Lock()
	f.data = data
	f.restores++
	f.mu.Unlock()
	return nil
}

type kvSnapshot map[string]string

func (s kvSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(map[string]string(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s kvSnapshot) Release() {}

// leadershipLog records OnLeadership calls.
type leadershipLog struct {
	mu     sync.Mutex
	events map[int32][]bool
}

func (l *leadershipLog) record(shard int32, isLeader bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.events == nil {
		l.events = map[int32][]bool{}
	}
	l.events[shard] = append(l.events[shard], isLeader)
}

func (l *leadershipLog) get(shard int32) []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.events[shard]...)
}

// testNode is a Node with its FSMs and leadership log.
type testNode struct {
	*Node
	cfg  Config
	fsms map[int32]*kvFSM
	lead *leadershipLog
	logs *logCapture // set by helpers that capture the node's log
}

func (tn *testNode) fsm(shard int32) *kvFSM { return tn.fsms[shard] }

// testConfig is a small, fast node config in dir.
func testConfig(t testing.TB, dir string, nodeID int32, shards int32) Config {
	cfg := DefaultConfig()
	cfg.NodeID = nodeID
	cfg.DataDir = dir
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.KafkaAddr = fmt.Sprintf("127.0.0.1:%d", 19000+nodeID)
	cfg.Shards = shards
	cfg.Logger = testLogger(t).With("node", nodeID)
	return cfg
}

// startTestNode starts a node with kvFSMs; it is shut down at cleanup.
func startTestNode(t testing.TB, cfg Config) *testNode {
	t.Helper()
	tn := &testNode{fsms: map[int32]*kvFSM{}, lead: &leadershipLog{}}
	var mu sync.Mutex
	cfg.NewShardFSM = func(shard int32) raft.FSM {
		f := newKVFSM()
		mu.Lock()
		tn.fsms[shard] = f
		mu.Unlock()
		return f
	}
	if cfg.NewMetaFSM == nil { // placement tests bring fsm.MetaFSM
		cfg.NewMetaFSM = func() raft.FSM {
			f := newKVFSM()
			mu.Lock()
			tn.fsms[MetaShard] = f
			mu.Unlock()
			return f
		}
	}
	cfg.OnLeadership = tn.lead.record
	n, err := NewNode(cfg)
	if err != nil {
		t.Fatalf("NewNode: %v", err)
	}
	tn.Node, tn.cfg = n, cfg
	t.Cleanup(func() { _ = n.Shutdown() })
	return tn
}

// eventually polls cond every 10ms until it holds or d passes
// (testkit.Eventually).
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, d, what, cond)
}

// logCapture keeps what a logger wrote, for tests that check log lines.
type logCapture = testkit.LogCapture

// capture makes cfg's logger write to a logCapture as well as to t.Log.
func capture(t testing.TB, cfg *Config) *logCapture {
	logger, c := testkit.Capture(t)
	cfg.Logger = logger.With("node", cfg.NodeID)
	return c
}

// gossipConfig is testConfig for a node that finds its peers through gossip
// on loopback, with short Raft and gossip timings. Leadership balance is off
// (an hour), so leaders stay where elections put them.
func gossipConfig(t testing.TB, dir string, nodeID int32, shards int32) Config {
	cfg := testConfig(t, dir, nodeID, shards)
	cfg.GossipAddr = "127.0.0.1:0"
	cfg.HeartbeatTimeout = 200 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.CommitTimeout, cfg.GroupCommitTimeout = 10*time.Millisecond, 10*time.Millisecond
	cfg.TransportTimeout = 2 * time.Second
	cfg.GossipProbeInterval = 200 * time.Millisecond
	cfg.GossipPushPullInterval = time.Second
	cfg.BalanceInterval = time.Hour
	cfg.JoinTimeout = 5 * time.Second
	return cfg
}

// startGossipCluster starts n nodes (ids 1..n) that bootstrap together
// through gossip with BootstrapExpect n, the way `kcoord serve
// --bootstrap-expect n` does: node 1 first, the others joining it. It waits
// until all are ready and every shard has a leader.
func startGossipCluster(t *testing.T, n int, shards int32, mutate ...func(*Config)) []*testNode {
	t.Helper()
	nodes := make([]*testNode, n)
	for i := range nodes {
		cfg := gossipConfig(t, t.TempDir(), int32(i+1), shards)
		cfg.BootstrapExpect = n
		if i > 0 {
			cfg.Join = []string{nodes[0].GossipAddr()}
		}
		for _, m := range mutate {
			m(&cfg)
		}
		logs := capture(t, &cfg)
		nodes[i] = startTestNode(t, cfg)
		nodes[i].logs = logs
	}
	for _, tn := range nodes {
		waitReady(t, tn.Node, 20*time.Second)
		eventually(t, 5*time.Second, fmt.Sprintf("node %d records the cluster id", tn.ID()), func() bool {
			return tn.ClusterID() != "" && tn.ClusterID() == nodes[0].ClusterID()
		})
	}
	return nodes
}

// shardLeaders returns, for every shard (MetaShard included), the one node
// among nodes that leads it and its term; it fails the test when a shard
// has no leader or more than one.
func shardLeaders(t *testing.T, nodes []*testNode, shards int32) map[int32]leaderEntry {
	t.Helper()
	out := map[int32]leaderEntry{}
	for _, id := range allShardIDs(shards) {
		var leaders []int32
		for _, tn := range nodes {
			if tn.Shard(id).IsLeader() {
				leaders = append(leaders, tn.ID())
				out[id] = leaderEntry{Node: tn.ID(), Term: tn.Shard(id).Term()}
			}
		}
		if len(leaders) != 1 {
			t.Fatalf("shard %d: leaders %v, want exactly one", id, leaders)
		}
	}
	return out
}

// waitShardLeaders waits until every shard has exactly one leader among
// nodes, and returns them.
func waitShardLeaders(t *testing.T, nodes []*testNode, shards int32) map[int32]leaderEntry {
	t.Helper()
	eventually(t, 10*time.Second, "one leader per shard", func() bool {
		for _, id := range allShardIDs(shards) {
			count := 0
			for _, tn := range nodes {
				if tn.Shard(id).IsLeader() {
					count++
				}
			}
			if count != 1 {
				return false
			}
		}
		return true
	})
	return shardLeaders(t, nodes, shards)
}

// brokerIDs is the node ids of a node's Brokers.
func brokerIDs(n *Node) []int32 {
	var ids []int32
	for _, b := range n.Brokers() {
		ids = append(ids, b.NodeID)
	}
	return ids
}

// withFSMs sets kvFSM constructors on cfg (for NewNode called directly).
func withFSMs(cfg Config) Config {
	cfg.NewShardFSM = func(int32) raft.FSM { return newKVFSM() }
	cfg.NewMetaFSM = func() raft.FSM { return newKVFSM() }
	return cfg
}
