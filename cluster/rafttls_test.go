package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// raftCA is a certificate authority made for one test.
type raftCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newRaftCA(t *testing.T, name string) *raftCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &raftCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a node's certificate, for both server and client auth, as
// PEM certificate and key. It names a host no test dials (peers dial IPs):
// names are not checked.
func (ca *raftCA) issue(t *testing.T, node string, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: node},
		DNSNames:  []string{node + ".kcoord.invalid"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// raftTLSFiles are a node's three TLS files.
type raftTLSFiles struct{ cert, key, ca string }

// writeRaftTLS writes a certificate of issuer (serial) and the CA file of
// trusted into a new directory.
func writeRaftTLS(t *testing.T, issuer, trusted *raftCA, node string, serial int64) raftTLSFiles {
	t.Helper()
	dir := t.TempDir()
	f := raftTLSFiles{filepath.Join(dir, "node.pem"), filepath.Join(dir, "node-key.pem"), filepath.Join(dir, "ca.pem")}
	c, k := issuer.issue(t, node, serial)
	for path, b := range map[string][]byte{f.cert: c, f.key: k, f.ca: trusted.pem} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f raftTLSFiles) set(cfg *Config) {
	cfg.RaftTLSCertFile, cfg.RaftTLSKeyFile, cfg.RaftTLSCAFile = f.cert, f.key, f.ca
}

// newTLSMux is a mux on loopback speaking mutual TLS with files f; its
// logs are captured.
func newTLSMux(t *testing.T, f raftTLSFiles) (*Mux, *logCapture) {
	t.Helper()
	cfg := Config{}
	logs := capture(t, &cfg)
	rt, err := loadRaftTLS(f.cert, f.key, f.ca, cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	m, err := listenMux("127.0.0.1:0", "", rt, cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, logs
}

// peerSerial is the serial of the certificate the other side of a dialed
// mux connection presented.
func peerSerial(t *testing.T, c net.Conn) int64 {
	t.Helper()
	tc, ok := c.(*muxConn).Conn.(*tls.Conn)
	if !ok {
		t.Fatalf("connection is %T, not TLS", c.(*muxConn).Conn)
	}
	return tc.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestRaftTLSClusterReplicates: three nodes whose Raft port speaks mutual
// TLS elect leaders and replicate writes on every shard, and every
// connection between them is TLS 1.2 or later.
func TestRaftTLSClusterReplicates(t *testing.T) {
	const shards = 2
	ca := newRaftCA(t, "kcoord cluster CA")
	nodes := startTestCluster(t, 3, shards, func(cfg *Config) {
		writeRaftTLS(t, ca, ca, fmt.Sprintf("node-%d", cfg.NodeID), int64(10+cfg.NodeID)).set(cfg)
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
		tn.mux.mu.Lock()
		conns := 0
		for c := range tn.mux.conns {
			conns++
			tc, ok := c.Conn.(*tls.Conn)
			if !ok {
				t.Errorf("node %d: a %s connection of shard %d with %s is %T", tn.ID(), c.dir, c.shard, c.peer, c.Conn)
			} else if v := tc.ConnectionState().Version; v < tls.VersionTLS12 {
				t.Errorf("node %d: TLS version %#x", tn.ID(), v)
			}
		}
		tn.mux.mu.Unlock()
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
	ca, other := newRaftCA(t, "kcoord cluster CA"), newRaftCA(t, "another CA")
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
		writeRaftTLS(t, issuer, ca, fmt.Sprintf("node-%d", id), int64(10+id)).set(&cfg)
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
			return len(tn.logs.lines("[WARN]", "raft TLS handshake failed", "remote=127.0.0.1:", "certificate signed by unknown authority")) > 0
		})
	}
	for _, e := range leaders {
		tn := nodeByID(good, e.Node)
		eventually(t, 5*time.Second, fmt.Sprintf("leader %d logs the failed dial", tn.ID()), func() bool {
			return len(tn.logs.lines("[WARN]", "raft TLS handshake failed", "peer="+outsider.RaftAddr(), "does not chain to the CA")) > 0
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
	if n := len(nodes[0].logs.lines("raft TLS handshake failed", "remote=")); n > 2 {
		t.Errorf("node 1 logged %d refused handshakes in under %v", n, handshakeWarnInterval)
	}
}

// TestRaftTLSRefusesPlaintextButNotProbes: a plaintext connection, even
// with a valid stream header, is closed and logged once per host and
// interval; a death probe (connect, then close at once) is not logged.
func TestRaftTLSRefusesPlaintextButNotProbes(t *testing.T) {
	ca := newRaftCA(t, "kcoord cluster CA")
	m, logs := newTLSMux(t, writeRaftTLS(t, ca, ca, "node-1", 2))
	listen(t, m, 0)
	probe, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = probe.Close()
	plain := newTestMux(t)
	for range 3 {
		c, err := net.Dial("tcp", m.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(plain.header(0))
		expectClosed(t, c)
		_ = c.Close()
	}
	eventually(t, 2*time.Second, "the plaintext connection is logged", func() bool {
		return len(logs.lines("[WARN]", "raft TLS handshake failed", "remote=127.0.0.1:")) > 0
	})
	time.Sleep(100 * time.Millisecond)
	if got := logs.lines("raft TLS handshake failed"); len(got) != 1 {
		t.Errorf("logged %d refused handshakes, want 1 (the probe quiet, the rest held back): %q", len(got), got)
	}
	if got := logs.lines("raft mux rejected connection"); len(got) > 0 {
		t.Errorf("logged as a bad header too: %q", got)
	}
}

// TestPlaintextMuxNamesTLSPeers: a node without raft TLS files that a TLS
// peer dials says so, once per host and interval, and the peer's dial
// fails.
func TestPlaintextMuxNamesTLSPeers(t *testing.T) {
	ca := newRaftCA(t, "kcoord cluster CA")
	tlsMux, _ := newTLSMux(t, writeRaftTLS(t, ca, ca, "node-1", 2))
	cfg := Config{}
	logs := capture(t, &cfg)
	plain, err := ListenMux("127.0.0.1:0", "", cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	listen(t, plain, 0)
	l := listen(t, tlsMux, 0)
	for range 3 {
		if c, err := l.Dial(raft.ServerAddress(plain.Addr().String()), time.Second); err == nil {
			_ = c.Close()
			t.Fatal("a TLS dial to a plaintext mux succeeded")
		}
	}
	if got := logs.lines("[WARN]", "raft connection refused: the peer speaks TLS and this node does not", "remote=127.0.0.1:"); len(got) != 1 {
		t.Errorf("logged %d times, want once: %q", len(got), got)
	}
	if got := logs.lines("raft mux rejected connection"); len(got) > 0 {
		t.Errorf("logged as a bad header too: %q", got)
	}
}

// TestRaftTLSReloadsCertificateWhenFilesChange: a renewed certificate is
// presented on new connections without a restart; files that do not load
// leave the last good one in use, with a warning.
func TestRaftTLSReloadsCertificateWhenFilesChange(t *testing.T) {
	ca := newRaftCA(t, "kcoord cluster CA")
	a, _ := newTLSMux(t, writeRaftTLS(t, ca, ca, "node-a", 2))
	bFiles := writeRaftTLS(t, ca, ca, "node-b", 3)
	b, bLogs := newTLSMux(t, bFiles)
	la, lb := listen(t, a, 0), listen(t, b, 0)
	dial := func() net.Conn {
		t.Helper()
		acc := acceptAsync(lb)
		c, err := la.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, c, recvConn(t, acc), "hello")
		return c
	}
	// touch rewrites files with a later modification time, and lets b's
	// next handshake look at them at once.
	touch := func(files map[string][]byte) {
		t.Helper()
		later := time.Now().Add(time.Minute)
		for path, body := range files {
			if err := os.WriteFile(path, body, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, later, later); err != nil {
				t.Fatal(err)
			}
		}
		b.tls.mu.Lock()
		b.tls.checked = time.Time{}
		b.tls.mu.Unlock()
	}
	if got := peerSerial(t, dial()); got != 3 {
		t.Fatalf("serial %d, want 3", got)
	}
	c, k := ca.issue(t, "node-b", 4)
	touch(map[string][]byte{bFiles.cert: c, bFiles.key: k})
	if got := peerSerial(t, dial()); got != 4 {
		t.Fatalf("after renewal: serial %d, want 4", got)
	}
	if len(bLogs.lines("[INFO]", "raft TLS files reloaded")) != 1 {
		t.Error("the reload is not logged")
	}
	touch(map[string][]byte{bFiles.key: []byte("not a key")})
	if got := peerSerial(t, dial()); got != 4 {
		t.Fatalf("after a broken key: serial %d, want 4 (the last good one)", got)
	}
	if len(bLogs.lines("[WARN]", "raft TLS files not reloaded; using the previous ones")) != 1 {
		t.Error("the failed reload is not logged")
	}
}

// TestRaftTLSNeedsAllThreeFiles: the three files go together, and a node
// does not start with files it cannot load.
func TestRaftTLSNeedsAllThreeFiles(t *testing.T) {
	ca := newRaftCA(t, "kcoord cluster CA")
	f := writeRaftTLS(t, ca, ca, "node-1", 2)
	for name, mutate := range map[string]func(*Config){
		"cert only":   func(c *Config) { c.RaftTLSCertFile = f.cert },
		"no CA":       func(c *Config) { c.RaftTLSCertFile, c.RaftTLSKeyFile = f.cert, f.key },
		"CA and cert": func(c *Config) { c.RaftTLSCertFile, c.RaftTLSCAFile = f.cert, f.ca },
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
	for name, files := range map[string]raftTLSFiles{
		"CA file without a certificate": {f.cert, f.key, notPEM},
		"missing CA file":               {f.cert, f.key, filepath.Join(t.TempDir(), "missing.pem")},
		"key of another certificate":    {f.cert, writeRaftTLS(t, ca, ca, "node-2", 3).key, f.ca},
	} {
		cfg := withFSMs(testConfig(t, t.TempDir(), 1, 1))
		files.set(&cfg)
		n, err := NewNode(cfg)
		if err == nil {
			_ = n.Shutdown()
			t.Errorf("%s: the node started", name)
		} else if !errors.Is(err, ErrRaftTLS) {
			t.Errorf("%s: NewNode = %v, want ErrRaftTLS", name, err)
		}
	}
}
