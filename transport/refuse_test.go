package transport

import (
	"strings"
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
		mustBeRejected(t, dial(t, srv), "a connection before Open")
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
