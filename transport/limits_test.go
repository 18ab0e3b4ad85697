package transport

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialFrom connects a Client to srv from the local IP address ip (any of
// 127.0.0.0/8 works on Linux loopback), closed when the test ends.
func dialFrom(t *testing.T, srv *Server, ip string) *RawClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	nc, err := d.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	cl := &RawClient{nc: nc, br: bufio.NewReader(nc), format: kmsg.NewRequestFormatter()}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func mustServe(t *testing.T, cl *RawClient, what string) {
	t.Helper()
	if _, err := cl.Do(testCtx(t), heartbeat(4, "g", 1)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func mustBeRejected(t *testing.T, cl *RawClient, what string) {
	t.Helper()
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("%s not closed: %v", what, err)
	}
}

const rejectedLine = "connection over a connection limit closed"

// TestConnectionsOverMaxConnectionsAreClosedCountedAndFreedOnClose: with
// max.connections open, a new connection is closed right after accept,
// counted under its limit and logged once however many follow; a slot
// frees when a connection closes.
func TestConnectionsOverMaxConnectionsAreClosedCountedAndFreedOnClose(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, logs := startServer(t, testMux(), func(c *Config) {
		c.MaxConnections = 2
		c.Registerer = reg
	})
	first, second := dial(t, srv), dial(t, srv)
	mustServe(t, first, "first connection")
	mustServe(t, second, "second connection")
	for range 3 {
		mustBeRejected(t, dial(t, srv), "a connection over max.connections")
	}
	waitFor(t, 2*time.Second, "the rejections counted", func() bool {
		return counterValue(t, reg, "kcoord_transport_connections_rejected_total",
			map[string]string{"reason": "max.connections"}) == 3
	})
	if n := counterValue(t, reg, "kcoord_transport_connections_rejected_total",
		map[string]string{"reason": "max.connections.per.ip"}); n != 0 {
		t.Errorf("rejections counted under max.connections.per.ip: %v", n)
	}
	mustContain(t, logs, rejectedLine, "limit=max.connections", "max=2")
	if n := strings.Count(logs.String(), rejectedLine); n != 1 {
		t.Errorf("%d log lines for 3 rejections, want 1", n)
	}
	if n := counterValue(t, reg, "kcoord_transport_open_connections", nil); n != 2 {
		t.Errorf("open_connections = %v, want 2", n)
	}

	_ = first.Close()
	waitFor(t, 2*time.Second, "a free connection slot", func() bool { return srv.limits.openConnections() == 1 })
	mustServe(t, dial(t, srv), "a connection after one closed")
	mustServe(t, second, "the connection that stayed")
}

// TestConnectionsOverMaxConnectionsPerIPAreClosedCountedAndFreedOnClose:
// with max.connections.per.ip open from one address, a new connection from
// it is closed and counted, while other addresses connect; a slot frees
// when a connection from that address closes.
func TestConnectionsOverMaxConnectionsPerIPAreClosedCountedAndFreedOnClose(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, logs := startServer(t, testMux(), func(c *Config) {
		c.MaxConnectionsPerIP = 1
		c.Registerer = reg
	})
	first := dialFrom(t, srv, "127.0.0.1")
	mustServe(t, first, "first connection from 127.0.0.1")
	mustBeRejected(t, dialFrom(t, srv, "127.0.0.1"), "a second connection from 127.0.0.1")
	other := dialFrom(t, srv, "127.0.0.2")
	mustServe(t, other, "a connection from 127.0.0.2")
	waitFor(t, 2*time.Second, "the rejection counted", func() bool {
		return counterValue(t, reg, "kcoord_transport_connections_rejected_total",
			map[string]string{"reason": "max.connections.per.ip"}) == 1
	})
	mustContain(t, logs, rejectedLine, "limit=max.connections.per.ip", "max=1", "ip=127.0.0.1")

	_ = first.Close()
	waitFor(t, 2*time.Second, "a free slot for 127.0.0.1", func() bool { return srv.limits.openConnections() == 1 })
	mustServe(t, dialFrom(t, srv, "127.0.0.1"), "a connection from 127.0.0.1 after its first closed")
}

func TestConnLimitsCountBothLimits(t *testing.T) {
	l := newConnLimits(3, 2)
	for i, tc := range []struct {
		ip   string
		want error
	}{
		{"a", nil}, {"a", nil}, {"a", ErrMaxConnectionsPerIP}, {"b", nil}, {"b", ErrMaxConnections},
	} {
		if err := l.admit(tc.ip); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Fatalf("admit %d (%s) = %v, want %v", i, tc.ip, err, tc.want)
		}
	}
	l.release("a")
	if err := l.admit("c"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	for _, ip := range []string{"a", "b", "c"} {
		l.release(ip)
	}
	if n, m := l.openConnections(), len(l.openPerIP); n != 0 || m != 0 {
		t.Fatalf("after releasing all: %d open, %d addresses tracked", n, m)
	}
}

func TestClientIPCountsMappedIPv4AsIPv4(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1}, "10.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:10.0.0.1"), Port: 2}, "10.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 3, Zone: "eth0"}, "fe80::1%eth0"},
		{&net.UnixAddr{Name: "/tmp/sock", Net: "unix"}, "/tmp/sock"},
	} {
		if got := clientIP(tc.addr); got != tc.want {
			t.Errorf("clientIP(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

func TestLogLimiterWritesOneLinePerIntervalCountingTheRest(t *testing.T) {
	l := logLimiter{interval: time.Second}
	t0 := time.Unix(1000, 0)
	if ok, n := l.allow(t0); !ok || n != 0 {
		t.Fatalf("first event: %v, %d", ok, n)
	}
	for i := range 5 {
		if ok, _ := l.allow(t0.Add(time.Duration(i) * 100 * time.Millisecond)); ok {
			t.Fatalf("event %d within the interval logged", i)
		}
	}
	if ok, n := l.allow(t0.Add(time.Second)); !ok || n != 5 {
		t.Fatalf("first event after the interval: %v, %d held back; want true, 5", ok, n)
	}
}
