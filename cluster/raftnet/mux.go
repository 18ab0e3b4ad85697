package raftnet

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/release"
)

// Stream header. Every Raft connection through a Mux starts with (after
// the TLS handshake, when the mux speaks mutual TLS: see rafttls.go)
//
//	byte  0     headerMagic ('k')
//	byte  1     header version: 1, or 2 when the dialer knows its cluster id
//	bytes 2-5   shard id, int32 big endian (streams.go: group shards 0 and up, MetaShard -1, the other streams below)
//	bytes 6-7   length n of the dialer's advertised Raft address, uint16 big endian
//	bytes 8-    the dialer's advertised Raft address (n <= maxHeaderAddr bytes)
//	version 2 only:
//	byte  8+n   length m of the dialer's cluster id (m <= maxHeaderClusterID)
//	bytes 9+n-  the dialer's cluster id
//
// followed by raft's NetworkTransport protocol. The dialer's address lets the
// acceptor attribute the connection to a peer (logs, Faults); the cluster id
// lets it refuse a peer of another cluster (see SetClusterID). Neither is
// authenticated: with mutual TLS only a holder of a certificate of the
// cluster's CA gets as far as sending them, but what they say is still its
// own claim. A mux without a cluster id dials version 1, which kcoord
// releases before cluster ids accept; every mux accepts both versions (a
// version-1 header names no cluster).
const (
	headerMagic        byte = 'k'
	headerV1           byte = 1
	headerV2           byte = 2
	headerFixed             = 8
	maxHeaderAddr           = 1024
	maxHeaderClusterID      = 255
)

// Formats lists the formats of the Raft port that kcoord defines, for
// `kcoord version` (cluster.Formats): the stream header.
func Formats() []release.Format {
	return []release.Format{{Name: "raft stream header", Reads: fmt.Sprintf("versions %d-%d", headerV1, headerV2), Writes: fmt.Sprintf("version %d (%d before the node knows its cluster id)", headerV2, headerV1)}}
}

// A TLS connection starts with a handshake record: type 22, then the major
// version 3 (a ClientHello of any version, SSL 3.0 to TLS 1.3). No header
// starts so: readHeader names it.
const (
	tlsHandshakeRecord byte = 0x16
	tlsMajorVersion    byte = 3
)

// defaultHeaderTimeout bounds how long an accepted connection may take to
// send its header.
const defaultHeaderTimeout = 5 * time.Second

// Mux multiplexes the Raft traffic of every shard of a node over one TCP
// listener. Listen gives each shard a StreamLayer for
// raft.NewNetworkTransportWithConfig; a dialed connection names its shard in a
// header, and the accept loop hands it to that shard's StreamLayer.
//
// Every connection is tracked, so Close (and a StreamLayer's Close) ends them
// all, and Faults can drop or delay them.
//
// A mux made with mutual TLS (cluster.Config.RaftTLSCertFile) runs the handshake on
// every connection, accepted or dialed, before the header.
type Mux struct {
	ln            net.Listener
	advertise     string
	headerTimeout time.Duration
	logger        hclog.Logger
	faults        *Faults
	deaths        *PeerDeaths
	// tls is the mutual TLS every connection speaks (rafttls.go); nil:
	// plaintext.
	tls *TLS
	// warns limits the warnings about failed TLS handshakes (and TLS
	// peers of a plaintext mux; see handshakeFailed) and about dials of
	// streams it does not listen on (unknownShard).
	warns *WarnLimiter

	mu      sync.Mutex
	closed  bool
	layers  map[int32]*StreamLayer
	conns   map[*muxConn]struct{}
	pending map[net.Conn]struct{} // accepted, header not read yet
	// clusterID is sent in dialed headers and required of accepted ones
	// that name a cluster; clusterPending refuses every header naming a
	// cluster while clusterID is empty.
	clusterID      string
	clusterPending bool
	refused        map[string]bool // peer + "\x00" + cluster id, logged already

	closeCh chan struct{}
	wg      sync.WaitGroup // accept loop and handshakes

	// fenced is how far the node fenced itself for its disk
	// (diskfence.go): FenceNone, FenceInbound (no connection accepted, and
	// those accepted are closed: no peer's RPC reaches this node's Raft)
	// or FenceAll (none dialed either).
	fenced atomic.Int32
}

// Levels of Mux.Fence.
const (
	// FenceNone: the mux carries traffic.
	FenceNone int32 = iota
	// FenceInbound: no connection is accepted, and those accepted are
	// closed.
	FenceInbound
	// FenceAll: none is dialed either.
	FenceAll
)

// ListenMux binds bindAddr and returns a Mux serving it in plaintext.
// advertise is the address peers dial to reach it; empty means the bound
// address (which must then have a specific IP).
func ListenMux(bindAddr, advertise string, logger hclog.Logger) (*Mux, error) {
	return ListenMuxTLS(bindAddr, advertise, nil, logger)
}

// ListenMuxTLS is ListenMux speaking mutual TLS on every connection when
// rt is set (LoadTLS; nil is plaintext). cluster.Open calls it.
func ListenMuxTLS(bindAddr, advertise string, rt *TLS, logger hclog.Logger) (*Mux, error) {
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft listener: %w", err)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if err := CheckAdvertisable(advertise); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("cluster: raft advertise address: %w", err)
	}
	return startMux(ln, advertise, rt, logger, defaultHeaderTimeout), nil
}

// NewMux returns a Mux accepting on ln, which it owns from now on. advertise is
// the host:port peers dial to reach ln; it is also sent in the header of every
// connection this Mux dials. A nil logger discards logs.
func NewMux(ln net.Listener, advertise string, logger hclog.Logger) *Mux {
	return newMux(ln, advertise, logger, defaultHeaderTimeout)
}

func newMux(ln net.Listener, advertise string, logger hclog.Logger, headerTimeout time.Duration) *Mux {
	return startMux(ln, advertise, nil, logger, headerTimeout)
}

// startMux returns a Mux accepting on ln, with mutual TLS when rt is set,
// and starts its accept loop.
func startMux(ln net.Listener, advertise string, rt *TLS, logger hclog.Logger, headerTimeout time.Duration) *Mux {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	m := &Mux{
		ln:            ln,
		advertise:     advertise,
		headerTimeout: headerTimeout,
		logger:        logger,
		tls:           rt,
		warns:         NewWarnLimiter(handshakeWarnInterval),
		layers:        make(map[int32]*StreamLayer),
		conns:         make(map[*muxConn]struct{}),
		pending:       make(map[net.Conn]struct{}),
		refused:       make(map[string]bool),
		closeCh:       make(chan struct{}),
	}
	m.faults = &Faults{mux: m, rules: make(map[uint64]Fault)}
	m.deaths = newPeerDeaths(logger)
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

// Addr is the advertised address of the mux.
func (m *Mux) Addr() net.Addr { return muxAddr(m.advertise) }

// Advertise is the address peers dial to reach the mux: every shard's
// raft.ServerAddress of this node.
func (m *Mux) Advertise() string { return m.advertise }

// Deaths is the mux's record of proven-dead peers, which its dials and
// connections feed. Routing reads it.
func (m *Mux) Deaths() *PeerDeaths { return m.deaths }

// SetClusterID sets the cluster id this mux names in the header of every
// connection it dials (from now on), and refuses, on accept, a header that
// names another non-empty cluster id: one log line per peer and id names
// both ids. Headers naming no cluster (version 1, or a peer that has no id
// yet) are accepted. An id longer than 255 bytes is not sent. Any goroutine
// may call it; cluster.Node calls it when it learns its cluster id.
func (m *Mux) SetClusterID(id string) {
	m.mu.Lock()
	m.clusterID = id
	m.mu.Unlock()
}

// ClusterID is the cluster id set by SetClusterID ("" before).
func (m *Mux) ClusterID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clusterID
}

// SetClusterPending makes a mux without a cluster id refuse every accepted
// connection whose header names a cluster: its node does not know yet
// whether it belongs to that cluster, and its Raft, with an empty log, must
// not answer that cluster's vote requests (see ErrEmptyDataDirVoter). It has
// no effect once SetClusterID has set an id. Any goroutine may call it.
func (m *Mux) SetClusterPending(pending bool) {
	m.mu.Lock()
	m.clusterPending = pending
	m.mu.Unlock()
}

// CheckAdvertisable reports whether addr is a host:port peers can dial:
// a port, and a host that is not an unspecified IP. Config validation
// calls it too.
func CheckAdvertisable(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if port == "" || port == "0" {
		return fmt.Errorf("%q has no port", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("%q is not advertisable (unspecified host)", addr)
	}
	return nil
}

// header is the stream header of a connection this mux dials for shard.
func (m *Mux) header(shard int32) []byte {
	adv := []byte(m.advertise)
	if len(adv) > maxHeaderAddr {
		adv = adv[:maxHeaderAddr]
	}
	cid := []byte(m.ClusterID())
	if len(cid) > maxHeaderClusterID {
		cid = nil
	}
	version := headerV1
	size := headerFixed + len(adv)
	if len(cid) > 0 {
		version = headerV2
		size += 1 + len(cid)
	}
	h := make([]byte, size)
	h[0], h[1] = headerMagic, version
	binary.BigEndian.PutUint32(h[2:], uint32(shard))
	binary.BigEndian.PutUint16(h[6:], uint16(len(adv)))
	copy(h[headerFixed:], adv)
	if version == headerV2 {
		h[headerFixed+len(adv)] = byte(len(cid))
		copy(h[headerFixed+len(adv)+1:], cid)
	}
	return h
}

// admits reports whether a connection whose header names peerCluster may
// reach this node's Raft, and logs a refusal once per peer and id. Called
// by the handshake goroutines.
func (m *Mux) admits(peer, peerCluster string, shard int32) bool {
	m.mu.Lock()
	local, pending := m.clusterID, m.clusterPending
	ok := peerCluster == "" || peerCluster == local || (local == "" && !pending)
	key := peer + "\x00" + peerCluster
	first := !ok && !m.refused[key]
	if first {
		m.refused[key] = true
	}
	m.mu.Unlock()
	switch {
	case !first:
	case local != "":
		m.logger.Error("refusing raft connections from a node of another cluster", "peer", peer,
			"peer_cluster_id", peerCluster, "cluster_id", local, "shard", shard)
	default:
		m.logger.Error("refusing raft connections: this node has not confirmed that it belongs to the peer's cluster",
			"peer", peer, "peer_cluster_id", peerCluster, "cluster_id", "none yet", "shard", shard)
	}
	return ok
}

// Fence closes the connections of the mux that level shuts and refuses
// new ones: at FenceInbound those peers dialed (no peer's RPC reaches this
// node's Raft: a vote request would make a Raft whose disk failed store a
// term, and it panics when it cannot), at FenceAll every one, dialed or
// accepted, so a node fenced for its disk neither sends nor answers Raft
// traffic of any shard, nor the admin, append and heartbeat streams.
// FenceNone opens the mux again. Peers see their connections end, as with
// a dead node, but the port still accepts TCP, so their death probes find
// it alive. Called by the disk watch; never blocks on a connection.
func (m *Mux) Fence(level int32) {
	m.fenced.Store(level)
	if level == FenceNone {
		return
	}
	m.mu.Lock()
	conns := make([]*muxConn, 0, len(m.conns))
	for c := range m.conns {
		if c.fencedAt(level) {
			conns = append(conns, c)
		}
	}
	m.mu.Unlock()
	for _, c := range conns {
		c.closeWith(ErrFenced)
	}
}

// fencedAt reports whether fence level shuts c.
func (c *muxConn) fencedAt(level int32) bool {
	return level >= FenceAll || (level >= FenceInbound && c.dir == DirInbound)
}

// Faults returns the fault injector of this mux (for tests).
func (m *Mux) Faults() *Faults { return m.faults }

// Listen registers shard and returns its StreamLayer. Connections for a shard
// without a layer are closed on accept.
func (m *Mux) Listen(shard int32) (*StreamLayer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrMuxClosed
	}
	if _, ok := m.layers[shard]; ok {
		return nil, fmt.Errorf("%w: shard %d", ErrShardRegistered, shard)
	}
	l := &StreamLayer{
		mux:      m,
		shard:    shard,
		acceptCh: make(chan net.Conn),
	}
	l.closed, l.close = context.WithCancel(context.Background())
	m.layers[shard] = l
	return l, nil
}

// Close stops accepting, closes every StreamLayer and every connection, and
// waits for the accept loop. It is idempotent.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.closeCh)
	m.deaths.close()
	layers := make([]*StreamLayer, 0, len(m.layers))
	for _, l := range m.layers {
		layers = append(layers, l)
	}
	conns := make([]*muxConn, 0, len(m.conns))
	for c := range m.conns {
		conns = append(conns, c)
	}
	pending := make([]net.Conn, 0, len(m.pending))
	for c := range m.pending {
		pending = append(pending, c)
	}
	m.mu.Unlock()

	err := m.ln.Close()
	for _, c := range pending {
		_ = c.Close()
	}
	for _, c := range conns {
		c.closeWith(ErrMuxClosed)
	}
	for _, l := range layers {
		_ = l.Close()
	}
	m.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	var delay time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closeCh:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			m.logger.Warn("raft mux accept failed", "error", err, "retry_in", delay)
			select {
			case <-m.closeCh:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			_ = c.Close()
			return
		}
		m.pending[c] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.handshake(c)
	}
}

// handshake runs the TLS handshake of an accepted connection (with mutual
// TLS), reads its header and hands it to its shard's StreamLayer. Runs on a
// goroutine of its own per connection.
func (m *Mux) handshake(raw net.Conn) {
	defer m.wg.Done()
	c := raw
	var err error
	if m.tls != nil {
		// Within the header's timeout too: a peer that sends nothing
		// holds no goroutine for long.
		var tc net.Conn
		if tc, err = m.tls.accept(raw, m.headerTimeout); err == nil {
			c = tc
		}
	}
	var shard int32
	var peer, peerCluster string
	if err == nil {
		shard, peer, peerCluster, err = readHeader(c, m.headerTimeout)
	}

	m.mu.Lock()
	delete(m.pending, raw)
	closed := m.closed
	l := m.layers[shard]
	m.mu.Unlock()

	var handshakeErr *tlsHandshakeError
	switch {
	case closed:
		_ = c.Close()
		return
	case errors.Is(err, io.EOF):
		// Closed before sending a byte: a peer's death probe
		// (PeerDeaths.suspect), or a port scan.
		_ = c.Close()
		return
	case errors.As(err, &handshakeErr), errors.Is(err, errPeerSpeaksTLS):
		// With TLS: a peer without a certificate of the cluster's CA, a
		// plaintext peer (a node without the TLS files), a port scan.
		// Without: a peer with the TLS files.
		m.handshakeFailed("remote", raw.RemoteAddr().String(), err)
		_ = c.Close()
		return
	case err != nil:
		m.logger.Warn("raft mux rejected connection", "remote", c.RemoteAddr().String(), "error", err)
		_ = c.Close()
		return
	case !m.admits(peer, peerCluster, shard):
		_ = c.Close()
		return
	case l == nil:
		m.unknownShard(shard, peer, raw.RemoteAddr().String())
		_ = c.Close()
		return
	}
	if _, err := m.faults.eval(shard, peer, DirInbound); err != nil || m.fenced.Load() != FenceNone {
		m.logger.Debug("raft mux refused connection", "shard", shard, "peer", peer, "fence", m.fenced.Load())
		_ = c.Close()
		return
	}
	mc, err := m.track(c, l, peer, DirInbound)
	if err != nil {
		_ = c.Close()
		return
	}
	m.deaths.alive(peer)
	select {
	case l.acceptCh <- mc:
	case <-l.closed.Done():
		_ = mc.Close()
	case <-m.closeCh:
		_ = mc.Close()
	}
}

// unknownShard warns that peer (as its header names itself), dialing from
// remote, asked for a stream (a shard's Raft, or a hub) this mux does not
// listen on: at most once per remote host and handshakeWarnInterval, with
// the count held back since (so a restore over within the interval logs
// one). A node that restarts refuses its peers' dials until it has
// restored every shard: at a million groups that was 73 warnings in a
// second, one per dial. The connection's handshake goroutine calls it.
func (m *Mux) unknownShard(shard int32, peer, remote string) {
	ok, left := m.warns.Allow("unknown-shard\x00" + hostOf(remote))
	if !ok {
		return
	}
	kv := []any{"shard", shard, "peer", peer}
	if left > 0 {
		kv = append(kv, "suppressed", left)
	}
	m.logger.Warn("raft mux rejected connection for unknown shard", kv...)
}

// readHeader reads the stream header of an accepted connection: the shard,
// the dialer's advertised address and its cluster id ("" in version 1).
func readHeader(c net.Conn, timeout time.Duration) (shard int32, peer, clusterID string, err error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return 0, "", "", err
	}
	var fixed [headerFixed]byte
	if _, err := io.ReadFull(c, fixed[:]); err != nil {
		return 0, "", "", fmt.Errorf("%w: %w", ErrBadHeader, err)
	}
	if fixed[0] == tlsHandshakeRecord && fixed[1] == tlsMajorVersion {
		return 0, "", "", fmt.Errorf("%w: %w", ErrBadHeader, errPeerSpeaksTLS)
	}
	if fixed[0] != headerMagic || (fixed[1] != headerV1 && fixed[1] != headerV2) {
		return 0, "", "", fmt.Errorf("%w: magic/version %#x/%d", ErrBadHeader, fixed[0], fixed[1])
	}
	shard = int32(binary.BigEndian.Uint32(fixed[2:]))
	n := binary.BigEndian.Uint16(fixed[6:])
	if n > maxHeaderAddr {
		return 0, "", "", fmt.Errorf("%w: address length %d", ErrBadHeader, n)
	}
	extra := 0
	if fixed[1] == headerV2 {
		extra = 1
	}
	addr := make([]byte, int(n)+extra)
	if _, err := io.ReadFull(c, addr); err != nil {
		return 0, "", "", fmt.Errorf("%w: %v", ErrBadHeader, err)
	}
	if extra > 0 {
		cid := make([]byte, addr[n])
		if _, err := io.ReadFull(c, cid); err != nil {
			return 0, "", "", fmt.Errorf("%w: %v", ErrBadHeader, err)
		}
		if len(cid) == 0 {
			return 0, "", "", fmt.Errorf("%w: version 2 with an empty cluster id", ErrBadHeader)
		}
		clusterID = string(cid)
		addr = addr[:n]
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return 0, "", "", err
	}
	return shard, string(addr), clusterID, nil
}

// track registers a connection of layer l, unless l or the mux is closed or a
// fault (added meanwhile) drops it.
func (m *Mux) track(c net.Conn, l *StreamLayer, peer string, dir Direction) (*muxConn, error) {
	mc := &muxConn{Conn: c, mux: m, shard: l.shard, peer: peer, dir: dir}
	m.mu.Lock()
	if m.closed || m.layers[l.shard] != l {
		m.mu.Unlock()
		return nil, ErrMuxClosed
	}
	m.conns[mc] = struct{}{}
	m.mu.Unlock()
	// A fault added (or a fence raised) between the caller's check and the
	// registration above did not see this connection: check again.
	if _, err := m.faults.eval(l.shard, peer, dir); err != nil {
		mc.closeWith(err)
		return nil, err
	}
	if mc.fencedAt(m.fenced.Load()) {
		mc.closeWith(ErrFenced)
		return nil, ErrFenced
	}
	return mc, nil
}

func (m *Mux) untrack(c *muxConn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
}

// ConnInfo describes an open connection of a Mux.
type ConnInfo struct {
	Shard int32
	// Peer is the remote node's advertised Raft address.
	Peer string
	Dir  Direction
	// TLSVersion is the connection's TLS version (tls.VersionTLS12, ...);
	// 0 when it is plaintext.
	TLSVersion uint16
}

// Conns lists the open connections of the mux. Any goroutine may call
// it.
func (m *Mux) Conns() []ConnInfo {
	m.mu.Lock()
	conns := make([]*muxConn, 0, len(m.conns))
	for c := range m.conns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	out := make([]ConnInfo, 0, len(conns))
	for _, c := range conns {
		ci := ConnInfo{Shard: c.shard, Peer: c.peer, Dir: c.dir}
		if tc, ok := c.Conn.(*tls.Conn); ok {
			ci.TLSVersion = tc.ConnectionState().Version
		}
		out = append(out, ci)
	}
	return out
}

// connsMatching returns the tracked connections matching f.
func (m *Mux) connsMatching(f *Fault) []*muxConn {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*muxConn
	for c := range m.conns {
		if f.matches(c.shard, c.peer, c.dir) {
			out = append(out, c)
		}
	}
	return out
}

// unregister removes l from the mux and closes every connection of its
// shard.
func (m *Mux) unregister(l *StreamLayer) {
	m.mu.Lock()
	if m.layers[l.shard] == l {
		delete(m.layers, l.shard)
	}
	var conns []*muxConn
	for c := range m.conns {
		if c.shard == l.shard {
			conns = append(conns, c)
		}
	}
	m.mu.Unlock()
	for _, c := range conns {
		c.closeWith(ErrMuxClosed)
	}
}

// StreamLayer is one shard's raft.StreamLayer on a Mux.
type StreamLayer struct {
	mux      *Mux
	shard    int32
	acceptCh chan net.Conn
	// closed ends when Close is called: it cancels dials in progress, and
	// Accept returns.
	closed    context.Context
	close     context.CancelFunc
	closeOnce sync.Once
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// Shard is the shard id this layer carries.
func (l *StreamLayer) Shard() int32 { return l.shard }

// Accept waits for the next connection dialed to this shard.
func (l *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.acceptCh:
		return c, nil
	case <-l.closed.Done():
		return nil, fmt.Errorf("%w: %w", ErrMuxClosed, net.ErrClosed)
	}
}

// Close unregisters the shard from the mux and closes its connections. It is
// idempotent.
func (l *StreamLayer) Close() error {
	l.closeOnce.Do(func() {
		l.close()
		l.mux.unregister(l)
	})
	return nil
}

// Addr is the mux's advertised address.
func (l *StreamLayer) Addr() net.Addr { return l.mux.Addr() }

// Dial connects to the mux at address (with mutual TLS, handshaking within
// timeout) and names this layer's shard in the header.
func (l *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if l.closed.Err() != nil {
		return nil, ErrMuxClosed
	}
	peer := string(address)
	if l.mux.fenced.Load() >= FenceAll {
		return nil, fmt.Errorf("dial %s shard %d: %w", peer, l.shard, ErrFenced)
	}
	delay, err := l.mux.faults.eval(l.shard, peer, DirOutbound)
	if err != nil {
		return nil, fmt.Errorf("dial %s shard %d: %w", peer, l.shard, err)
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	// A dial to a peer whose packets vanish takes the whole timeout;
	// closing the layer ends it at once.
	d := net.Dialer{Timeout: timeout}
	start := time.Now()
	c, err := d.DialContext(l.closed, "tcp", peer)
	if err != nil {
		l.mux.deaths.dialFailed(peer, start, err)
		return nil, err
	}
	if t := l.mux.tls; t != nil {
		tc, err := t.dial(l.closed, c, timeout)
		if err != nil {
			_ = c.Close()
			if l.closed.Err() == nil {
				l.mux.handshakeFailed("peer", peer, err)
			}
			return nil, fmt.Errorf("dial %s shard %d: %w", peer, l.shard, err)
		}
		c = tc
	}
	if timeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := c.Write(l.mux.header(l.shard)); err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Time{})
	mc, err := l.mux.track(c, l, peer, DirOutbound)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dial %s shard %d: %w", peer, l.shard, err)
	}
	l.mux.deaths.alive(peer)
	return mc, nil
}

type muxAddr string

func (a muxAddr) Network() string { return "tcp" }
func (a muxAddr) String() string  { return string(a) }

// muxConn is a tracked Raft connection. Once closed by this side (by raft,
// the mux or a fault), reads report io.EOF, as if the peer had hung up, so
// raft's connection handlers end quietly.
type muxConn struct {
	net.Conn
	mux   *Mux
	shard int32
	peer  string
	dir   Direction

	closed    atomic.Bool
	closeOnce sync.Once
	reason    error // set before closed
}

func (c *muxConn) Read(b []byte) (int, error) {
	if c.fencedAt(c.mux.fenced.Load()) {
		c.closeWith(ErrFenced)
		return 0, io.EOF
	}
	if c.mux.faults.active() {
		if _, err := c.mux.faults.eval(c.shard, c.peer, c.dir); err != nil {
			c.closeWith(err)
			return 0, io.EOF
		}
	}
	n, err := c.Conn.Read(b)
	if err != nil {
		if c.closed.Load() {
			return n, io.EOF
		}
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			// The peer's side closed: a process that died closes its
			// sockets at once. Find out whether it did.
			c.mux.deaths.Suspect(c.peer)
		}
	}
	return n, err
}

func (c *muxConn) Write(b []byte) (int, error) {
	if c.fencedAt(c.mux.fenced.Load()) {
		c.closeWith(ErrFenced)
		return 0, ErrFenced
	}
	if c.mux.faults.active() {
		delay, err := c.mux.faults.eval(c.shard, c.peer, c.dir)
		if err != nil {
			c.closeWith(err)
			return 0, err
		}
		if delay > 0 {
			time.Sleep(delay)
		}
	}
	n, err := c.Conn.Write(b)
	if err != nil && c.closed.Load() {
		return n, c.reason
	}
	return n, err
}

func (c *muxConn) Close() error {
	c.closeWith(net.ErrClosed)
	return nil
}

func (c *muxConn) closeWith(reason error) {
	c.closeOnce.Do(func() {
		c.reason = reason
		c.closed.Store(true)
		c.mux.untrack(c)
		_ = c.Conn.Close()
	})
}
