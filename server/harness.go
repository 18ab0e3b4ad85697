package server

import (
	"context"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/internal/testlog"
)

// The harness of in-process nodes and clusters, shipped with the package
// (as hashicorp/raft ships testing.go) for other packages' tests and for
// `kcoord bench report`, which runs in-process clusters. It takes a TB,
// not a testing.TB, so the kcoord binary does not link package testing.

// TB is the part of testing.TB the harness uses; *testing.T and
// *testing.B satisfy it, and so does any testing.TB.
type TB interface {
	Helper()
	Log(args ...any)
	Logf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// TestConfig returns a single-node configuration for tests: loopback ports
// picked by the kernel, data under dir, few shards and short group timers so
// rebalances finish quickly.
func TestConfig(dir string) Config {
	c := DefaultConfig()
	c.DataDir = dir
	c.KafkaAddr, c.RaftAddr, c.GossipAddr, c.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", ""
	c.OffsetsTopicNumPartitions = 8
	c.GroupInitialRebalanceDelay = 100 * time.Millisecond
	c.GroupMinSessionTimeout = 100 * time.Millisecond
	// Consumer-protocol members heartbeat every 300 ms and are fenced after
	// 10 s, so tests see them move in well under a second.
	c.GroupConsumerMinSessionTimeout, c.GroupConsumerSessionTimeout = time.Second, 10*time.Second
	c.GroupConsumerMinHeartbeatInterval, c.GroupConsumerHeartbeatInterval = 100*time.Millisecond, 300*time.Millisecond
	c.ShutdownDrain = 0 // tests that stop nodes on purpose set their own
	return c
}

// TestLogger returns an hclog logger writing to t.Log, silenced when the
// test ends (servers may log from goroutines that outlive it briefly).
func TestLogger(t TB) hclog.Logger {
	return testlog.Logger(t, "kcoord", nil)
}

// StartTestServer starts a server with cfg, waits until it is ready and
// shuts it down when the test ends. Use TestConfig(t.TempDir()) for cfg.
func StartTestServer(t TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg, TestLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		_ = s.Shutdown(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Logf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("server not ready: %v", err)
	}
	return s
}

// TestClusterConfig returns the configuration of node i (0-based) of an
// in-process test cluster of n nodes: node ids 1..n, loopback ports picked
// by the kernel, bootstrap-expect n, LAN Raft timings shortened for tests
// and a one-second leadership balance round.
func TestClusterConfig(dir string, i, n int) Config {
	c := TestConfig(dir)
	c.NodeID = int32(i + 1)
	c.BootstrapExpect = n
	c.Raft = func(rc *cluster.Config) {
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
		rc.BalanceInterval = time.Second
		rc.GossipProbeInterval = 200 * time.Millisecond
		rc.GossipPushPullInterval = time.Second
	}
	return c
}

// StartTestCluster starts n servers that find each other through gossip
// (each joins the first), waits until all are ready and stops them when the
// test ends. mutate, if set, adjusts each node's configuration.
func StartTestCluster(t TB, n int, mutate func(i int, c *Config)) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	var seed string
	for i := range servers {
		cfg := TestClusterConfig(t.TempDir(), i, n)
		if seed != "" {
			cfg.Join = []string{seed}
		}
		if mutate != nil {
			mutate(i, &cfg)
		}
		s := startClusterNode(t, cfg, int32(i+1))
		if seed == "" {
			seed = s.Node().GossipAddr()
		}
		servers[i] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, s := range servers {
		if err := s.WaitReady(ctx); err != nil {
			t.Fatalf("node %d not ready: %v", i+1, err)
		}
	}
	return servers
}

// RestartTestNode stops nothing: it starts a new server on the data dir and
// addresses of a stopped one (see Kill and Shutdown), joining the others'
// gossip, and returns it once ready. The caller replaces servers[i].
func RestartTestNode(t TB, servers []*Server, i int) *Server {
	t.Helper()
	return RestartTestNodeWith(t, servers, i, nil)
}

// RestartTestNodeWith is RestartTestNode with mutate, if set, adjusting
// the configuration first (a rolling upgrade's new release, played by
// cluster.Config's Play settings).
func RestartTestNodeWith(t TB, servers []*Server, i int, mutate func(c *Config)) *Server {
	t.Helper()
	cfg := servers[i].BoundConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	cfg.Join = nil
	for j, o := range servers {
		if j != i {
			cfg.Join = append(cfg.Join, o.BoundConfig().GossipAddr)
		}
	}
	return startClusterNode(t, cfg, int32(i+1))
}

// startClusterNode starts one node of a test cluster with cfg, logging as
// node<id>, and kills it when the test ends; it does not wait for it to
// be ready.
func startClusterNode(t TB, cfg Config, id int32) *Server {
	t.Helper()
	s, err := New(cfg, TestLogger(t).Named("node"+strconv.Itoa(int(id))), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	return s
}

// AddTestNode starts node id as `kcoord serve --join` alone starts an added
// node (no bootstrap-expect), joining the gossip of servers, and returns it
// once ready; it is stopped when the test ends. mutate, if set, adjusts its
// configuration.
func AddTestNode(t TB, servers []*Server, id int32, mutate func(c *Config)) *Server {
	t.Helper()
	cfg := TestClusterConfig(t.TempDir(), int(id-1), 0)
	cfg.BootstrapExpect = 0
	for _, o := range servers {
		cfg.Join = append(cfg.Join, o.BoundConfig().GossipAddr)
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s := startClusterNode(t, cfg, id)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("node %d not ready: %v", id, err)
	}
	return s
}
