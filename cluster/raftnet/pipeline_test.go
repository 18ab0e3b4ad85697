package raftnet

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// pipeNode is one node of a pipeline test: a Mux on loopback, its hubs
// (the append hub only) and shard 0's Transport with PipelineAppends.
type pipeNode struct {
	mux   *Mux
	hubs  *Hubs
	trans *Transport
}

// newPipeNode starts a pipeNode whose requests and answers time out
// after timeout. Everything is closed at cleanup, if not before.
func newPipeNode(t *testing.T, id raft.ServerID, timeout time.Duration) *pipeNode {
	t.Helper()
	mux, err := ListenMux("127.0.0.1:0", "", testLogger(t).Named(string(id)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mux.Close() })
	hubs, err := StartHubs(mux, HubConfig{
		LocalID: id, HeartbeatTimeout: time.Second, LeaderHeartbeatTimeout: time.Second,
		TransportTimeout: timeout, Logger: testLogger(t).Named(string(id)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hubs.Close)
	trans, err := NewTransport(mux, hubs, 0, TransportConfig{MaxPool: 1, Timeout: timeout, Logger: testLogger(t), PipelineAppends: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trans.Close() })
	return &pipeNode{mux: mux, hubs: hubs, trans: trans}
}

// kill closes the node as a process that died would: its transport, hubs
// and port.
func (n *pipeNode) kill() {
	_ = n.trans.Close()
	n.hubs.Close()
	_ = n.mux.Close()
}

// serveAppends plays the follower's Raft on n: it answers each
// AppendEntries its transport receives with answer, on a goroutine of its
// own after delay (zero: in turn, as raft does), until the test ends.
func (n *pipeNode) serveAppends(t *testing.T, delay func() time.Duration, answer func(*raft.AppendEntriesRequest) *raft.AppendEntriesResponse) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(done); wg.Wait() })
	wg.Go(func() {
		for {
			select {
			case rpc := <-n.trans.Consumer():
				req, ok := rpc.Command.(*raft.AppendEntriesRequest)
				if !ok {
					rpc.Respond(nil, errors.New("not an AppendEntries"))
					continue
				}
				d := delay()
				if d == 0 {
					rpc.Respond(answer(req), nil)
					continue
				}
				wg.Go(func() {
					select {
					case <-time.After(d):
						rpc.Respond(answer(req), nil)
					case <-done:
					}
				})
			case <-done:
				return
			}
		}
	})
}

// holdAppends plays a follower's Raft that takes each AppendEntries and
// never answers; held counts those taken.
func (n *pipeNode) holdAppends(t *testing.T) (held <-chan struct{}) {
	ch := make(chan struct{}, 100)
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(done); wg.Wait() })
	wg.Go(func() {
		for {
			select {
			case <-n.trans.Consumer():
				ch <- struct{}{}
			case <-done:
				return
			}
		}
	})
	return ch
}

// openPipeline opens shard 0's pipeline from leader to follower.
func openPipeline(t *testing.T, leader, follower *pipeNode) raft.AppendPipeline {
	t.Helper()
	p, err := leader.trans.AppendEntriesPipeline("2", raft.ServerAddress(follower.mux.Advertise()))
	if err != nil {
		t.Fatalf("no pipeline: %v", err)
	}
	return p
}

// pipeReq is the AppendEntries of term 1 with one entry after prev.
func pipeReq(prev uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("1"), Addr: []byte("leader")},
		Term:      1, Leader: []byte("leader"), PrevLogEntry: prev, PrevLogTerm: 1, LeaderCommitIndex: prev,
		Entries: []*raft.Log{{Index: prev + 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")}},
	}
}

// pipelineGoroutines counts the goroutines running a pipeline's code.
func pipelineGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "raftnet.(*appendPipeline)") {
			n++
		}
	}
	return n
}

// closePromptly closes p, failing the test if Close does not return in
// a few seconds, and checks that no goroutine of a pipeline is left.
func closePromptly(t *testing.T, p raft.AppendPipeline) {
	t.Helper()
	closed := make(chan struct{})
	go func() { _ = p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	eventually(t, 5*time.Second, "no pipeline goroutine left", func() bool { return pipelineGoroutines() == 0 })
}

// sendAll sends n requests on p from one goroutine, as raft's send loop
// does, until one fails, and reports how many were sent; it fails the
// test if that takes longer than within.
func sendAll(t *testing.T, p raft.AppendPipeline, n int, within time.Duration) (sent int, err error) {
	t.Helper()
	type result struct {
		sent int
		err  error
	}
	out := make(chan result, 1)
	go func() {
		for i := range n {
			if _, err := p.AppendEntries(pipeReq(uint64(i)), new(raft.AppendEntriesResponse)); err != nil {
				out <- result{i, err}
				return
			}
		}
		out <- result{n, nil}
	}()
	select {
	case r := <-out:
		return r.sent, r.err
	case <-time.After(within):
		t.Fatalf("sending %d AppendEntries did not end within %v: the send loop is parked", n, within)
		return 0, nil
	}
}

// The deadlock of hashicorp/raft v1.8.0's pipeline (package doc): once the
// follower refuses an AppendEntries or answers a newer term, raft's
// decoder reads no more futures, while its send loop goes on sending.
// Here the send loop's AppendEntries fails soon after (raft then closes
// the pipeline and replicates one RPC at a time) instead of parking, long
// before the transport timeout; Close returns, and no goroutine of the
// pipeline is left. With nobody reading Consumer from the start, a send
// waits at most the transport timeout.
func TestPipelineDoesNotParkAfterRaftStopsReading(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		answer  func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse
		reads   bool // the decoder reads until the answer that stops it
	}{
		{"a refusal", time.Minute, func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
			// The third request and those after are refused (a log
			// mismatch that the follower's log does not explain).
			return &raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry, Success: req.PrevLogEntry < 2}
		}, true},
		{"a newer term", time.Minute, func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
			if req.PrevLogEntry < 2 {
				return &raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry + 1, Success: true}
			}
			return &raft.AppendEntriesResponse{Term: req.Term + 1, LastLog: req.PrevLogEntry}
		}, true},
		{"nobody reading", 300 * time.Millisecond, func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
			return &raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry + 1, Success: true}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader, follower := newPipeNode(t, "1", tc.timeout), newPipeNode(t, "2", tc.timeout)
			follower.serveAppends(t, func() time.Duration { return 0 }, tc.answer)
			p := openPipeline(t, leader, follower)
			decoded := make(chan int, 1)
			if tc.reads {
				go func() { // raft's pipelineDecode
					n := 0
					for f := range p.Consumer() {
						n++
						if resp := f.Response(); resp.Term > f.Request().Term || !resp.Success {
							break
						}
					}
					decoded <- n
				}()
			}
			sent, err := sendAll(t, p, 10*pipelineMaxInflight, 20*time.Second)
			if err == nil {
				t.Fatalf("all %d AppendEntries went out with nobody reading their answers", sent)
			}
			t.Logf("%d sent, then: %v", sent, err)
			if tc.reads && !errors.Is(err, errPipelineStopped) {
				t.Fatalf("the send after the answer that stopped the decoder: %v, want errPipelineStopped", err)
			}
			if _, err := p.AppendEntries(pipeReq(0), new(raft.AppendEntriesResponse)); err == nil {
				t.Fatal("an AppendEntries after the pipeline was over went out")
			}
			closePromptly(t, p)
			if tc.reads {
				if n := <-decoded; n != 3 {
					t.Fatalf("the decoder read %d futures, want 3 (the third stopped it)", n)
				}
			}
		})
	}
}

// Futures come out of Consumer in the order their AppendEntries were
// made, each with its own answer, although the follower answers them in
// any order and four goroutines send at once; none is lost.
func TestPipelineHandsFuturesOnInSendOrder(t *testing.T) {
	leader, follower := newPipeNode(t, "1", time.Minute), newPipeNode(t, "2", time.Minute)
	follower.serveAppends(t, func() time.Duration { return time.Duration(rand.IntN(2000)) * time.Microsecond },
		func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
			return &raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry + 1000, Success: true}
		})
	p := openPipeline(t, leader, follower)
	var wg sync.WaitGroup
	defer func() {
		closePromptly(t, p) // frees senders still waiting for a slot
		wg.Wait()
	}()

	const senders, each = 4, 100
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				// Sender g's i-th request: its previous entry names both.
				if _, err := p.AppendEntries(pipeReq(uint64(g*each+i)), new(raft.AppendEntriesResponse)); err != nil {
					t.Errorf("sender %d request %d: %v", g, i, err)
					return
				}
			}
		})
	}
	next := make([]int, senders)
	timeout := time.After(30 * time.Second)
	for got := 0; got < senders*each; got++ {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatalf("future %d: %v", got, err)
			}
			prev := f.Request().PrevLogEntry
			g, i := int(prev)/each, int(prev)%each
			if i != next[g] {
				t.Fatalf("sender %d's request %d came out before its request %d", g, i, next[g])
			}
			next[g]++
			if resp := f.Response(); !resp.Success || resp.LastLog != prev+1000 {
				t.Fatalf("request %d's future holds the answer %+v", prev, resp)
			}
		case <-timeout:
			t.Fatalf("%d of %d futures came out", got, senders*each)
		}
	}
}

// A follower that dies with AppendEntries in flight completes every one
// of their futures with an error, well before the transport timeout: the
// hub's connection broke. None is handed to Raft (which would count it as
// contact from the follower), the next AppendEntries fails, and Close
// returns. A fault that drops the peer's traffic, and a follower that
// answers nothing within the timeout, end the same way.
func TestPipelineFailsEveryFutureOfAPeerThatDies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		kill    func(leader, follower *pipeNode)
	}{
		{"process gone", time.Minute, func(_, follower *pipeNode) { follower.kill() }},
		{"fault dropping the peer", time.Minute, func(leader, follower *pipeNode) {
			leader.mux.Faults().DropPeer(follower.mux.Advertise())
		}},
		{"no answer in time", 300 * time.Millisecond, func(_, _ *pipeNode) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader, follower := newPipeNode(t, "1", tc.timeout), newPipeNode(t, "2", tc.timeout)
			held := follower.holdAppends(t)
			p := openPipeline(t, leader, follower)
			const inFlight = 5
			futures := make([]raft.AppendFuture, inFlight)
			for i := range futures {
				f, err := p.AppendEntries(pipeReq(uint64(i)), new(raft.AppendEntriesResponse))
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				futures[i] = f
			}
			for i := range inFlight {
				select {
				case <-held:
				case <-time.After(10 * time.Second):
					t.Fatalf("the follower got %d of %d requests", i, inFlight)
				}
			}
			tc.kill(leader, follower)
			for i, f := range futures {
				errc := make(chan error, 1)
				go func() { errc <- f.Error() }()
				select {
				case err := <-errc:
					if err == nil {
						t.Fatalf("future %d completed without an error", i)
					}
					if i == 0 {
						t.Logf("future 0: %v", err)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("future %d did not complete", i)
				}
			}
			select {
			case f := <-p.Consumer():
				t.Fatalf("a failed future was handed to Raft: %+v", f.Request())
			default:
			}
			if _, err := p.AppendEntries(pipeReq(inFlight), new(raft.AppendEntriesResponse)); err == nil {
				t.Fatal("an AppendEntries after the failure went out")
			}
			closePromptly(t, p)
		})
	}
}
