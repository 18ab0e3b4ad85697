package transport

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSaramaBroker opens a sarama broker connection (ApiVersions v3
// handshake with client software name and version) and issues Metadata,
// a second real client's view of the framing.
func TestSaramaBroker(t *testing.T) {
	var metadataVersion atomic.Int32
	mux := NewMux()
	mux.Handle(3, 0, 12, func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		metadataVersion.Store(int32(req.GetVersion()))
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.ControllerID = 1
		return resp, nil
	})
	reg := prometheus.NewRegistry()
	srv, _ := startServer(t, mux, func(c *Config) { c.Registerer = reg })
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.ClientID = "sarama-test"
	b := sarama.NewBroker(srv.Addr().String())
	if err := b.Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	resp, err := b.GetMetadata(sarama.NewMetadataRequest(cfg.Version, nil))
	if err != nil {
		t.Fatalf("GetMetadata: %v", err)
	}
	if resp.ControllerID != 1 {
		t.Fatalf("controller id %d", resp.ControllerID)
	}
	if v := metadataVersion.Load(); v < 9 {
		t.Errorf("sarama sent Metadata v%d, want a flexible version", v)
	}
	if n := counterValue(t, reg, "kcoord_transport_requests_total", map[string]string{"api": "ApiVersions", "version": "3"}); n != 1 {
		t.Errorf("ApiVersions v3 requests = %v, want 1", n)
	}
}
