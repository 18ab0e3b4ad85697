package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/cluster/raftnet"
)

const testShards = 4

func allShardIDs(n int32) []int32 {
	ids := []int32{MetaShard}
	for i := range n {
		ids = append(ids, i)
	}
	return ids
}

func waitReady(t testing.TB, n *Node, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	return time.Since(start)
}

func TestNodeSingle(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), 7, testShards)
	start := time.Now()
	tn := startTestNode(t, cfg)
	// Default (LAN) timings: the election nudge makes a single node ready at
	// once instead of after 1-2 heartbeat timeouts of 1s.
	waitReady(t, tn.Node, 5*time.Second)
	t.Logf("single node with %d shards ready in %v", testShards, time.Since(start))
	if !tn.Ready() {
		t.Fatal("Ready() false after WaitReady")
	}

	self := Broker{NodeID: 7, KafkaAddr: cfg.KafkaAddr}
	if got := tn.Self(); got != self {
		t.Errorf("Self() = %+v", got)
	}
	if got := tn.Brokers(); !slices.Equal(got, []Broker{self}) {
		t.Errorf("Brokers() = %+v, want [%+v]", got, self)
	}
	if got := len(tn.Shards()); got != testShards {
		t.Fatalf("len(Shards()) = %d", got)
	}
	for i, s := range tn.Shards() {
		if s.ID != int32(i) || tn.Shard(int32(i)) != s {
			t.Errorf("Shards()[%d].ID = %d", i, s.ID)
		}
	}
	if tn.Shard(MetaShard) == nil || tn.Shard(MetaShard).ID != MetaShard {
		t.Error("Shard(MetaShard) missing")
	}
	if tn.Shard(testShards) != nil || tn.Shard(-2) != nil {
		t.Error("Shard of an unknown id is not nil")
	}
	for _, id := range allShardIDs(testShards) {
		s := tn.Shard(id)
		if !s.IsLeader() {
			t.Errorf("shard %d: not leader", id)
		}
		if !s.bootstrapped {
			t.Errorf("shard %d: not bootstrapped on first start", id)
		}
		if b, ok := tn.LeaderOf(id); !ok || b != self {
			t.Errorf("LeaderOf(%d) = %+v, %v", id, b, ok)
		}
		eventually(t, time.Second, fmt.Sprintf("OnLeadership(%d, true)", id), func() bool {
			return slices.Equal(tn.lead.get(id), []bool{true})
		})
		if s.Term() == 0 {
			t.Errorf("shard %d: term 0", id)
		}
	}
	if _, ok := tn.LeaderOf(99); ok {
		t.Error("LeaderOf(99) ok")
	}

	// Apply round-trips through the FSM, on every shard.
	ctx := context.Background()
	for _, id := range allShardIDs(testShards) {
		s := tn.Shard(id)
		if _, err := s.Apply(ctx, []byte("set k v1"), time.Second); err != nil {
			t.Fatalf("shard %d: Apply: %v", id, err)
		}
		resp, err := s.Apply(ctx, []byte("set k v2"), time.Second)
		if err != nil || resp != "v1" {
			t.Fatalf("shard %d: Apply = %v, %v; want previous value v1", id, resp, err)
		}
		if v, _ := tn.fsm(id).get("k"); v != "v2" {
			t.Errorf("shard %d: FSM has k=%q", id, v)
		}
	}
	// The FSM's error response comes back as err.
	s0 := tn.Shard(0)
	resp, err := s0.Apply(ctx, []byte("fail boom"), time.Second)
	if err == nil || err.Error() != "boom" || resp != nil {
		t.Errorf("Apply(fail) = %v, %v; want nil, boom", resp, err)
	}
	// ApplyAsync + WaitApply, and with no timeout or deadline at all.
	f := s0.ApplyAsync([]byte("set async 1"), time.Second)
	if resp, err := WaitApply(ctx, f, 0); err != nil || resp != "" {
		t.Errorf("WaitApply = %v, %v", resp, err)
	}
	if _, err := s0.Apply(ctx, []byte("fail again"), 0); err == nil || err.Error() != "again" {
		t.Errorf("Apply(fail, no timeout) err = %v", err)
	}
	if err := s0.Barrier(time.Second); err != nil {
		t.Errorf("Barrier: %v", err)
	}
	// A done context fails before proposing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s0.Apply(cctx, []byte("set never 1"), time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Apply with canceled ctx: %v", err)
	}
	if _, ok := tn.fsm(0).get("never"); ok {
		t.Error("canceled Apply was applied")
	}

	// Concurrent applies (batched by raft) all land.
	errs := make(chan error, 64)
	for i := range 64 {
		go func() {
			_, err := s0.Apply(ctx, fmt.Appendf(nil, "set c%d %d", i, i), 5*time.Second)
			errs <- err
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Apply: %v", err)
		}
	}
	if v, _ := tn.fsm(0).get("c63"); v != "63" {
		t.Errorf("c63 = %q", v)
	}

	// Shutdown: clean, delivers the loss of leadership, idempotent.
	if err := tn.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, id := range allShardIDs(testShards) {
		if got := tn.lead.get(id); !slices.Equal(got, []bool{true, false}) {
			t.Errorf("shard %d: leadership events %v, want [true false]", id, got)
		}
	}
	if err := tn.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if tn.Ready() {
		t.Error("Ready() after Shutdown")
	}
	if err := tn.WaitReady(ctx); !errors.Is(err, ErrShutdown) {
		t.Errorf("WaitReady after Shutdown: %v", err)
	}
	if _, err := s0.Apply(ctx, []byte("set late 1"), time.Second); !errors.Is(err, raft.ErrRaftShutdown) {
		t.Errorf("Apply after Shutdown: %v, want raft.ErrRaftShutdown", err)
	}
	if _, ok := tn.LeaderOf(0); ok {
		t.Error("LeaderOf after Shutdown")
	}
	// The port is released.
	cfg2 := cfg
	cfg2.RaftAddr = tn.RaftAddr()
	cfg2.DataDir = t.TempDir()
	n2 := startTestNode(t, cfg2)
	if err := n2.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

func TestNodeRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 1, testShards)
	tn := startTestNode(t, cfg)
	waitReady(t, tn.Node, 5*time.Second)
	ctx := context.Background()
	for _, id := range allShardIDs(testShards) {
		for i := range 3 {
			if _, err := tn.Shard(id).Apply(ctx, fmt.Appendf(nil, "set k%d s%d-%d", i, id, i), time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Shard 0 snapshots, then gets more entries: its restart restores the
	// snapshot and replays the log after it.
	if err := tn.Shard(0).Raft.Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if _, err := tn.Shard(0).Apply(ctx, []byte("set after snapshot"), time.Second); err != nil {
		t.Fatal(err)
	}
	want := map[int32]map[string]string{}
	lastIndex := map[int32]uint64{}
	for _, id := range allShardIDs(testShards) {
		want[id] = tn.fsm(id).snapshotData()
		lastIndex[id] = tn.Shard(id).Raft.LastIndex()
	}
	if err := tn.Shutdown(); err != nil {
		t.Fatal(err)
	}

	for round := range 2 {
		tn2 := startTestNode(t, cfg)
		waitReady(t, tn2.Node, 5*time.Second)
		for _, id := range allShardIDs(testShards) {
			s := tn2.Shard(id)
			if s.bootstrapped {
				t.Errorf("round %d: shard %d bootstrapped again", round, id)
			}
			if err := s.Barrier(time.Second); err != nil {
				t.Fatalf("shard %d: Barrier: %v", id, err)
			}
			if got := tn2.fsm(id).snapshotData(); !mapsEqual(got, want[id]) {
				t.Errorf("round %d: shard %d state %v, want %v", round, id, got, want[id])
			}
			if got := s.Raft.LastIndex(); got <= lastIndex[id] {
				t.Errorf("round %d: shard %d last index %d, want > %d", round, id, got, lastIndex[id])
			}
			lastIndex[id] = s.Raft.LastIndex()
			conf := s.Raft.GetConfiguration()
			if err := conf.Error(); err != nil || len(conf.Configuration().Servers) != 1 {
				t.Errorf("shard %d: configuration %+v, %v", id, conf.Configuration(), err)
			}
		}
		if got := tn2.fsm(0).restoreCount(); got != 1 {
			t.Errorf("round %d: shard 0 restored %d snapshots, want 1", round, got)
		}
		if _, err := tn2.Shard(1).Apply(ctx, fmt.Appendf(nil, "set round %d", round), time.Second); err != nil {
			t.Fatal(err)
		}
		want[1] = tn2.fsm(1).snapshotData()
		if err := tn2.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func TestNodeDataDirMismatch(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, 1, 2)
	tn := startTestNode(t, cfg)
	if err := tn.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, mutate := range []func(*Config){
		func(c *Config) { c.Shards = 3 },
		func(c *Config) { c.NodeID = 2 },
	} {
		c := cfg
		c.NewShardFSM = func(int32) raft.FSM { return newKVFSM() }
		c.NewMetaFSM = func() raft.FSM { return newKVFSM() }
		mutate(&c)
		n, err := NewNode(c)
		if !errors.Is(err, ErrDataDirMismatch) {
			if n != nil {
				_ = n.Shutdown()
			}
			t.Errorf("NewNode with changed identity: %v, want ErrDataDirMismatch", err)
		}
	}
}

func TestNodeTwiceOnOneDataDir(t *testing.T) {
	dir := t.TempDir()
	tn := startTestNode(t, testConfig(t, dir, 1, 1))
	waitReady(t, tn.Node, 5*time.Second)
	c := testConfig(t, dir, 1, 1)
	c.NewShardFSM = func(int32) raft.FSM { return newKVFSM() }
	c.NewMetaFSM = func() raft.FSM { return newKVFSM() }
	n, err := NewNode(c)
	if err == nil {
		_ = n.Shutdown()
		t.Fatal("second node on the same DataDir started")
	}
	t.Logf("second node: %v", err)
	// The first node is unaffected.
	if _, err := tn.Shard(0).Apply(context.Background(), []byte("set a b"), time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestNodeNoBootstrap(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), 1, 1)
	cfg.BootstrapExpect = 0
	tn := startTestNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := tn.WaitReady(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "holds no shard") {
		t.Fatalf("WaitReady without bootstrap: %v", err)
	}
	if _, err := tn.Shard(0).Apply(context.Background(), []byte("set a b"), time.Second); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("Apply on a shard without leader: %v, want raft.ErrNotLeader", err)
	}
}

func TestConfigValidate(t *testing.T) {
	fsm := func(int32) raft.FSM { return newKVFSM() }
	meta := func() raft.FSM { return newKVFSM() }
	base := DefaultConfig()
	base.NewShardFSM, base.NewMetaFSM = fsm, meta
	if err := base.Validate(); err != nil {
		t.Fatalf("DefaultConfig with FSMs: %v", err)
	}
	zero := Config{DataDir: "d", RaftAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:9092", Shards: 1, BootstrapExpect: 1,
		NewShardFSM: fsm, NewMetaFSM: meta}
	if err := zero.Validate(); err != nil {
		t.Fatalf("zero tunables take defaults: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(*Config)
		want   error
	}{
		{"no data dir", func(c *Config) { c.DataDir = "" }, ErrInvalidConfig},
		{"bad raft addr", func(c *Config) { c.RaftAddr = "nope" }, ErrInvalidConfig},
		{"unadvertisable", func(c *Config) { c.AdvertiseRaftAddr = "0.0.0.0:9093" }, ErrInvalidConfig},
		{"bad kafka addr", func(c *Config) { c.KafkaAddr = "x" }, ErrInvalidConfig},
		{"negative shards", func(c *Config) { c.Shards = -1 }, ErrInvalidConfig},
		{"negative node id", func(c *Config) { c.NodeID = -1 }, ErrInvalidConfig},
		{"multi-node bootstrap without gossip", func(c *Config) { c.BootstrapExpect = 3 }, ErrInvalidConfig},
		{"negative bootstrap", func(c *Config) { c.BootstrapExpect = -1 }, ErrInvalidConfig},
		{"seeds without gossip", func(c *Config) { c.Join = []string{"127.0.0.1:7946"} }, ErrInvalidConfig},
		{"negative join timeout", func(c *Config) { c.JoinTimeout = -time.Second }, ErrInvalidConfig},
		{"no shard fsm", func(c *Config) { c.NewShardFSM = nil }, ErrInvalidConfig},
		{"no meta fsm", func(c *Config) { c.NewMetaFSM = nil }, ErrInvalidConfig},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 2 * time.Second }, ErrInvalidConfig},
		{"election below heartbeat", func(c *Config) { c.ElectionTimeout = 100 * time.Millisecond }, ErrInvalidConfig},
	}
	for _, c := range cases {
		cfg := base
		c.mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Validate() = %v, want %v", c.name, err, c.want)
		}
	}
	// Heartbeat reuse that would leave a follower silent for half its
	// timeout, or a partitioned leader leading past a newer one's
	// election, is refused by its own name.
	for _, reuse := range []time.Duration{time.Nanosecond, base.HeartbeatTimeout/4 + time.Millisecond, base.HeartbeatTimeout - base.LeaderLeaseTimeout} {
		long := base
		long.HeartbeatReuse = reuse
		if err := long.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "HeartbeatReuse") {
			t.Errorf("HeartbeatReuse %v: Validate() = %v, want an error naming HeartbeatReuse", reuse, err)
		}
	}
	// A leader's heartbeat pace that would outrun its lease, or leave a
	// shard frames leave out unheard for half the heartbeat timeout, is
	// refused by its own name; the default is within both.
	if d := base.withDefaults(); d.LeaderHeartbeatTimeout <= d.HeartbeatTimeout || d.LeaderHeartbeatTimeout > d.LeaderLeaseTimeout*10/3 {
		t.Errorf("default LeaderHeartbeatTimeout %v: want above HeartbeatTimeout %v and within 10/3 of the lease %v", d.LeaderHeartbeatTimeout, d.HeartbeatTimeout, d.LeaderLeaseTimeout)
	}
	for name, pace := range map[string]func(*Config){
		"below HeartbeatTimeout": func(c *Config) { c.LeaderHeartbeatTimeout = c.HeartbeatTimeout - time.Millisecond },
		"past the lease":         func(c *Config) { c.LeaderHeartbeatTimeout = c.LeaderLeaseTimeout*10/3 + time.Millisecond },
		"past twice HeartbeatTimeout": func(c *Config) {
			c.LeaderLeaseTimeout, c.LeaderHeartbeatTimeout = 350*time.Millisecond, 2*c.HeartbeatTimeout+time.Millisecond
		},
	} {
		paced := base
		pace(&paced)
		if err := paced.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "LeaderHeartbeatTimeout") {
			t.Errorf("LeaderHeartbeatTimeout %s: Validate() = %v, want an error naming LeaderHeartbeatTimeout", name, err)
		}
	}
	// A group commit timeout below raft's floor is refused by its own name.
	short := base
	short.GroupCommitTimeout = time.Microsecond
	if err := short.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "GroupCommitTimeout") {
		t.Errorf("GroupCommitTimeout 1µs: Validate() = %v, want an error naming GroupCommitTimeout", err)
	}
	cfg := base
	cfg.BootstrapExpect = 3
	cfg.DataDir = t.TempDir()
	cfg.RaftAddr = "127.0.0.1:0"
	if _, err := NewNode(cfg); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "GossipAddr") {
		t.Errorf("NewNode(BootstrapExpect 3) without gossip = %v", err)
	}
}

// TestNodeDefaultShardsReadyFast: a fresh single node with the shard count
// unset (DefaultShards for a new cluster, plus MetaShard) and default LAN
// timings is ready within ~2s, and so is its restart.
func TestNodeDefaultShardsReadyFast(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	cfg := testConfig(t, dir, 1, 0)
	for round := range 2 {
		start := time.Now()
		tn := startTestNode(t, cfg)
		waitReady(t, tn.Node, 10*time.Second)
		elapsed := time.Since(start)
		if tn.ShardCount() != DefaultShards {
			t.Fatalf("round %d: %d shards, want DefaultShards %d", round, tn.ShardCount(), DefaultShards)
		}
		t.Logf("round %d: %d shards ready in %v", round, tn.ShardCount(), elapsed)
		if elapsed > 3*time.Second {
			t.Errorf("round %d: ready after %v, want about 2s at most", round, elapsed)
		}
		if err := tn.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNodeWithoutElectionNudge(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), 1, 2)
	cfg.DisableElectionNudge = true
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	tn := startTestNode(t, cfg)
	elapsed := waitReady(t, tn.Node, 5*time.Second)
	if elapsed < 50*time.Millisecond {
		t.Errorf("ready after %v: faster than a heartbeat timeout without the nudge?", elapsed)
	}
}

// TestApplyRacingShutdown: applies without timeout that race Shutdown all
// return (raft alone can leave a batched apply unanswered forever).
func TestApplyRacingShutdown(t *testing.T) {
	tn := startTestNode(t, testConfig(t, t.TempDir(), 1, 1))
	waitReady(t, tn.Node, 5*time.Second)
	s := tn.Shard(0)
	const writers = 32
	results := make(chan error, writers)
	var futures []raft.ApplyFuture
	for i := range writers {
		go func() {
			for j := 0; ; j++ {
				if _, err := s.Apply(context.Background(), fmt.Appendf(nil, "set w%d %d", i, j), 0); err != nil {
					results <- err
					return
				}
			}
		}()
	}
	for i := range 200 {
		futures = append(futures, s.ApplyAsync(fmt.Appendf(nil, "set async %d", i), 0))
	}
	time.Sleep(50 * time.Millisecond)
	if err := tn.Shutdown(); err != nil {
		t.Fatal(err)
	}
	futures = append(futures, s.ApplyAsync([]byte("set after 1"), 0))
	timeout := time.After(10 * time.Second)
	for range writers {
		select {
		case err := <-results:
			if !errors.Is(err, raft.ErrRaftShutdown) && !errors.Is(err, raft.ErrLeadershipLost) {
				t.Errorf("Apply racing Shutdown: %v", err)
			}
		case <-timeout:
			t.Fatal("Apply did not return after Shutdown")
		}
	}
	done := make(chan struct{})
	go func() {
		for _, f := range futures {
			_ = f.Error()
			_ = f.Response()
			_ = f.Index()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-timeout:
		t.Fatal("ApplyAsync futures did not complete after Shutdown")
	}
	if err := futures[len(futures)-1].Error(); !errors.Is(err, raft.ErrRaftShutdown) {
		t.Errorf("ApplyAsync after Shutdown: %v", err)
	}
	if err := s.Barrier(time.Second); !errors.Is(err, raft.ErrRaftShutdown) {
		t.Errorf("Barrier after Shutdown: %v", err)
	}
}

// A node without a cluster id admits no cluster's streams while it
// starts: a stream admitted before its shards show whether it holds
// state would stay open after that check (raft pools its connections),
// and could carry a cluster's heartbeats into its empty logs. The test holds the node store's lock, so
// NewNode waits in the middle of its start with its mux listening.
func TestStartingNodeAdmitsNoClusterStreams(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	_ = free.Close()

	peerLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peer := raftnet.NewMux(peerLn, peerLn.Addr().String(), testLogger(t))
	defer peer.Close()
	peer.SetClusterID("some-cluster")
	layer, err := peer.Listen(raftnet.AdminStream)
	if err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(t, t.TempDir(), 1, 1)
	cfg.BootstrapExpect = 0
	cfg.RaftAddr = addr
	cfg.NewMetaFSM = func() raft.FSM { return newKVFSM() }
	cfg.NewShardFSM = func(int32) raft.FSM { return newKVFSM() }
	wal := filepath.Join(cfg.DataDir, "wal")
	if err := os.MkdirAll(wal, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(wal, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() {
		n, err := NewNode(cfg)
		if err == nil {
			t.Cleanup(func() { _ = n.Shutdown() })
		}
		started <- err
	}()

	var c net.Conn
	eventually(t, 5*time.Second, "the starting node's raft port listens", func() bool {
		c, err = layer.Dial(raft.ServerAddress(addr), time.Second)
		return err == nil
	})
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	_ = c.Close()
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		t.Error("a starting node without a cluster id admitted a stream naming a cluster")
	}
	_ = lock.Close() // releases the lock
	if err := <-started; err != nil {
		t.Fatal(err)
	}
}

// A node that Open made but did not start hands out its shards, and each
// answers as a shard this node does not lead, from any goroutine, until
// Start runs its Raft; then the same Shard value leads and applies.
func TestAnOpenedShardLeadsNothingUntilStart(t *testing.T) {
	n, err := Open(withFSMs(testConfig(t, t.TempDir(), 1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	sh := n.Shard(0)
	if sh == nil || n.Shard(1) == nil || n.Shard(MetaShard) == nil || n.Shard(2) != nil {
		t.Fatal("Open did not make exactly the node's shards")
	}
	ctx := context.Background()
	if err := sh.ApplyAsync([]byte("set a 1"), time.Second).Error(); !errors.Is(err, raft.ErrNotLeader) {
		t.Errorf("ApplyAsync before Start: %v, want raft.ErrNotLeader", err)
	}
	if err := sh.Barrier(time.Second); !errors.Is(err, raft.ErrNotLeader) {
		t.Errorf("Barrier before Start: %v, want raft.ErrNotLeader", err)
	}
	if err := sh.ConfirmLeadership(ctx, 1); !errors.Is(err, raft.ErrNotLeader) {
		t.Errorf("ConfirmLeadership before Start: %v, want raft.ErrNotLeader", err)
	}
	if sh.Leads(sh.Leadership().Epoch) || sh.Settling() || sh.HandingOver() || sh.RoutingChanges() != nil {
		t.Error("a shard not started leads, settles, hands over or signals routing changes")
	}
	if len(n.Shards()) != 0 {
		t.Error("Shards lists shards before Start")
	}

	// A coordinator asks from its own goroutines while Start runs.
	stop, asked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(asked)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = sh.Leads(sh.Leadership().Epoch)
			_, _ = sh.Settling(), sh.HandingOver()
			_ = sh.RoutingChanges()
			_ = sh.ApplyAsync([]byte("set b 1"), time.Millisecond).Error()
		}
	}()
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, n, 5*time.Second)
	eventually(t, 5*time.Second, "shard 0 leads", func() bool { return sh.Leads(sh.Leadership().Epoch) })
	close(stop)
	<-asked
	if _, err := sh.Apply(ctx, []byte("set a 1"), 5*time.Second); err != nil {
		t.Fatalf("Apply once started: %v", err)
	}
	if err := n.Start(); !errors.Is(err, ErrStarted) {
		t.Errorf("a second Start: %v, want ErrStarted", err)
	}
}

// A node that Open made and Shutdown stopped, never started, lets go of
// its data dir and port: the next node starts on them.
func TestAnOpenedNodeShutsDownWithoutStarting(t *testing.T) {
	cfg := withFSMs(testConfig(t, t.TempDir(), 1, 1))
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); !errors.Is(err, ErrShutdown) {
		t.Errorf("Start after Shutdown: %v, want ErrShutdown", err)
	}
	tn := startTestNode(t, cfg)
	waitReady(t, tn.Node, 5*time.Second)
}

// A Start that fails shuts the node down, and the caller's own Shutdown
// after it (as Open asks: Start or Shutdown) is a no-op, not a second
// close of what the failed Start closed.
func TestShutdownAfterAFailedStartIsANoOp(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := withFSMs(testConfig(t, t.TempDir(), 1, 1))
	cfg.GossipAddr = taken.Addr().String() // memberlist cannot bind it
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err == nil {
		t.Fatal("Start with the gossip port taken succeeded")
	}
	if err := n.Shutdown(); err != nil {
		t.Errorf("Shutdown after the failed Start: %v", err)
	}
}
