package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPipelineOrdering pipelines a slow request then a fast one on one
// connection: the fast one is handled only after the slow one, and the
// responses come back in order with their correlation ids.
func TestPipelineOrdering(t *testing.T) {
	var mu sync.Mutex
	var events []string
	mux := NewMux()
	mux.Handle(12, 0, 4, func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		hb := req.(*kmsg.HeartbeatRequest)
		mu.Lock()
		events = append(events, "start "+hb.Group)
		mu.Unlock()
		if hb.Group == "slow" {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		mu.Lock()
		events = append(events, "end "+hb.Group)
		mu.Unlock()
		return echoHeartbeat(ctx, rc, req)
	})
	srv, _ := startServer(t, mux, nil)
	cl := dial(t, srv)
	slow, fast := heartbeat(4, "slow", 1), heartbeat(4, "fast", 2)
	c1, err := cl.Send(slow)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := cl.Send(fast)
	if err != nil {
		t.Fatal(err)
	}
	if c1 != 0 || c2 != 1 {
		t.Fatalf("correlation ids %d, %d", c1, c2)
	}
	r1, err := cl.Recv(testCtx(t), slow) // Recv checks the correlation id
	if err != nil {
		t.Fatal(err)
	}
	r2, err := cl.Recv(testCtx(t), fast)
	if err != nil {
		t.Fatal(err)
	}
	if m1, m2 := r1.(*kmsg.HeartbeatResponse).ThrottleMillis, r2.(*kmsg.HeartbeatResponse).ThrottleMillis; m1 != 1 || m2 != 2 {
		t.Fatalf("responses out of order: markers %d, %d", m1, m2)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"start slow", "end slow", "start fast", "end fast"}
	if len(events) != 4 || events[0] != want[0] || events[1] != want[1] || events[2] != want[2] || events[3] != want[3] {
		t.Fatalf("handling order %v, want %v", events, want)
	}
}

// TestManyPipelined sends more requests than MaxInFlightRequests while the
// first blocks; all are answered, in order, once it unblocks.
func TestManyPipelined(t *testing.T) {
	release := make(chan struct{})
	var handled atomic.Int32
	mux := NewMux()
	mux.Handle(12, 0, 4, func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		if req.(*kmsg.HeartbeatRequest).Generation == 0 {
			<-release
		}
		handled.Add(1)
		return echoHeartbeat(ctx, rc, req)
	})
	srv, _ := startServer(t, mux, func(c *Config) { c.MaxInFlightRequests = 2 })
	cl := dial(t, srv)
	const n = 20
	reqs := make([]*kmsg.HeartbeatRequest, n)
	for i := range reqs {
		reqs[i] = heartbeat(int16(i%5), "g", int32(i))
		if _, err := cl.Send(reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if h := handled.Load(); h != 0 {
		t.Fatalf("%d requests handled while the first blocks", h)
	}
	close(release)
	for i, req := range reqs {
		resp, err := cl.Recv(testCtx(t), req)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if req.Version >= 1 && resp.(*kmsg.HeartbeatResponse).ThrottleMillis != int32(i) {
			t.Fatalf("response %d carries marker %d", i, resp.(*kmsg.HeartbeatResponse).ThrottleMillis)
		}
	}
}

// TestClientCloseCancelsHandler: the reader notices the client hanging up
// while a handler blocks, and cancels the handler's ctx.
func TestClientCloseCancelsHandler(t *testing.T) {
	started, cancelled := make(chan struct{}), make(chan struct{})
	mux := NewMux()
	mux.Handle(12, 0, 4, func(ctx context.Context, _ *RequestContext, _ kmsg.Request) (kmsg.Response, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	})
	srv, _ := startServer(t, mux, nil)
	cl := dial(t, srv)
	if _, err := cl.Send(heartbeat(0, "g", 0)); err != nil {
		t.Fatal(err)
	}
	<-started
	_ = cl.Close()
	select {
	case <-cancelled:
	case <-time.After(2 * time.Second):
		t.Fatal("handler ctx not cancelled after the client closed")
	}
}

func TestRequestContext(t *testing.T) {
	rcs := make(chan RequestContext, 4)
	mux := NewMux()
	mux.Handle(12, 0, 4, func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		rcs <- *rc
		return echoHeartbeat(ctx, rc, req)
	})
	srv, _ := startServer(t, mux, nil)
	a, b := dial(t, srv), dial(t, srv)
	a.SetClientID("client-a")
	for _, cl := range []*RawClient{a, b} {
		if _, err := cl.Do(testCtx(t), heartbeat(3, "g", 0)); err != nil {
			t.Fatal(err)
		}
	}
	ra, rb := <-rcs, <-rcs
	if ra.ClientID != "client-a" || rb.ClientID != "" {
		t.Errorf("client ids %q, %q", ra.ClientID, rb.ClientID)
	}
	if ra.ClientHost != "/127.0.0.1" {
		t.Errorf("ClientHost %q", ra.ClientHost)
	}
	if ra.ConnID == 0 || ra.ConnID == rb.ConnID {
		t.Errorf("conn ids %d, %d", ra.ConnID, rb.ConnID)
	}
	if ra.RemoteAddr.String() != a.LocalAddr().String() {
		t.Errorf("RemoteAddr %v, want %v", ra.RemoteAddr, a.LocalAddr())
	}
}

// TestFlexibleHeaderTags sends a flexible request whose header carries a
// tagged field, which the server must skip.
func TestFlexibleHeaderTags(t *testing.T) {
	srv, _ := startServer(t, testMux(), nil)
	cl := dial(t, srv)
	req := heartbeat(4, "g", 9)
	var body []byte
	body = binary.BigEndian.AppendUint16(body, 12)
	body = binary.BigEndian.AppendUint16(body, 4)
	body = binary.BigEndian.AppendUint32(body, 0)
	body = binary.BigEndian.AppendUint16(body, 2)
	body = append(body, "id"...)
	body = append(body, 1, 5, 2, 'a', 'b') // one tag: 5, two bytes
	body = req.AppendTo(body)
	if err := cl.WriteRaw(frameOf(body)); err != nil {
		t.Fatal(err)
	}
	cl.pending = append(cl.pending, 0)
	resp, err := cl.Recv(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.(*kmsg.HeartbeatResponse).ThrottleMillis; m != 9 {
		t.Fatalf("marker %d", m)
	}
}

// TestProtocolErrorsClose covers every frame that must close its
// connection with a warn line, the server serving on.
func TestProtocolErrorsClose(t *testing.T) {
	hb0 := rawRequest(heartbeat(0, "group", 0), 0)
	truncatedBody := append([]byte(nil), hb0...)
	binary.BigEndian.PutUint32(truncatedBody, uint32(len(hb0)-4-3))
	truncatedBody = truncatedBody[:len(hb0)-3]
	badClientID := frameOf([]byte{0, 12, 0, 0, 0, 0, 0, 1, 0, 50, 'x'})
	badTags := frameOf([]byte{0, 12, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 3, 1, 9})
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(3)
	metadataV3 := kmsg.NewPtrMetadataRequest()
	metadataV3.SetVersion(3)

	cases := []struct {
		name   string
		raw    []byte
		reason string
	}{
		{"oversized", []byte{0, 0x10, 0, 1, 0, 12, 0, 0}, reasonFrameTooLarge},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xff}, reasonFrameTooSmall},
		{"too small", []byte{0, 0, 0, 3, 1, 2, 3}, reasonFrameTooSmall},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), reasonFrameTooLarge},
		{"unknown key", frameOf([]byte{0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff}), reasonUnknownKey},
		{"key not served", rawRequest(produce, 1), reasonUnknownKey},
		{"version not served", rawRequest(metadataV3, 1), reasonUnsupportedVersion},
		{"version above kmsg", frameOf([]byte{0, 12, 0, 99, 0, 0, 0, 1, 0xff, 0xff}), reasonUnsupportedVersion},
		{"truncated body", truncatedBody, reasonMalformedBody},
		{"bad client id", badClientID, reasonMalformedHeader},
		{"bad header tags", badTags, reasonMalformedHeader},
	}
	srv, logs := startServer(t, testMux(), func(c *Config) { c.MaxRequestBytes = 1 << 20 })
	healthy := dial(t, srv)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := dial(t, srv)
			if err := cl.WriteRaw(tc.raw); err != nil {
				t.Fatal(err)
			}
			if err := cl.WaitClosed(testCtx(t)); err != nil {
				t.Fatalf("connection not closed: %v", err)
			}
			mustContain(t, logs, "[WARN]", "reason="+tc.reason)
		})
	}
	if _, err := healthy.Do(testCtx(t), heartbeat(1, "g", 1)); err != nil {
		t.Fatalf("other connection broken: %v", err)
	}
}

// TestTruncatedFrameThenHangUp: a frame cut short by the client closing its
// side ends the connection quietly.
func TestTruncatedFrameThenHangUp(t *testing.T) {
	srv, _ := startServer(t, testMux(), nil)
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	raw := rawRequest(heartbeat(0, "group", 0), 0)
	if _, err := nc.Write(raw[:len(raw)-5]); err != nil {
		t.Fatal(err)
	}
	_ = nc.(*net.TCPConn).CloseWrite()
	_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	var b [1]byte
	if n, err := nc.Read(b[:]); n != 0 || err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read %d, %v; want the server to close", n, err)
	}
	cl := dial(t, srv)
	if _, err := cl.Do(testCtx(t), heartbeat(0, "g", 0)); err != nil {
		t.Fatal(err)
	}
}

// TestHandlerFailuresClose: a handler panicking, failing, or returning a
// nil or mistyped response closes only its connection.
func TestHandlerFailuresClose(t *testing.T) {
	mux := NewMux()
	mux.Handle(12, 0, 4, func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		switch req.(*kmsg.HeartbeatRequest).Group {
		case "panic":
			panic("boom")
		case "error":
			return nil, errors.New("handler says no")
		case "nil":
			return nil, nil
		case "typed nil":
			return (*kmsg.HeartbeatResponse)(nil), nil
		case "wrong type":
			return kmsg.NewPtrMetadataResponse(), nil
		}
		return echoHeartbeat(ctx, rc, req)
	})
	srv, logs := startServer(t, mux, nil)
	other := dial(t, srv)
	for _, tc := range []struct{ group, reason, level string }{
		{"panic", reasonHandlerPanic, "[ERROR]"},
		{"error", reasonHandlerError, "[WARN]"},
		{"nil", reasonBadResponse, "[WARN]"},
		{"typed nil", reasonBadResponse, "[ERROR]"},
		{"wrong type", reasonBadResponse, "[WARN]"},
	} {
		t.Run(tc.group, func(t *testing.T) {
			cl := dial(t, srv)
			// A request answered before the failing one still gets its response.
			if _, err := cl.Do(testCtx(t), heartbeat(2, "ok", 0)); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Send(heartbeat(2, tc.group, 0)); err != nil {
				t.Fatal(err)
			}
			if err := cl.WaitClosed(testCtx(t)); err != nil {
				t.Fatalf("connection not closed: %v", err)
			}
			mustContain(t, logs, tc.level, "reason="+tc.reason)
			if _, err := other.Do(testCtx(t), heartbeat(2, "ok", 1)); err != nil {
				t.Fatalf("other connection broken: %v", err)
			}
		})
	}
	mustContain(t, logs, "stack=", "panic: boom")
	fresh := dial(t, srv)
	if _, err := fresh.Do(testCtx(t), heartbeat(2, "ok", 1)); err != nil {
		t.Fatalf("new connection: %v", err)
	}
}

// TestCloseCancelsBlockedHandler: Close cancels a blocked handler's ctx and
// returns once it has.
func TestCloseCancelsBlockedHandler(t *testing.T) {
	started := make(chan struct{})
	var sawCancel atomic.Bool
	mux := NewMux()
	mux.Handle(12, 0, 4, func(ctx context.Context, _ *RequestContext, _ kmsg.Request) (kmsg.Response, error) {
		close(started)
		<-ctx.Done()
		sawCancel.Store(true)
		return nil, ctx.Err()
	})
	srv, logs := startServer(t, mux, nil)
	cl := dial(t, srv)
	if _, err := cl.Send(heartbeat(0, "g", 0)); err != nil {
		t.Fatal(err)
	}
	<-started
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return")
	}
	if !sawCancel.Load() {
		t.Fatal("handler ctx not cancelled")
	}
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatalf("Serve after Close = %v, want nil", err)
	}
	if err := srv.Listen(); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Listen after Close = %v", err)
	}
	if s := logs.String(); strings.Contains(s, "[WARN]") {
		t.Errorf("shutdown logged a warning:\n%s", s)
	}
}

func TestServeWithoutListen(t *testing.T) {
	srv, err := NewServer(Config{Addr: "127.0.0.1:0", Logger: NewTestLogger(t, "transport")}, testMux())
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	waitFor(t, 2*time.Second, "listener", func() bool { return srv.Addr() != nil })
	if err := srv.Listen(); !errors.Is(err, ErrAlreadyListening) {
		t.Errorf("second Listen = %v", err)
	}
	cl := dial(t, srv)
	if _, err := cl.Do(testCtx(t), heartbeat(0, "g", 0)); err != nil {
		t.Fatal(err)
	}
	_ = srv.Close()
	if err := <-errc; err != nil {
		t.Fatalf("Serve = %v", err)
	}
}

// TestIdleTimeout: an idle connection is closed; one whose handler blocks
// longer than the timeout is not, nor is one that just got a response.
func TestIdleTimeout(t *testing.T) {
	mux := NewMux()
	mux.Handle(12, 0, 4, func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		if req.(*kmsg.HeartbeatRequest).Group == "slow" {
			time.Sleep(300 * time.Millisecond)
		}
		return echoHeartbeat(ctx, rc, req)
	})
	srv, logs := startServer(t, mux, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
	idle := dial(t, srv)
	busy := dial(t, srv)
	start := time.Now()
	if _, err := busy.Do(testCtx(t), heartbeat(0, "slow", 0)); err != nil {
		t.Fatalf("slow request on a busy connection: %v", err)
	}
	// Just answered: still usable although the socket read nothing for 300ms.
	if _, err := busy.Do(testCtx(t), heartbeat(0, "fast", 0)); err != nil {
		t.Fatalf("request after a slow one: %v", err)
	}
	if err := idle.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("idle connection: %v", err)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Fatalf("closed too early")
	}
	mustContain(t, logs, "closing idle connection")
	if err := busy.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("busy connection never idled out: %v", err)
	}
}
