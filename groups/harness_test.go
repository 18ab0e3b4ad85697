package groups

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kcoord/kcoord/fsm"
)

// newTestCoordinator returns an active coordinator over a MemLog with short
// timers; mutate adjusts the config first.
func newTestCoordinator(t *testing.T, mutate func(*Config)) (*Coordinator, *MemLog) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.InitialRebalanceDelay = 50 * time.Millisecond
	cfg.MinSessionTimeout = time.Millisecond
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Debug})
	if mutate != nil {
		mutate(&cfg)
	}
	log := NewMemLog()
	c, err := NewCoordinator(cfg, 0, log, log.FSM)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Activate(log.Epoch()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Deactivate)
	return c, log
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func protocols(names ...string) []fsm.Protocol {
	out := make([]fsm.Protocol, len(names))
	for i, n := range names {
		out[i] = fsm.Protocol{Name: n, Metadata: []byte("meta-" + n)}
	}
	return out
}

func joinReq(group, member string, ps ...string) JoinRequest {
	if len(ps) == 0 {
		ps = []string{"range"}
	}
	return JoinRequest{
		GroupID: group, MemberID: member, ClientID: "client", ClientHost: "/127.0.0.1",
		ProtocolType: "consumer", Protocols: protocols(ps...),
		SessionTimeoutMs: 10000, RebalanceTimeoutMs: 2000,
	}
}

// joinAsync runs Join on its own goroutine, as a connection would.
func joinAsync(c *Coordinator, req JoinRequest) <-chan JoinResult {
	ch := make(chan JoinResult, 1)
	go func() { ch <- c.Join(context.Background(), req) }()
	return ch
}

func syncAsync(c *Coordinator, req SyncRequest) <-chan SyncResult {
	ch := make(chan SyncResult, 1)
	go func() { ch <- c.Sync(context.Background(), req) }()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for an answer")
	}
	panic("unreachable")
}

// assertPending checks that a request is still waiting.
func assertPending[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("expected the request to wait, got %+v", v)
	case <-time.After(50 * time.Millisecond):
	}
}

func wantErr(t *testing.T, got, want error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Fatalf("error %v, want %v", got, want)
	}
}

// stableGroup brings members (by client id) into a Stable group and returns
// their member ids in join order and the generation.
func stableGroup(t *testing.T, c *Coordinator, group string, n int) ([]string, int32) {
	t.Helper()
	var chans []<-chan JoinResult
	for i := 0; i < n; i++ {
		chans = append(chans, joinAsync(c, joinReq(group, "")))
		time.Sleep(5 * time.Millisecond)
	}
	var ids []string
	var leader string
	var gen int32
	for _, ch := range chans {
		r := recv(t, ch)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ids = append(ids, r.MemberID)
		leader, gen = r.Leader, r.Generation
	}
	assign := map[string][]byte{}
	for _, id := range ids {
		assign[id] = []byte("assignment-of-" + id)
	}
	var syncs []<-chan SyncResult
	for _, id := range ids {
		req := SyncRequest{GroupID: group, MemberID: id, Generation: gen}
		if id == leader {
			req.Assignments = assign
		}
		syncs = append(syncs, syncAsync(c, req))
	}
	for i, ch := range syncs {
		r := recv(t, ch)
		if r.Err != nil || string(r.Assignment) != "assignment-of-"+ids[i] {
			t.Fatalf("sync of %s: %+v", ids[i], r)
		}
	}
	return ids, gen
}

// commitOffsets is Coordinator.Commit's outcome for the whole commit.
func commitOffsets(c *Coordinator, req CommitRequest) error {
	_, err := c.Commit(context.Background(), req)
	return err
}
