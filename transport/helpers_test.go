package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logBuffer collects log output for assertions, safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startServer serves mux on a loopback port, logging to t.Log and to the
// returned buffer; the server is closed when the test ends.
func startServer(t *testing.T, mux *Mux, adjust func(*Config)) (*Server, *logBuffer) {
	t.Helper()
	logs := new(logBuffer)
	cfg := DefaultConfig()
	cfg.Logger = hclog.New(&hclog.LoggerOptions{
		Name:   "transport",
		Level:  hclog.Trace,
		Output: multiWriter{testLogWriter{t}, logs},
	})
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := StartTestServer(cfg, mux)
	if err != nil {
		t.Fatalf("StartTestServer: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, logs
}

type multiWriter []interface{ Write([]byte) (int, error) }

func (m multiWriter) Write(p []byte) (int, error) {
	for _, w := range m {
		_, _ = w.Write(p)
	}
	return len(p), nil
}

// dial connects a Client to srv, closed when the test ends.
func dial(t *testing.T, srv *Server) *RawClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cl, err := Dial(ctx, srv.Addr().String())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// heartbeat returns a Heartbeat request at version v for group, with the
// generation used as a marker echoed back by echoHeartbeat.
func heartbeat(v int16, group string, marker int32) *kmsg.HeartbeatRequest {
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(v)
	req.Group = group
	req.Generation = marker
	req.MemberID = "m"
	return req
}

// echoHeartbeat answers a Heartbeat with ThrottleMillis set to its
// generation, so tests can tell responses apart.
func echoHeartbeat(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) {
	hb := req.(*kmsg.HeartbeatRequest)
	resp := hb.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ThrottleMillis = hb.Generation
	return resp, nil
}

// rawRequest encodes req with a client id, as a client would.
func rawRequest(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, corr)
}

// frameOf prefixes body with its int32 size.
func frameOf(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func mustContain(t *testing.T, logs *logBuffer, subs ...string) {
	t.Helper()
	waitFor(t, 2*time.Second, "log lines "+strings.Join(subs, ", "), func() bool {
		s := logs.String()
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	})
}
