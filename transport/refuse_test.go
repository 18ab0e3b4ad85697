package transport

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRefuseUntilOpenClosesConnectionsThenServes: before Open, every
// accepted connection is closed, counted under reason "starting" and
// logged once; after Open, connections are served.
func TestRefuseUntilOpenClosesConnectionsThenServes(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, logs := startServer(t, testMux(), func(c *Config) {
		c.RefuseUntilOpen = true
		c.Registerer = reg
	})
	for range 3 {
		mustBeRefused(t, srv)
	}
	waitFor(t, 2*time.Second, "the refusals counted", func() bool {
		return counterValue(t, reg, "kcoord_transport_connections_rejected_total",
			map[string]string{"reason": "starting"}) == 3
	})
	const line = "connection refused: the node is still starting"
	if n := strings.Count(logs.String(), line); n != 1 {
		t.Errorf("%d log lines for 3 refusals, want 1", n)
	}

	srv.Open()
	mustServe(t, dial(t, srv), "a connection after Open")
	if n := counterValue(t, reg, "kcoord_transport_open_connections", nil); n != 1 {
		t.Errorf("open_connections = %v, want 1", n)
	}
}

// mustBeRefused connects to srv and fails unless the connection is reset
// or closed at once: at connect, or at the first read.
func mustBeRefused(t *testing.T, srv *Server) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", srv.Addr().String(), 2*time.Second)
	if err != nil {
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial: %v", err)
		}
		return
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = nc.Read(make([]byte, 1))
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a connection before Open: read %v, want a reset or EOF", err)
	}
}
