package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// holdMux serves Heartbeat and JoinGroup. A request for group "hold"
// blocks until release yields (or its ctx ends: then it fails), "fail"
// blocks until fail yields and then fails, "error" fails at once and
// "panic" panics; anything else is answered.
func holdMux(release, fail <-chan struct{}) *Mux {
	wait := func(ctx context.Context, ch <-chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	act := func(ctx context.Context, group string) error {
		switch group {
		case "hold":
			return wait(ctx, release)
		case "fail":
			if err := wait(ctx, fail); err != nil {
				return err
			}
			return errors.New("failing after the hold")
		case "error":
			return errors.New("handler says no")
		case "panic":
			panic("boom")
		}
		return nil
	}
	m := NewMux()
	m.Handle(12, 0, 4, func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		if err := act(ctx, req.(*kmsg.HeartbeatRequest).Group); err != nil {
			return nil, err
		}
		return echoHeartbeat(ctx, rc, req)
	})
	m.Handle(11, 0, 0, func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		if err := act(ctx, req.(*kmsg.JoinGroupRequest).Group); err != nil {
			return nil, err
		}
		return answerJoinGroup(ctx, rc, req)
	})
	return m
}

// sentFrameBytes is the size Client.Send's frame for req counts against
// the pool (Client sends a null client id).
func sentFrameBytes(req kmsg.Request, corr int32) int64 {
	return int64(len(kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)) - 4)
}

// smallPool configures a 1 MiB pool that counts every frame, for tests
// that hold and wait for its bytes with small requests.
func smallPool(c *Config) {
	c.MaxRequestBytes, c.QueuedMaxRequestBytes = 1<<20, 1<<20
	c.PoolExemptFrameBytes = 1 // every frame counts
}

func poolHolds(t *testing.T, srv *Server, wantBytes int64, what string) {
	t.Helper()
	waitFor(t, 2*time.Second, what, func() bool { return srv.pool.usedBytes.Load() == wantBytes })
}

// TestQueuedRequestBytesHeldUntilResponseWritten: a request holds its
// frame's bytes while it is handled and while it waits behind another
// (read-ahead), and gives them back once its response is written.
func TestQueuedRequestBytesHeldUntilResponseWritten(t *testing.T) {
	release := make(chan struct{})
	srv, _ := startServer(t, holdMux(release, nil), smallPool)
	cl := dial(t, srv)
	reqs := []*kmsg.HeartbeatRequest{heartbeat(4, "hold", 0), heartbeat(4, "ok", 1), heartbeat(4, "ok", 2)}
	var want int64
	for i, req := range reqs {
		if _, err := cl.Send(req); err != nil {
			t.Fatal(err)
		}
		want += sentFrameBytes(req, int32(i))
	}
	poolHolds(t, srv, want, "the handled and the read-ahead requests to hold their bytes")
	close(release)
	for _, req := range reqs {
		if _, err := cl.Recv(testCtx(t), req); err != nil {
			t.Fatal(err)
		}
	}
	poolHolds(t, srv, 0, "the answered requests to give their bytes back")
}

// TestQueuedRequestBytesReturnedOnEveryFailure: whatever ends a request
// or its connection, its bytes go back to the pool, and the server serves
// on.
func TestQueuedRequestBytesReturnedOnEveryFailure(t *testing.T) {
	fail := make(chan struct{})
	srv, _ := startServer(t, holdMux(nil, fail), smallPool)
	const partialFrameBytes = 512 << 10
	cases := []struct {
		name string
		// send writes on cl and returns the bytes the server then holds
		// until the failure, or 0 when the failure follows at once.
		send func(t *testing.T, cl *RawClient) int64
		// fail ends the request or connection; nil means the server
		// closes the connection on its own.
		fail func(cl *RawClient)
	}{
		{"handler error", func(t *testing.T, cl *RawClient) int64 { mustSend(t, cl, heartbeat(4, "error", 0)); return 0 }, nil},
		{"handler panic", func(t *testing.T, cl *RawClient) int64 { mustSend(t, cl, heartbeat(4, "panic", 0)); return 0 }, nil},
		{"handler error with requests read ahead", func(t *testing.T, cl *RawClient) int64 {
			n := mustSend(t, cl, heartbeat(4, "fail", 0))
			n += mustSend(t, cl, heartbeat(4, "ok", 1))
			return n + mustSend(t, cl, heartbeat(4, "ok", 2))
		}, nil},
		{"client gone while its requests are handled and queued", func(t *testing.T, cl *RawClient) int64 {
			return mustSend(t, cl, heartbeat(4, "hold", 0)) + mustSend(t, cl, heartbeat(4, "ok", 1))
		}, func(cl *RawClient) { _ = cl.Close() }},
		{"client gone in the middle of a frame", func(t *testing.T, cl *RawClient) int64 {
			head, _, _ := largeJoinGroup("g", partialFrameBytes, 0)
			if err := cl.WriteRaw(append(head, zeros[:1000]...)); err != nil {
				t.Fatal(err)
			}
			return partialFrameBytes // held from the size prefix on
		}, func(cl *RawClient) { _ = cl.Close() }},
		{"oversized frame", func(t *testing.T, cl *RawClient) int64 {
			if err := cl.WriteRaw(binary.BigEndian.AppendUint32(nil, 1<<20+1)); err != nil {
				t.Fatal(err)
			}
			return 0
		}, nil},
		{"malformed body", func(t *testing.T, cl *RawClient) int64 {
			raw := rawRequest(heartbeat(0, "group", 0), 0)
			binary.BigEndian.PutUint32(raw, uint32(len(raw)-4-3))
			if err := cl.WriteRaw(raw[:len(raw)-3]); err != nil {
				t.Fatal(err)
			}
			return 0
		}, nil},
		{"unknown api key", func(t *testing.T, cl *RawClient) int64 {
			if err := cl.WriteRaw(frameOf([]byte{0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff})); err != nil {
				t.Fatal(err)
			}
			return 0
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := dial(t, srv)
			held := tc.send(t, cl)
			if tc.name == "handler error with requests read ahead" {
				poolHolds(t, srv, held, "the failing request and those read ahead to hold their bytes")
				fail <- struct{}{} // lets the "fail" handler fail
			} else if held > 0 {
				poolHolds(t, srv, held, "the request's bytes to be held")
			}
			if tc.fail != nil {
				tc.fail(cl)
			} else if err := cl.WaitClosed(testCtx(t)); err != nil {
				t.Fatalf("connection not closed: %v", err)
			}
			poolHolds(t, srv, 0, "every byte back in the pool")
			if _, err := dial(t, srv).Do(testCtx(t), heartbeat(4, "ok", 9)); err != nil {
				t.Fatalf("server no longer serving: %v", err)
			}
		})
	}
}

func mustSend(t *testing.T, cl *RawClient, req kmsg.Request) int64 {
	t.Helper()
	corr, err := cl.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	return sentFrameBytes(req, corr)
}

// TestIdleTimeoutMidFrameReturnsQueuedBytes: a client that stops sending
// in the middle of a frame is closed by the idle timeout, and the frame's
// bytes go back.
func TestIdleTimeoutMidFrameReturnsQueuedBytes(t *testing.T) {
	srv, _ := startServer(t, holdMux(nil, nil), func(c *Config) {
		c.MaxRequestBytes, c.QueuedMaxRequestBytes = 1<<20, 1<<20
		c.PoolExemptFrameBytes = 1 // every frame counts
		c.IdleTimeout = 100 * time.Millisecond
	})
	cl := dial(t, srv)
	head, _, _ := largeJoinGroup("g", 1000, 0)
	if err := cl.WriteRaw(head); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("stalled connection not closed: %v", err)
	}
	poolHolds(t, srv, 0, "every byte back in the pool")
}

// TestConnectionWaitingForQueuedBytesReadsNothingWhileOthersProceed: a
// frame that does not fit the pool stops its connection; a connection
// whose frame fits is served meanwhile; the waiting frame is read and
// answered once bytes come back.
func TestConnectionWaitingForQueuedBytesReadsNothingWhileOthersProceed(t *testing.T) {
	release := make(chan struct{})
	reg := prometheus.NewRegistry()
	srv, _ := startServer(t, holdMux(release, nil), func(c *Config) {
		c.MaxRequestBytes, c.QueuedMaxRequestBytes = 1<<20, 1<<20
		c.PoolExemptFrameBytes = 1 // every frame counts
		c.Registerer = reg
	})
	holder := dial(t, srv)
	holdReq, err := sendLargeJoinGroup(holder, "hold", 700<<10, 0)
	if err != nil {
		t.Fatal(err)
	}
	poolHolds(t, srv, 700<<10, "the held frame")

	waiter := dial(t, srv)
	_, _, waitReq := largeJoinGroup("g", 500<<10, 0)
	go func() { _, _ = sendLargeJoinGroup(waiter, "g", 500<<10, 0) }() // may block: the server stops reading
	waitFor(t, 2*time.Second, "a connection waiting for the pool", func() bool {
		return counterValue(t, reg, "kcoord_transport_memory_pool_waiting_connections", nil) == 1
	})

	// 300 KiB are free: a heartbeat fits and passes.
	if _, err := dial(t, srv).Do(testCtx(t), heartbeat(4, "ok", 1)); err != nil {
		t.Fatalf("a fitting request waited behind one that does not fit: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := counterValue(t, reg, "kcoord_transport_requests_total", map[string]string{"api": "JoinGroup"}); n != 0 {
		t.Fatalf("%v JoinGroups handled while the pool cannot hold the waiting one", n)
	}
	if got := srv.pool.usedBytes.Load(); got != 700<<10 {
		t.Fatalf("pool holds %d bytes while a frame waits, want %d", got, 700<<10)
	}

	close(release)
	if _, err := holder.Recv(testCtx(t), holdReq); err != nil {
		t.Fatal(err)
	}
	resp, err := waiter.Recv(testCtx(t), waitReq)
	if err != nil {
		t.Fatalf("waiting frame not answered once the pool had room: %v", err)
	}
	if !strings.HasPrefix(resp.(*kmsg.JoinGroupResponse).MemberID, "metadata-bytes-") {
		t.Fatalf("response %+v", resp)
	}
	poolHolds(t, srv, 0, "every byte back in the pool")
	if s := counterValue(t, reg, "kcoord_transport_memory_pool_wait_seconds_total", nil); s <= 0 {
		t.Errorf("wait seconds = %v, want > 0", s)
	}
}

// waitingForPool starts a connection whose frame of frameBytes must wait
// for the pool, and waits until it does.
func waitingForPool(t *testing.T, srv *Server, cl *RawClient, frameBytes int) {
	t.Helper()
	waiting := srv.pool.waitingReaders.Load()
	go func() { _, _ = sendLargeJoinGroup(cl, "g", frameBytes, 1) }() // blocks once the server stops reading
	waitFor(t, 2*time.Second, "a connection waiting for the pool", func() bool {
		return srv.pool.waitingReaders.Load() == waiting+1
	})
}

// TestWaitForQueuedBytesEndsWhenItsConnectionCloses: a connection whose
// handler fails while its reader waits for the pool is closed at once,
// without waiting for the pool, and holds nothing.
func TestWaitForQueuedBytesEndsWhenItsConnectionCloses(t *testing.T) {
	release, fail := make(chan struct{}), make(chan struct{})
	defer close(release)
	srv, _ := startServer(t, holdMux(release, fail), smallPool)
	holder := dial(t, srv)
	if _, err := sendLargeJoinGroup(holder, "hold", 700<<10, 0); err != nil {
		t.Fatal(err)
	}
	poolHolds(t, srv, 700<<10, "the held frame")

	waiter := dial(t, srv)
	failBytes := mustSend(t, waiter, heartbeat(4, "fail", 0))
	poolHolds(t, srv, 700<<10+failBytes, "the failing request")
	waitingForPool(t, srv, waiter, 500<<10)

	close(fail)
	if err := waiter.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("connection waiting for the pool not closed when its handler failed: %v", err)
	}
	waitFor(t, 2*time.Second, "no connection waiting", func() bool { return srv.pool.waitingReaders.Load() == 0 })
	poolHolds(t, srv, 700<<10, "only the held frame")
}

// TestWaitForQueuedBytesEndsWhenServerCloses: Close does not wait for the
// pool: it ends the waits, and nothing stays held.
func TestWaitForQueuedBytesEndsWhenServerCloses(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv, logs := startServer(t, holdMux(release, nil), smallPool)
	holder := dial(t, srv)
	if _, err := sendLargeJoinGroup(holder, "hold", 700<<10, 0); err != nil {
		t.Fatal(err)
	}
	poolHolds(t, srv, 700<<10, "the held frame")
	for range 3 {
		waitingForPool(t, srv, dial(t, srv), 500<<10)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close waited for the pool")
	}
	if n, used := srv.pool.waitingReaders.Load(), srv.pool.usedBytes.Load(); n != 0 || used != 0 {
		t.Fatalf("after Close: %d waiting, %d bytes held", n, used)
	}
	if s := logs.String(); strings.Contains(s, "[WARN]") {
		t.Errorf("shutdown logged a warning:\n%s", s)
	}
}

// startServerWithPool is startServer with a pool of poolBytes whatever
// Validate allows, for the frames no valid Config lets through. The pool
// metrics keep reading the pool NewServer made.
func startServerWithPool(t *testing.T, mux *Mux, poolBytes int64, adjust func(*Config)) (*Server, *logBuffer) {
	t.Helper()
	logs := new(logBuffer)
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "transport", Level: hclog.Trace, Output: multiWriter{testLogWriter{t}, logs}})
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := NewServer(cfg, mux)
	if err != nil {
		t.Fatal(err)
	}
	srv.pool = newMemoryPool(poolBytes) // before Serve starts a connection
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv, logs
}

// TestFrameLargerThanQueuedMaxRequestBytesClosesWithOneLogLine: a frame
// the whole pool could not hold closes its connection; a flood of them
// writes one log line.
func TestFrameLargerThanQueuedMaxRequestBytesClosesWithOneLogLine(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, logs := startServerWithPool(t, holdMux(nil, nil), 64<<10, func(c *Config) {
		c.MaxRequestBytes = 1 << 20
		c.Registerer = reg
	})
	const conns = 5
	for range conns {
		cl := dial(t, srv)
		head, _, _ := largeJoinGroup("g", 100<<10, 0)
		if err := cl.WriteRaw(head); err != nil {
			t.Fatal(err)
		}
		if err := cl.WaitClosed(testCtx(t)); err != nil {
			t.Fatalf("connection not closed: %v", err)
		}
	}
	waitFor(t, 2*time.Second, "the closes counted", func() bool {
		return counterValue(t, reg, "kcoord_transport_request_errors_total",
			map[string]string{"reason": reasonFrameExceedsPool}) == conns
	})
	mustContain(t, logs, "frame larger than queued.max.request.bytes", "reason="+reasonFrameExceedsPool)
	if n := strings.Count(logs.String(), "frame larger than queued.max.request.bytes"); n != 1 {
		t.Errorf("%d log lines for %d such frames, want 1", n, conns)
	}
	if used := srv.pool.usedBytes.Load(); used != 0 {
		t.Errorf("%d bytes held", used)
	}
	if _, err := dial(t, srv).Do(testCtx(t), heartbeat(4, "ok", 1)); err != nil {
		t.Fatalf("a frame that fits: %v", err)
	}
}

// TestAnnouncedLargeFramesDoNotStopSmallRequests: with a pool of twice the
// largest frame (the defaults' shape: 200 MiB and 100 MiB), two
// connections that announce largest frames and then send nothing hold the
// whole pool, yet heartbeats on other connections are still
// answered, since frames up to PoolExemptFrameBytes are read outside the
// pool; a large frame still waits for the pool.
func TestAnnouncedLargeFramesDoNotStopSmallRequests(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv, _ := startServer(t, holdMux(release, nil), func(c *Config) {
		c.MaxRequestBytes, c.QueuedMaxRequestBytes = 8<<20, 16<<20 // the default shape, smaller
	})
	maxBytes := srv.cfg.MaxRequestBytes
	for range 2 {
		stalled := dial(t, srv)
		var prefix [5]byte
		binary.BigEndian.PutUint32(prefix[:4], uint32(maxBytes))
		if err := stalled.WriteRaw(prefix[:]); err != nil { // a size and one byte of body
			t.Fatal(err)
		}
	}
	poolHolds(t, srv, 2*int64(maxBytes), "two announced frames holding the pool")

	waitingForPool(t, srv, dial(t, srv), 1<<20)
	live := dial(t, srv)
	for i := range 3 {
		resp, err := live.Do(testCtx(t), heartbeat(4, "g", int32(i)))
		if err != nil {
			t.Fatalf("heartbeat %d while the pool is held: %v", i, err)
		}
		if resp.(*kmsg.HeartbeatResponse).ErrorCode != 0 {
			t.Fatalf("heartbeat %d: %+v", i, resp)
		}
	}
	if got := srv.pool.usedBytes.Load(); got != 2*int64(maxBytes) {
		t.Fatalf("pool holds %d bytes, want the two announced frames' %d", got, 2*int64(maxBytes))
	}
}

// TestAnnouncedSmallFramesGetMemoryOnlyAsTheyArrive: frames read outside
// the pool are allocated as their bytes arrive, so connections that
// announce frames of almost PoolExemptFrameBytes and send nothing more
// cost the server a few KiB each, not the frames they announced.
func TestAnnouncedSmallFramesGetMemoryOnlyAsTheyArrive(t *testing.T) {
	srv, _ := startServer(t, holdMux(nil, nil), nil)
	const conns = 200
	announced := int(srv.cfg.PoolExemptFrameBytes)
	clients := make([]*RawClient, conns)
	for i := range clients {
		clients[i] = dial(t, srv)
	}
	// Every connection is accepted and its reader waits for a size prefix.
	time.Sleep(200 * time.Millisecond)
	before := heapAfterGC()
	for _, cl := range clients {
		var prefix [5]byte
		binary.BigEndian.PutUint32(prefix[:4], uint32(announced))
		if err := cl.WriteRaw(prefix[:]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the readers take their prefixes
	grown := heapAfterGC() - before
	t.Logf("%d connections announcing %d-byte frames grew the heap by %d bytes", conns, announced, grown)
	if limit := int64(conns * announced / 4); grown > limit {
		t.Fatalf("announced frames took %d bytes of heap, more than a quarter of the %d announced", grown, conns*announced)
	}
	if got := srv.pool.usedBytes.Load(); got != 0 {
		t.Fatalf("small frames hold %d bytes of the pool", got)
	}
}

func heapAfterGC() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
