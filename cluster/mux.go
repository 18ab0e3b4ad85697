package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Stream header. Every Raft connection through a Mux starts with
//
//	byte  0     headerMagic ('k')
//	byte  1     headerVersion (1)
//	bytes 2-5   shard id, int32 big endian (MetaShard is -1)
//	bytes 6-7   length n of the dialer's advertised Raft address, uint16 big endian
//	bytes 8-    the dialer's advertised Raft address (n <= maxHeaderAddr bytes)
//
// followed by raft's NetworkTransport protocol. The dialer's address lets the
// acceptor attribute the connection to a peer (logs, Faults); it is not
// authenticated.
const (
	headerMagic   byte = 'k'
	headerVersion byte = 1
	headerFixed        = 8
	maxHeaderAddr      = 1024
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
type Mux struct {
	ln            net.Listener
	advertise     string
	headerTimeout time.Duration
	header        func(shard int32) []byte
	logger        hclog.Logger
	faults        *Faults

	mu      sync.Mutex
	closed  bool
	layers  map[int32]*StreamLayer
	conns   map[*muxConn]struct{}
	pending map[net.Conn]struct{} // accepted, header not read yet

	closeCh chan struct{}
	wg      sync.WaitGroup // accept loop and handshakes
}

// ListenMux binds bindAddr and returns a Mux serving it. advertise is the
// address peers dial to reach it; empty means the bound address (which must
// then have a specific IP).
func ListenMux(bindAddr, advertise string, logger hclog.Logger) (*Mux, error) {
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft listener: %w", err)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if err := checkAdvertisable(advertise); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("cluster: raft advertise address: %w", err)
	}
	return NewMux(ln, advertise, logger), nil
}

// NewMux returns a Mux accepting on ln, which it owns from now on. advertise is
// the host:port peers dial to reach ln; it is also sent in the header of every
// connection this Mux dials. A nil logger discards logs.
func NewMux(ln net.Listener, advertise string, logger hclog.Logger) *Mux {
	return newMux(ln, advertise, logger, defaultHeaderTimeout)
}

func newMux(ln net.Listener, advertise string, logger hclog.Logger, headerTimeout time.Duration) *Mux {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	m := &Mux{
		ln:            ln,
		advertise:     advertise,
		headerTimeout: headerTimeout,
		logger:        logger,
		layers:        make(map[int32]*StreamLayer),
		conns:         make(map[*muxConn]struct{}),
		pending:       make(map[net.Conn]struct{}),
		closeCh:       make(chan struct{}),
	}
	m.faults = &Faults{mux: m, rules: make(map[uint64]Fault)}
	adv := []byte(advertise)
	if len(adv) > maxHeaderAddr {
		adv = adv[:maxHeaderAddr]
	}
	m.header = func(shard int32) []byte {
		h := make([]byte, headerFixed+len(adv))
		h[0], h[1] = headerMagic, headerVersion
		binary.BigEndian.PutUint32(h[2:], uint32(shard))
		binary.BigEndian.PutUint16(h[6:], uint16(len(adv)))
		copy(h[headerFixed:], adv)
		return h
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

// Addr is the advertised address of the mux.
func (m *Mux) Addr() net.Addr { return muxAddr(m.advertise) }

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
		closeCh:  make(chan struct{}),
	}
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

// handshake reads the header of an accepted connection and hands it to its
// shard's StreamLayer.
func (m *Mux) handshake(c net.Conn) {
	defer m.wg.Done()
	shard, peer, err := readHeader(c, m.headerTimeout)

	m.mu.Lock()
	delete(m.pending, c)
	closed := m.closed
	l := m.layers[shard]
	m.mu.Unlock()

	switch {
	case closed:
		_ = c.Close()
		return
	case err != nil:
		m.logger.Warn("raft mux rejected connection", "remote", c.RemoteAddr().String(), "error", err)
		_ = c.Close()
		return
	case l == nil:
		m.logger.Warn("raft mux rejected connection for unknown shard", "shard", shard, "peer", peer)
		_ = c.Close()
		return
	}
	if _, err := m.faults.eval(shard, peer, DirInbound); err != nil {
		m.logger.Debug("raft mux refused connection by fault", "shard", shard, "peer", peer)
		_ = c.Close()
		return
	}
	mc, err := m.track(c, l, peer, DirInbound)
	if err != nil {
		_ = c.Close()
		return
	}
	select {
	case l.acceptCh <- mc:
	case <-l.closeCh:
		_ = mc.Close()
	case <-m.closeCh:
		_ = mc.Close()
	}
}

func readHeader(c net.Conn, timeout time.Duration) (shard int32, peer string, err error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return 0, "", err
	}
	var fixed [headerFixed]byte
	if _, err := io.ReadFull(c, fixed[:]); err != nil {
		return 0, "", fmt.Errorf("%w: %v", ErrBadHeader, err)
	}
	if fixed[0] != headerMagic || fixed[1] != headerVersion {
		return 0, "", fmt.Errorf("%w: magic/version %#x/%d", ErrBadHeader, fixed[0], fixed[1])
	}
	shard = int32(binary.BigEndian.Uint32(fixed[2:]))
	n := binary.BigEndian.Uint16(fixed[6:])
	if n > maxHeaderAddr {
		return 0, "", fmt.Errorf("%w: address length %d", ErrBadHeader, n)
	}
	addr := make([]byte, n)
	if _, err := io.ReadFull(c, addr); err != nil {
		return 0, "", fmt.Errorf("%w: %v", ErrBadHeader, err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return 0, "", err
	}
	return shard, string(addr), nil
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
	// A fault added between the caller's check and the registration above
	// did not see this connection: check again.
	if _, err := m.faults.eval(l.shard, peer, dir); err != nil {
		mc.closeWith(err)
		return nil, err
	}
	return mc, nil
}

func (m *Mux) untrack(c *muxConn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
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
	mux       *Mux
	shard     int32
	acceptCh  chan net.Conn
	closeCh   chan struct{}
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
	case <-l.closeCh:
		return nil, fmt.Errorf("%w: %w", ErrMuxClosed, net.ErrClosed)
	}
}

// Close unregisters the shard from the mux and closes its connections. It is
// idempotent.
func (l *StreamLayer) Close() error {
	l.closeOnce.Do(func() {
		close(l.closeCh)
		l.mux.unregister(l)
	})
	return nil
}

// Addr is the mux's advertised address.
func (l *StreamLayer) Addr() net.Addr { return l.mux.Addr() }

// Dial connects to the mux at address and names this layer's shard in the
// header.
func (l *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-l.closeCh:
		return nil, ErrMuxClosed
	default:
	}
	peer := string(address)
	delay, err := l.mux.faults.eval(l.shard, peer, DirOutbound)
	if err != nil {
		return nil, fmt.Errorf("dial %s shard %d: %w", peer, l.shard, err)
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", peer)
	if err != nil {
		return nil, err
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
	if c.mux.faults.active() {
		if _, err := c.mux.faults.eval(c.shard, c.peer, c.dir); err != nil {
			c.closeWith(err)
			return 0, io.EOF
		}
	}
	n, err := c.Conn.Read(b)
	if err != nil && c.closed.Load() {
		return n, io.EOF
	}
	return n, err
}

func (c *muxConn) Write(b []byte) (int, error) {
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
