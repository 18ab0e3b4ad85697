package raftnet

import (
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kcoord/kcoord/internal/testkit"
)

// newTLSMux is a mux on loopback speaking mutual TLS with files f; its
// logs are captured.
func newTLSMux(t *testing.T, f testkit.TLSFiles) (*Mux, *testkit.LogCapture) {
	t.Helper()
	logger, logs := testkit.Capture(t)
	rt, err := LoadTLS(f.Cert, f.Key, f.CA, logger)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ListenMuxTLS("127.0.0.1:0", "", rt, logger)
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

// TestRaftTLSRefusesPlaintextButNotProbes: a plaintext connection, even
// with a valid stream header, is closed and logged once per host and
// interval; a death probe (connect, then close at once) is not logged.
func TestRaftTLSRefusesPlaintextButNotProbes(t *testing.T) {
	ca := testkit.NewCA(t, "kcoord cluster CA")
	m, logs := newTLSMux(t, testkit.WriteTLSFiles(t, ca, ca, "node-1", 2))
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
		testkit.ExpectClosed(t, c)
		_ = c.Close()
	}
	eventually(t, 2*time.Second, "the plaintext connection is logged", func() bool {
		return len(logs.Lines("[WARN]", "raft TLS handshake failed", "remote=127.0.0.1:")) > 0
	})
	time.Sleep(100 * time.Millisecond)
	if got := logs.Lines("raft TLS handshake failed"); len(got) != 1 {
		t.Errorf("logged %d refused handshakes, want 1 (the probe quiet, the rest held back): %q", len(got), got)
	}
	if got := logs.Lines("raft mux rejected connection"); len(got) > 0 {
		t.Errorf("logged as a bad header too: %q", got)
	}
}

// TestPlaintextMuxNamesTLSPeers: a node without raft TLS files that a TLS
// peer dials says so, once per host and interval, and the peer's dial
// fails.
func TestPlaintextMuxNamesTLSPeers(t *testing.T) {
	ca := testkit.NewCA(t, "kcoord cluster CA")
	tlsMux, _ := newTLSMux(t, testkit.WriteTLSFiles(t, ca, ca, "node-1", 2))
	logger, logs := testkit.Capture(t)
	plain, err := ListenMux("127.0.0.1:0", "", logger)
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
	if got := logs.Lines("[WARN]", "raft connection refused: the peer speaks TLS and this node does not", "remote=127.0.0.1:"); len(got) != 1 {
		t.Errorf("logged %d times, want once: %q", len(got), got)
	}
	if got := logs.Lines("raft mux rejected connection"); len(got) > 0 {
		t.Errorf("logged as a bad header too: %q", got)
	}
}

// TestRaftTLSReloadsCertificateWhenFilesChange: a renewed certificate is
// presented on new connections without a restart; files that do not load
// leave the last good one in use, with a warning.
func TestRaftTLSReloadsCertificateWhenFilesChange(t *testing.T) {
	ca := testkit.NewCA(t, "kcoord cluster CA")
	a, _ := newTLSMux(t, testkit.WriteTLSFiles(t, ca, ca, "node-a", 2))
	bFiles := testkit.WriteTLSFiles(t, ca, ca, "node-b", 3)
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
	c, k := ca.Issue(t, "node-b", 4)
	touch(map[string][]byte{bFiles.Cert: c, bFiles.Key: k})
	if got := peerSerial(t, dial()); got != 4 {
		t.Fatalf("after renewal: serial %d, want 4", got)
	}
	if len(bLogs.Lines("[INFO]", "raft TLS files reloaded")) != 1 {
		t.Error("the reload is not logged")
	}
	touch(map[string][]byte{bFiles.Key: []byte("not a key")})
	if got := peerSerial(t, dial()); got != 4 {
		t.Fatalf("after a broken key: serial %d, want 4 (the last good one)", got)
	}
	if len(bLogs.Lines("[WARN]", "raft TLS files not reloaded; using the previous ones")) != 1 {
		t.Error("the failed reload is not logged")
	}
}
