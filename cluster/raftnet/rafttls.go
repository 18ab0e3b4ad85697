package raftnet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// This file is mutual TLS on the Raft port (cluster.Config.RaftTLSCertFile,
// RaftTLSKeyFile and RaftTLSCAFile; --raft-tls-*). With it, the Mux runs
// a TLS 1.2+ handshake on every connection before the stream header, both
// in its accept loop and in StreamLayer.Dial, so every stream that shares
// the port is covered: each shard's Raft, the admin stream, the append
// and heartbeat hubs, snapshots sent to catch a replica up. Each node
// presents its certificate on both sides of a connection and requires the
// peer's to chain to the CA file: the accepting side with
// tls.RequireAndVerifyClientCert, the dialing side by verifying the chain
// itself (verifyPeerChain). A peer's certificate therefore needs both
// ExtKeyUsageServerAuth and ExtKeyUsageClientAuth.
//
// The three files are re-read when they change (looked at, on a handshake,
// at most once every raftTLSCheckInterval): renewed certificates, and a CA
// bundle that gained or lost a CA, apply to new connections without a
// restart; open connections keep what they were opened with. Files that do
// not load leave the previous ones in use, with a warning. This is the
// Kafka listener's certReloader (server/tls.go), with the CA file added;
// cluster cannot import server.

// raftTLSCheckInterval is how often a handshake looks at the TLS files'
// modification times: a renewed certificate is in use within it.
const raftTLSCheckInterval = time.Second

// handshakeWarnInterval is how often a failing handshake with the same
// host is logged: a peer with a certificate of another CA retries many
// times a second (every shard's Raft, the hubs). Dials of a stream the
// mux does not listen on (Mux.unknownShard) are limited alike.
const handshakeWarnInterval = 10 * time.Second

// TLS is the mutual TLS of a Mux. Handshakes (the mux's handshake
// goroutines and the dialing goroutines of every shard's Raft and of the
// hubs) call configs; the mux logs their failures (Mux.handshakeFailed).
type TLS struct {
	certFile, keyFile, caFile string
	logger                    hclog.Logger // reloads

	mu      sync.Mutex
	server  *tls.Config // accepting side, from the files as last loaded
	client  *tls.Config // dialing side
	mods    [3]time.Time
	checked time.Time
}

// LoadTLS loads the three files once, or returns nil when none is set
// (cluster.Config.Validate checks they go together): a node does not start with a
// certificate or CA it cannot read. Called by cluster.Open.
func LoadTLS(certFile, keyFile, caFile string, logger hclog.Logger) (*TLS, error) {
	if certFile == "" {
		return nil, nil
	}
	t := &TLS{certFile: certFile, keyFile: keyFile, caFile: caFile, logger: logger}
	if err := t.load(); err != nil {
		return nil, err
	}
	return t, nil
}

// load reads the files and builds both sides' configs. Called with t.mu
// held (or before t is shared).
func (t *TLS) load() error {
	mods, err := t.modTimes()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
	if err != nil {
		return fmt.Errorf("%w: %s and %s: %w", ErrRaftTLS, t.certFile, t.keyFile, err)
	}
	pem, err := os.ReadFile(t.caFile)
	if err != nil {
		return fmt.Errorf("%w: CA file: %w", ErrRaftTLS, err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%w: CA file %s: no PEM certificate in it", ErrRaftTLS, t.caFile)
	}
	t.server = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    cas,
	}
	caFile := t.caFile
	t.client = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Always present the certificate: with Certificates, Go's client
		// sends none when the server's acceptable CAs do not list its
		// issuer, and the server could only say that none came.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
		// Peers dial each other by advertised Raft address, often an IP
		// (a container's, a pod's) that no certificate names, and the
		// trust anchor is the cluster's own CA, which issues certificates
		// to its nodes only: any certificate it signed is a node of the
		// cluster, whatever name it carries. So the name is not checked,
		// only the chain, against the CA file: crypto/tls would check the
		// name against ServerName, which InsecureSkipVerify turns off, and
		// VerifyConnection verifies the chain instead.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeerChain(cs, cas, caFile)
		},
	}
	t.mods, t.checked = mods, time.Now()
	return nil
}

// verifyPeerChain checks that the peer's certificate chains to cas and
// may serve TLS (ExtKeyUsageServerAuth). Called by crypto/tls on the
// dialing goroutine, once per handshake.
func verifyPeerChain(cs tls.ConnectionState, cas *x509.CertPool, caFile string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer presented no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         cas,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("the peer's certificate (subject %q) does not chain to the CA of %s: %w", cs.PeerCertificates[0].Subject, caFile, err)
	}
	return nil
}

// modTimes are the modification times of the three files.
func (t *TLS) modTimes() ([3]time.Time, error) {
	var mods [3]time.Time
	for i, f := range []string{t.certFile, t.keyFile, t.caFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return mods, fmt.Errorf("%w: %w", ErrRaftTLS, err)
		}
		mods[i] = fi.ModTime()
	}
	return mods, nil
}

// configs returns both sides' configs, reloaded first if the files
// changed since the last look (at most once every raftTLSCheckInterval). A
// reload that fails keeps the configs in use and logs why (load changes
// nothing unless every file loads).
func (t *TLS) configs() (server, client *tls.Config) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) >= raftTLSCheckInterval {
		t.checked = time.Now()
		if mods, err := t.modTimes(); err == nil && mods != t.mods {
			if err := t.load(); err != nil {
				// Not tried again until the files change again (the
				// rest of a pair being written, say): one warning each.
				t.mods = mods
				t.logger.Warn("raft TLS files not reloaded; using the previous ones", "cert_file", t.certFile, "key_file", t.keyFile, "ca_file", t.caFile, "error", err)
			} else {
				t.logger.Info("raft TLS files reloaded", "cert_file", t.certFile, "ca_file", t.caFile)
			}
		}
	}
	return t.server, t.client
}

// tlsHandshakeError is a TLS handshake of a Raft connection that failed.
type tlsHandshakeError struct{ err error }

func (e *tlsHandshakeError) Error() string { return "raft TLS handshake: " + e.err.Error() }
func (e *tlsHandshakeError) Unwrap() error { return e.err }

// accept runs the accepting side's handshake on c within timeout. On
// failure c is left for the caller to close. Called by the mux's
// handshake goroutines.
func (t *TLS) accept(c net.Conn, timeout time.Duration) (net.Conn, error) {
	server, _ := t.configs()
	tc := tls.Server(c, server)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, &tlsHandshakeError{err}
	}
	return tc, nil
}

// dial runs the dialing side's handshake on c, within timeout (none if
// zero) and until ctx ends. On failure c is left for the caller to close.
// Called by StreamLayer.Dial.
func (t *TLS) dial(ctx context.Context, c net.Conn, timeout time.Duration) (net.Conn, error) {
	_, client := t.configs()
	tc := tls.Client(c, client)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, &tlsHandshakeError{err}
	}
	return tc, nil
}

// errPeerSpeaksTLS is the header error of a connection that starts with a
// TLS handshake record to a mux without TLS.
var errPeerSpeaksTLS = errors.New("the peer speaks TLS (it has raft TLS files), this node's Raft port does not")

// handshakeFailed logs a failed TLS handshake, or a TLS one reaching a
// plaintext mux (errPeerSpeaksTLS), at warn, at most once per
// handshakeWarnInterval for the same host and side, saying how many were
// left out since. side is "remote" for an accepted connection (addr is
// the socket's remote address) or "peer" for a dialed one (addr is the
// peer's advertised address). Called by the handshake and dialing
// goroutines.
func (m *Mux) handshakeFailed(side, addr string, err error) {
	ok, left := m.warns.Allow(side + "\x00" + hostOf(addr))
	if !ok {
		return
	}
	var he *tlsHandshakeError
	if errors.As(err, &he) {
		err = he.err
	}
	kv := []any{side, addr, "error", err}
	if left > 0 {
		kv = append(kv, "suppressed", left)
	}
	if errors.Is(err, errPeerSpeaksTLS) {
		m.logger.Warn("raft connection refused: the peer speaks TLS and this node does not", kv...)
		return
	}
	m.logger.Warn("raft TLS handshake failed", kv...)
}

// hostOf is addr's host, or addr when it has no port: the key of the
// warnings limited per host.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// WarnLimiter lets a warning about the same key through at most once per
// interval. gossipkey.go uses it too. Any goroutine.
type WarnLimiter struct {
	interval time.Duration

	mu   sync.Mutex
	last map[string]time.Time // when the key's warning was last let through
	left map[string]int       // warnings about the key held back since
}

// maxWarnKeys bounds the keys a WarnLimiter remembers: past it, those
// whose interval is over are forgotten.
const maxWarnKeys = 1024

// NewWarnLimiter lets a warning about a key through at most once per
// interval.
func NewWarnLimiter(interval time.Duration) *WarnLimiter {
	return &WarnLimiter{interval: interval, last: make(map[string]time.Time), left: make(map[string]int)}
}

// Backdate moves the time every key's warning was last let through d
// earlier, as if d had passed (tests).
func (w *WarnLimiter) Backdate(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, last := range w.last {
		w.last[k] = last.Add(-d)
	}
}

// Allow reports whether a warning about key is to be logged now and, if
// so, how many about it were held back since the last one logged.
func (w *WarnLimiter) Allow(key string) (ok bool, heldBack int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if last, seen := w.last[key]; seen && now.Sub(last) < w.interval {
		w.left[key]++
		return false, 0
	}
	if len(w.last) >= maxWarnKeys {
		for k, last := range w.last {
			if now.Sub(last) >= w.interval {
				delete(w.last, k)
				delete(w.left, k)
			}
		}
	}
	heldBack = w.left[key]
	w.last[key] = now
	delete(w.left, key)
	return true, heldBack
}
