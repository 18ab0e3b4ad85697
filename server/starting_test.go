package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/transport"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientsOfAStartingNodeAreRefusedNotKeptWaiting: while a node's
// shards start, its Kafka port is bound; a client that connects then must
// fail at once (and try another broker), not wait unanswered in the accept
// backlog until the start ends. A franz-go member whose heartbeat waited
// there outlived its session when a killed node restarted.
func TestClientsOfAStartingNodeAreRefusedNotKeptWaiting(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	_ = free.Close()

	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseStart := func() { releaseOnce.Do(func() { close(release) }) }
	cfg := TestConfig(t.TempDir())
	cfg.KafkaAddr = addr
	cfg.Raft = func(*cluster.Config) { <-release } // the shards' start, held
	s, err := New(cfg, TestLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- s.Start() }()
	t.Cleanup(func() {
		releaseStart()
		<-started
		_ = s.Shutdown(context.Background())
	})

	// Dial until the listener is bound; each connection must then be
	// refused, well before the held start ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	refused := 0
	for refused < 3 {
		cl, err := transport.Dial(ctx, addr)
		switch {
		case errors.Is(err, syscall.ECONNRESET):
			refused++ // reset as it connected
			continue
		case err != nil:
			if ctx.Err() != nil {
				t.Fatalf("the Kafka port was never bound: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		reqCtx, reqCancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = cl.Do(reqCtx, kmsg.NewPtrApiVersionsRequest())
		reqCancel()
		_ = cl.Close()
		switch {
		case err == nil:
			t.Fatal("a node still starting answered ApiVersions")
		case errors.Is(err, context.DeadlineExceeded):
			t.Fatal("a client of a starting node was kept waiting instead of refused")
		}
		refused++
	}

	releaseStart()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	started <- nil // for the cleanup
	cl, err := transport.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Do(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("ApiVersions once started: %v", err)
	}
}
