package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/internal/testkit"
)

// setRaftTLS makes cfg speak mutual TLS on its Raft port with files f.
func setRaftTLS(cfg *Config, f testkit.TLSFiles) {
	cfg.RaftTLSCertFile, cfg.RaftTLSKeyFile, cfg.RaftTLSCAFile = f.Cert, f.Key, f.CA
}

// TestRaftTLSClusterReplicates: three nodes whose Raft port speaks mutual
// TLS elect leaders and replicate writes on every shard, and every
// connection between them is TLS 1.2 or later.
func TestRaftTLSClusterReplicates(t *testing.T) {
	const shards = 2
	ca := testkit.NewCA(t, "kcoord cluster CA")
	nodes := startTestCluster(t, 3, shards, func(cfg *Config) {
		setRaftTLS(cfg, testkit.WriteTLSFiles(t, ca, ca, fmt.Sprintf("node-%d", cfg.NodeID), int64(10+cfg.NodeID)))
	})
	ctx := context.Background()
	for _, id := range allShardIDs(shards) {
		leader := waitShardLeaders(t, nodes, shards)[id]
		if _, err := nodeByID(nodes, leader.Node).Shard(id).Apply(ctx, []byte("set k over-tls"), 5*time.Second); err != nil {
			t.Fatalf("shard %d: Apply: %v", id, err)
		}
		for _, tn := range nodes {
			eventually(t, 5*time.Second, fmt.Sprintf("node %d shard %d has the write", tn.ID(), id), func() bool {
				v, ok := tn.fsm(id).get("k")
				return ok && v == "over-tls"
			})
		}
	}
	for _, tn := range nodes {
		conns := 0
		for _, c := range tn.mux.Conns() {
			conns++
			if c.TLSVersion == 0 {
				t.Errorf("node %d: a %s connection of shard %d with %s is plaintext", tn.ID(), c.Dir, c.Shard, c.Peer)
			} else if c.TLSVersion < tls.VersionTLS12 {
				t.Errorf("node %d: TLS version %#x", tn.ID(), c.TLSVersion)
			}
		}
		if conns == 0 {
			t.Errorf("node %d has no Raft connection", tn.ID())
		}
	}
}

// TestRaftTLSRefusesPeerOfAnotherCA: a node whose certificate another CA
// signed (though it trusts the cluster's CA) never replicates: the nodes
// it dials refuse it during the handshake and log it at warn with its
// address, and it never receives a write; the cluster carries on without
// it.
func TestRaftTLSRefusesPeerOfAnotherCA(t *testing.T) {
	const shards = 1
	ca, other := testkit.NewCA(t, "kcoord cluster CA"), testkit.NewCA(t, "another CA")
	var nodes []*testNode
	for id := int32(1); id <= 3; id++ {
		cfg := testConfig(t, t.TempDir(), id, shards)
		cfg.BootstrapExpect = 0
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
		cfg.CommitTimeout, cfg.GroupCommitTimeout = 10*time.Millisecond, 10*time.Millisecond
		cfg.TransportTimeout = 2 * time.Second
		issuer := ca
		if id == 3 {
			issuer = other
		}
		setRaftTLS(&cfg, testkit.WriteTLSFiles(t, issuer, ca, fmt.Sprintf("node-%d", id), int64(10+id)))
		logs := capture(t, &cfg)
		tn := startTestNode(t, cfg)
		tn.logs = logs
		nodes = append(nodes, tn)
	}
	// All three are voters of every shard, as after a bootstrap: node 3
	// campaigns, and the leaders try to replicate to it.
	var servers []raft.Server
	for _, tn := range nodes {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(tn.ID()), Address: raft.ServerAddress(tn.RaftAddr())})
		for _, other := range nodes {
			other.members.set(tn.Self(), tn.RaftAddr())
		}
	}
	for _, tn := range nodes {
		for _, id := range allShardIDs(shards) {
			if err := tn.Shard(id).Raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				t.Fatalf("node %d shard %d: bootstrap: %v", tn.ID(), id, err)
			}
		}
	}
	good, outsider := nodes[:2], nodes[2]
	for _, tn := range good {
		waitReady(t, tn.Node, 10*time.Second)
	}
	leaders := waitShardLeaders(t, good, shards)
	for _, id := range allShardIDs(shards) {
		if _, err := nodeByID(good, leaders[id].Node).Shard(id).Apply(context.Background(), []byte("set k v"), 5*time.Second); err != nil {
			t.Fatalf("shard %d: Apply: %v", id, err)
		}
		for _, tn := range good {
			eventually(t, 5*time.Second, fmt.Sprintf("node %d shard %d has the write", tn.ID(), id), func() bool {
				_, ok := tn.fsm(id).get("k")
				return ok
			})
		}
	}
	// Node 3's vote requests reach nodes 1 and 2, which refuse its
	// certificate; the leaders' dials to it fail their own check.
	for _, tn := range good {
		eventually(t, 5*time.Second, fmt.Sprintf("node %d logs the refused handshake", tn.ID()), func() bool {
			return len(tn.logs.Lines("[WARN]", "raft TLS handshake failed", "remote=127.0.0.1:", "certificate signed by unknown authority")) > 0
		})
	}
	for _, e := range leaders {
		tn := nodeByID(good, e.Node)
		eventually(t, 5*time.Second, fmt.Sprintf("leader %d logs the failed dial", tn.ID()), func() bool {
			return len(tn.logs.Lines("[WARN]", "raft TLS handshake failed", "peer="+outsider.RaftAddr(), "does not chain to the CA")) > 0
		})
	}
	time.Sleep(500 * time.Millisecond) // many heartbeat intervals
	for _, id := range allShardIDs(shards) {
		if _, ok := outsider.fsm(id).get("k"); ok {
			t.Errorf("shard %d: the write reached the node of another CA", id)
		}
		if outsider.Shard(id).IsLeader() {
			t.Errorf("shard %d: the node of another CA leads", id)
		}
	}
	// Repeated failures from the same host are not logged each time.
	if n := len(nodes[0].logs.Lines("raft TLS handshake failed", "remote=")); n > 2 {
		t.Errorf("node 1 logged %d refused handshakes in under the warning interval", n)
	}
}

// TestRaftTLSNeedsAllThreeFiles: the three files go together, and a node
// does not start with files it cannot load.
func TestRaftTLSNeedsAllThreeFiles(t *testing.T) {
	ca := testkit.NewCA(t, "kcoord cluster CA")
	f := testkit.WriteTLSFiles(t, ca, ca, "node-1", 2)
	for name, mutate := range map[string]func(*Config){
		"cert only":   func(c *Config) { c.RaftTLSCertFile = f.Cert },
		"no CA":       func(c *Config) { c.RaftTLSCertFile, c.RaftTLSKeyFile = f.Cert, f.Key },
		"CA and cert": func(c *Config) { c.RaftTLSCertFile, c.RaftTLSCAFile = f.Cert, f.CA },
	} {
		cfg := withFSMs(testConfig(t, t.TempDir(), 1, 1))
		mutate(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "go together") {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("no certificate here"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string]testkit.TLSFiles{
		"CA file without a certificate": {Cert: f.Cert, Key: f.Key, CA: notPEM},
		"missing CA file":               {Cert: f.Cert, Key: f.Key, CA: filepath.Join(t.TempDir(), "missing.pem")},
		"key of another certificate":    {Cert: f.Cert, Key: testkit.WriteTLSFiles(t, ca, ca, "node-2", 3).Key, CA: f.CA},
	} {
		cfg := withFSMs(testConfig(t, t.TempDir(), 1, 1))
		setRaftTLS(&cfg, files)
		n, err := NewNode(cfg)
		if err == nil {
			_ = n.Shutdown()
			t.Errorf("%s: the node started", name)
		} else if !errors.Is(err, raftnet.ErrRaftTLS) {
			t.Errorf("%s: NewNode = %v, want raftnet.ErrRaftTLS", name, err)
		}
	}
}
