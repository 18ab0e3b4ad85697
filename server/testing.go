package server

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestConfig returns a single-node configuration for tests: loopback ports
// picked by the kernel, data under dir, few shards and short group timers so
// rebalances finish quickly.
func TestConfig(dir string) Config {
	c := DefaultConfig()
	c.DataDir = dir
	c.KafkaAddr, c.RaftAddr, c.GossipAddr, c.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", ""
	c.OffsetsTopicNumPartitions = 8
	c.GroupInitialRebalanceDelay = 100 * time.Millisecond
	c.GroupMinSessionTimeout = 100 * time.Millisecond
	return c
}

// TestLogger returns an hclog logger writing to t.Log, silenced when the
// test ends (servers may log from goroutines that outlive it briefly).
func TestLogger(t testing.TB) hclog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() { w.stopped.Store(true) })
	return hclog.New(&hclog.LoggerOptions{Name: "kcoord", Level: hclog.Info, Output: w})
}

// StartTestServer starts a server with cfg, waits until it is ready and
// shuts it down when the test ends. Use TestConfig(t.TempDir()) for cfg.
func StartTestServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg, TestLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		_ = s.Shutdown(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Logf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("server not ready: %v", err)
	}
	return s
}

type testLogWriter struct {
	t       testing.TB
	stopped atomic.Bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	if !w.stopped.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

var _ io.Writer = (*testLogWriter)(nil)
