package raftnet

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kcoord/kcoord/internal/testkit"
)

func newTestMux(t *testing.T) *Mux {
	t.Helper()
	m, err := ListenMux("127.0.0.1:0", "", testLogger(t).Named("mux"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func listen(t *testing.T, m *Mux, shard int32) *StreamLayer {
	t.Helper()
	l, err := m.Listen(shard)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// acceptAsync accepts one connection on l.
func acceptAsync(l *StreamLayer) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	return ch
}

func recvConn(t *testing.T, ch <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("Accept failed")
		}
		return c
	case <-time.After(2 * time.Second):
		t.Fatal("no connection accepted")
	}
	return nil
}

// exchange writes msg on a, reads it on b, and echoes it back.
func exchange(t *testing.T, a, b net.Conn, msg string) {
	t.Helper()
	_ = a.SetDeadline(time.Now().Add(2 * time.Second))
	_ = b.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(a, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(b).ReadString('\n')
	if err != nil || line != msg+"\n" {
		t.Fatalf("read %q, %v; want %q", line, err, msg)
	}
	if _, err := io.WriteString(b, "re:"+msg+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err = bufio.NewReader(a).ReadString('\n')
	if err != nil || line != "re:"+msg+"\n" {
		t.Fatalf("echo %q, %v", line, err)
	}
}

func TestMuxRoutesShards(t *testing.T) {
	a, b := newTestMux(t), newTestMux(t)
	a1, aMeta := listen(t, a, 1), listen(t, a, MetaShard)
	b1, bMeta := listen(t, b, 1), listen(t, b, MetaShard)
	if _, err := b.Listen(1); !errors.Is(err, ErrShardRegistered) {
		t.Errorf("second Listen(1): %v", err)
	}
	if b1.Addr().String() != b.Addr().String() || b1.Shard() != 1 {
		t.Errorf("layer Addr %v Shard %d", b1.Addr(), b1.Shard())
	}

	acc1, accMeta := acceptAsync(b1), acceptAsync(bMeta)
	c1, err := a1.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cMeta, err := aMeta.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s1, sMeta := recvConn(t, acc1), recvConn(t, accMeta)
	exchange(t, c1, s1, "to shard 1")
	exchange(t, cMeta, sMeta, "to meta")
	// The acceptor knows the dialer by its advertised address.
	if p := s1.(*muxConn).peer; p != a.Addr().String() {
		t.Errorf("inbound peer %q, want %q", p, a.Addr().String())
	}

	// A shard the acceptor does not serve: closed after the header.
	a7 := listen(t, a, 7)
	c7, err := a7.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	testkit.ExpectClosed(t, c7)

	// A connection without a valid header: closed.
	raw, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, _ = io.WriteString(raw, "GET / HTTP/1.1\r\n\r\n")
	testkit.ExpectClosed(t, raw)

	// Closing a layer ends its Accept and its connections, not others'.
	_ = b1.Close()
	_ = b1.Close()
	if _, err := b1.Accept(); !errors.Is(err, ErrMuxClosed) || !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	testkit.ExpectClosed(t, c1)
	exchange(t, cMeta, sMeta, "meta still up")
	// The shard can be registered again.
	b1 = listen(t, b, 1)
	acc1 = acceptAsync(b1)
	c1, err = a1.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, c1, recvConn(t, acc1), "shard 1 again")

	// Closing the mux closes everything; idempotent.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.ExpectClosed(t, cMeta)
	if _, err := b.Listen(3); !errors.Is(err, ErrMuxClosed) {
		t.Errorf("Listen after Close: %v", err)
	}
	if _, err := bMeta.Accept(); !errors.Is(err, ErrMuxClosed) {
		t.Errorf("Accept after mux Close: %v", err)
	}
	// A read on a connection closed locally reports EOF (raft's handlers
	// end quietly).
	if _, err := sMeta.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read on closed conn: %v, want EOF", err)
	}
}

func TestMuxFaults(t *testing.T) {
	a, b := newTestMux(t), newTestMux(t)
	a0, b0 := listen(t, a, 0), listen(t, b, 0)
	a1, b1 := listen(t, a, 1), listen(t, b, 1)
	bAddr := raft.ServerAddress(b.Addr().String())
	dial := func(l *StreamLayer, acc *StreamLayer) (net.Conn, net.Conn) {
		t.Helper()
		ch := acceptAsync(acc)
		c, err := l.Dial(bAddr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c, recvConn(t, ch)
	}
	c0, s0 := dial(a0, b0)
	c1, s1 := dial(a1, b1)
	exchange(t, c0, s0, "before")

	// Drop the peer from a's side: dials fail, open connections close.
	heal := a.Faults().DropPeer(b.Addr().String())
	if _, err := a0.Dial(bAddr, time.Second); !errors.Is(err, ErrFaultInjected) {
		t.Errorf("Dial during DropPeer: %v", err)
	}
	testkit.ExpectClosed(t, s0)
	testkit.ExpectClosed(t, s1)
	if _, err := c0.Write([]byte("x")); err == nil {
		t.Error("write on dropped connection succeeded")
	}
	if a.Faults().Dropped() == 0 {
		t.Error("Dropped() = 0")
	}
	heal()
	heal()
	c0, s0 = dial(a0, b0)
	exchange(t, c0, s0, "healed")

	// Isolate b: a's dials connect but b closes them; b's dials fail.
	heal = b.Faults().Isolate()
	testkit.ExpectClosed(t, c0)
	c, err := a0.Dial(bAddr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	testkit.ExpectClosed(t, c)
	if _, err := b0.Dial(raft.ServerAddress(a.Addr().String()), time.Second); !errors.Is(err, ErrFaultInjected) {
		t.Errorf("dial from isolated node: %v", err)
	}
	heal()

	// A shard-scoped fault leaves other shards alone.
	c0, s0 = dial(a0, b0)
	c1, s1 = dial(a1, b1)
	heal = b.Faults().DropShard(0)
	testkit.ExpectClosed(t, c0)
	exchange(t, c1, s1, "shard 1 unaffected")
	heal()

	// One direction only: b refuses inbound, its own dials still work.
	heal = b.Faults().Add(Fault{Dir: DirInbound, Drop: true})
	testkit.ExpectClosed(t, c1)
	ch := acceptAsync(a1)
	cb, err := b1.Dial(raft.ServerAddress(a.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, cb, recvConn(t, ch), "outbound still fine")
	heal()

	// Delay: writes on matching connections sleep.
	c1, s1 = dial(a1, b1)
	remove := a.Faults().Delay(80 * time.Millisecond)
	start := time.Now()
	exchange(t, c1, s1, "slow")
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("delayed exchange took %v", d)
	}
	remove()
	start = time.Now()
	exchange(t, c1, s1, "fast")
	if d := time.Since(start); d > 60*time.Millisecond {
		t.Errorf("exchange after removing the delay took %v", d)
	}

	// Heal clears everything.
	a.Faults().Isolate()
	a.Faults().DropShard(1)
	a.Faults().Heal()
	c1, s1 = dial(a1, b1)
	exchange(t, c1, s1, "after Heal")
}

func TestReadHeaderRejects(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newMux(ln, ln.Addr().String(), testLogger(t), 100*time.Millisecond)
	t.Cleanup(func() { _ = m.Close() })
	listen(t, m, 0)
	for name, payload := range map[string]string{
		"wrong magic":   "x\x01\x00\x00\x00\x00\x00\x00",
		"wrong version": "k\x09\x00\x00\x00\x00\x00\x00",
		"long address":  "k\x01\x00\x00\x00\x00\xff\xff",
		"silent":        "",
		"short":         "k\x01\x00",
		"v2 empty id":   "k\x02\x00\x00\x00\x00\x00\x00\x00",
		"v2 short id":   "k\x02\x00\x00\x00\x00\x00\x00\x05ab",
	} {
		c, err := net.Dial("tcp", m.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, payload)
		start := time.Now()
		testkit.ExpectClosed(t, c)
		if strings.HasPrefix(name, "s") && time.Since(start) > time.Second {
			t.Errorf("%s: header timeout not applied", name)
		}
		_ = c.Close()
	}
}

// TestMuxRefusesAnotherCluster: a mux with a cluster id drops connections
// whose header names another one (logging it once per peer, with both ids)
// and accepts its own and headers naming none; a pending mux without an id
// drops every header naming a cluster.
func TestMuxRefusesAnotherCluster(t *testing.T) {
	newMux := func(id string) (*Mux, *testkit.LogCapture) {
		logger, logs := testkit.Capture(t)
		m, err := ListenMux("127.0.0.1:0", "", logger.With("node", 0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		m.SetClusterID(id)
		return m, logs
	}
	const idA, idB = "6f1d2c1e-0000-4000-8000-00000000000a", "6f1d2c1e-0000-4000-8000-00000000000b"
	a, _ := newMux(idA)
	b, bLogs := newMux(idB)
	none, _ := newMux("")
	sameB, _ := newMux(idB)
	bLayer := listen(t, b, 1)
	dialB := func(from *Mux) (net.Conn, error) {
		l, err := from.Listen(1)
		if errors.Is(err, ErrShardRegistered) {
			l = from.layers[1]
		} else if err != nil {
			t.Fatal(err)
		}
		return l.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
	}

	for range 2 {
		c, err := dialB(a)
		if err != nil {
			t.Fatal(err)
		}
		testkit.ExpectClosed(t, c)
	}
	eventually(t, 2*time.Second, "the refusal is logged", func() bool {
		return len(bLogs.Lines("refusing raft connections from a node of another cluster", idA, idB, a.Addr().String())) > 0
	})
	if got := len(bLogs.Lines("refusing raft connections")); got != 1 {
		t.Errorf("refusal logged %d times, want once per peer", got)
	}
	for name, from := range map[string]*Mux{"same cluster": sameB, "no cluster id (version 1)": none} {
		acc := acceptAsync(bLayer)
		c, err := dialB(from)
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, c, recvConn(t, acc), name)
		_ = c.Close()
	}

	// Without an id of its own a mux accepts anyone, unless pending.
	open, _ := newMux("")
	openLayer := listen(t, open, 2)
	acc := acceptAsync(openLayer)
	la := listen(t, a, 2)
	c, err := la.Dial(raft.ServerAddress(open.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, c, recvConn(t, acc), "to a node without id")
	open.SetClusterPending(true)
	c, err = la.Dial(raft.ServerAddress(open.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	testkit.ExpectClosed(t, c)
	acc = acceptAsync(openLayer)
	c, err = listen(t, none, 2).Dial(raft.ServerAddress(open.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, c, recvConn(t, acc), "no id to a pending node")
	// Once it has an id, pending no longer matters.
	open.SetClusterID(idA)
	acc = acceptAsync(openLayer)
	c, err = la.Dial(raft.ServerAddress(open.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, c, recvConn(t, acc), "same cluster after the id is set")
}

// TestMuxHeaderVersions: a mux without a cluster id dials the version-1
// header earlier releases read; with one, version 2 carrying it.
func TestMuxHeaderVersions(t *testing.T) {
	m := newTestMux(t)
	h := m.header(MetaShard)
	if h[1] != headerV1 || len(h) != headerFixed+len(m.advertise) {
		t.Fatalf("header without id: version %d, %d bytes", h[1], len(h))
	}
	m.SetClusterID("c1")
	h = m.header(MetaShard)
	want := append(append([]byte{headerMagic, headerV2, 0xff, 0xff, 0xff, 0xff, 0, byte(len(m.advertise))}, m.advertise...), 2, 'c', '1')
	if string(h) != string(want) {
		t.Fatalf("header with id: %q, want %q", h, want)
	}
	client, server := net.Pipe()
	go func() { _, _ = client.Write(h) }()
	shard, peer, cid, err := readHeader(server, time.Second)
	if err != nil || shard != MetaShard || peer != m.advertise || cid != "c1" {
		t.Errorf("readHeader = %d, %q, %q, %v", shard, peer, cid, err)
	}
}

// TestUnknownShardIsWarnedOncePerPeerAndInterval: a peer dialing a shard
// the mux does not listen on (a node restoring its shards after a
// restart refuses many a second) has its connections closed, and is
// logged once per interval, the next warning counting those held back.
func TestUnknownShardIsWarnedOncePerPeerAndInterval(t *testing.T) {
	logger, logs := testkit.Capture(t)
	m, err := ListenMux("127.0.0.1:0", "", logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	listen(t, m, 0)
	peer := newTestMux(t)
	dial := func() {
		t.Helper()
		c, err := net.Dial("tcp", m.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(peer.header(7)); err != nil {
			t.Fatal(err)
		}
		testkit.ExpectClosed(t, c)
	}
	for range 3 {
		dial()
	}
	warned := func() []string { return logs.Lines("[WARN]", "rejected connection for unknown shard", "shard=7") }
	if got := warned(); len(got) != 1 {
		t.Fatalf("3 dials of an unknown shard logged %d warnings, want 1: %q", len(got), got)
	}
	m.warns.Backdate(handshakeWarnInterval)
	dial()
	got := warned()
	if len(got) != 2 || !strings.Contains(got[1], "suppressed=2") {
		t.Fatalf("after the interval: %q, want a second warning counting the 2 held back", got)
	}
}
