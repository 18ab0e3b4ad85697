package transport

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// counterValue sums the counter, gauge or histogram sample count of family
// name over the series whose labels include want.
func counterValue(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, _ := startServer(t, testMux(), func(c *Config) { c.Registerer = reg })
	cl := dial(t, srv)
	if _, err := cl.Do(testCtx(t), heartbeat(4, "g", 1)); err != nil {
		t.Fatal(err)
	}
	if n := counterValue(t, reg, "kcoord_transport_requests_total", map[string]string{"api": "Heartbeat", "version": "4"}); n != 1 {
		t.Errorf("requests_total = %v, want 1", n)
	}
	if n := counterValue(t, reg, "kcoord_transport_request_duration_seconds", map[string]string{"api": "Heartbeat"}); n != 1 {
		t.Errorf("latency samples = %v, want 1", n)
	}
	if n := counterValue(t, reg, "kcoord_transport_open_connections", nil); n != 1 {
		t.Errorf("open_connections = %v, want 1", n)
	}
	// A request at a version not served closes the connection and counts.
	cl2 := dial(t, srv)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(0)
	if err := cl2.WriteRaw(rawRequest(req, 0)); err != nil {
		t.Fatal(err)
	}
	if err := cl2.WaitClosed(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "error counted", func() bool {
		return counterValue(t, reg, "kcoord_transport_request_errors_total",
			map[string]string{"api": "Metadata", "reason": reasonUnsupportedVersion}) == 1
	})
	waitFor(t, 2*time.Second, "open connections back to 1", func() bool {
		return counterValue(t, reg, "kcoord_transport_open_connections", nil) == 1
	})

	// Close unregisters, so a new server can use the same registry.
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv2, err := NewServer(Config{Addr: "127.0.0.1:0", Registerer: reg}, testMux())
	if err != nil {
		t.Fatalf("second server on the same registry: %v", err)
	}
	// While it lives, a third cannot register.
	if _, err := NewServer(Config{Addr: "127.0.0.1:0", Registerer: reg}, testMux()); err == nil {
		t.Errorf("third server registered the same collectors")
	}
	_ = srv2.Close()
}
