package transport

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKgoClient runs franz-go's client against the server: it negotiates
// ApiVersions (first at kgo's newest version, which we refuse, then at v3)
// and issues a flexible Metadata request, proving framing and flexible
// headers match what a real client expects.
func TestKgoClient(t *testing.T) {
	reg := prometheus.NewRegistry()
	var srvAddr atomic.Value
	var metadataVersion atomic.Int32
	metadataVersion.Store(-1)
	mux := NewMux()
	mux.Handle(3, 0, 12, func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		metadataVersion.Store(int32(req.GetVersion()))
		host, portStr, _ := net.SplitHostPort(srvAddr.Load().(string))
		port, _ := strconv.Atoi(portStr)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 1, host, int32(port)
		resp.Brokers = []kmsg.MetadataResponseBroker{b}
		resp.ClusterID = kmsg.StringPtr("kcoord-test")
		resp.ControllerID = 1
		return resp, nil
	})
	srv, _ := startServer(t, mux, func(c *Config) { c.Registerer = reg })
	srvAddr.Store(srv.Addr().String())

	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("metadata through kgo: %v", err)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.ClusterID == nil || *resp.ClusterID != "kcoord-test" {
		t.Fatalf("unexpected metadata response %+v", resp)
	}
	if v := metadataVersion.Load(); v != 12 {
		t.Errorf("kgo sent Metadata v%d, want v12 (our max)", v)
	}
	if n := counterValue(t, reg, "kcoord_transport_requests_total", map[string]string{"api": "ApiVersions", "version": "3"}); n < 1 {
		t.Errorf("no ApiVersions v3 request counted")
	}
	if n := counterValue(t, reg, "kcoord_transport_requests_total", map[string]string{"api": "Metadata", "version": "12"}); n < 1 {
		t.Errorf("no Metadata v12 request counted")
	}
}
