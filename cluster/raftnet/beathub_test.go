package raftnet

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kcoord/kcoord/internal/testkit"
)

// A frame that fails pauses frames to that peer, longer after each
// failure, and makes beat answer nothing, so the shard sends its
// heartbeat itself.
func TestBeatHubPausesAfterAFailedFrame(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := NewMux(ln, ln.Addr().String(), testLogger(t))
	defer mux.Close()
	h, err := newBeatHub(mux, "1", 200*time.Millisecond, 40*time.Millisecond, 200*time.Millisecond, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()

	target := raft.ServerAddress(testkit.RefusingAddr(t)) // dials are refused

	r := singleLeader(t)
	m := h.add(0, newHeartbeats(40*time.Millisecond, 200*time.Millisecond), newMatchTracker())
	m.raft.Store(r)
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(mux.advertise)}, Term: r.CurrentTerm()}
	var resp raft.AppendEntriesResponse
	// A process pause (a loaded machine) forbids reuse for a while, and
	// beat then sends no frame at all: wait until frames may go.
	eventually(t, 10*time.Second, "answers to be reusable (no recent process pause)", m.beats.mayReuse)
	if h.beat(m, 0, "2", target, req, &resp) {
		t.Fatal("a heartbeat to a dead peer was answered")
	}
	p := h.sender(target)
	p.mu.Lock()
	first := time.Until(p.retryAt)
	p.mu.Unlock()
	if first <= 0 || first > h.backoff {
		t.Fatalf("pause after one failure %v, want up to %v", first, h.backoff)
	}
	if h.beat(m, 0, "2", target, req, &resp) {
		t.Fatal("answered while frames are paused")
	}
	if n := h.frames.Load(); n != 1 {
		t.Fatalf("%d frames sent, want 1: the second heartbeat came during the pause", n)
	}
	p.mu.Lock()
	p.retryAt = time.Time{}
	p.mu.Unlock()
	h.beat(m, 0, "2", target, req, &resp)
	p.mu.Lock()
	second := time.Until(p.retryAt)
	p.mu.Unlock()
	if second <= h.backoff {
		t.Fatalf("pause after two failures %v, want over %v", second, h.backoff)
	}
}

// Two hubs exchange a frame: the receiver's Raft gets the heartbeat
// through its heartbeat handler, with the leader's id, address and term,
// and its answer comes back as the sender's. A shard whose Raft no longer
// leads is carried no more.
func TestBeatHubDeliversAFrameOnlyForALeader(t *testing.T) {
	sender, smux := newTestHub(t, "1")
	receiver, rmux := newTestHub(t, "2")

	r := singleLeader(t)
	m := sender.add(5, newHeartbeats(time.Second, testHubTimeout), newMatchTracker())
	m.raft.Store(r)
	got := make(chan *raft.AppendEntriesRequest, 10)
	handler := func(rpc raft.RPC) {
		req := rpc.Command.(*raft.AppendEntriesRequest)
		got <- req
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: 42, Success: true}, nil)
	}
	receiver.add(5, newHeartbeats(time.Second, testHubTimeout), newMatchTracker()).handler.Store(&handler)

	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(smux.advertise)}, Term: r.CurrentTerm()}
	var resp raft.AppendEntriesResponse
	if !sender.beat(m, 5, "2", raft.ServerAddress(rmux.advertise), req, &resp) {
		t.Fatal("the heartbeat was not answered in a frame")
	}
	if !resp.Success || resp.LastLog != 42 || resp.Term != req.Term {
		t.Fatalf("answer %+v, want the receiver's", resp)
	}
	delivered := <-got
	if delivered.Term != req.Term || string(delivered.ID) != "1" || string(delivered.Addr) != smux.advertise || !isHeartbeat(delivered) {
		t.Fatalf("the receiver's Raft got %+v", delivered)
	}
	if !m.beats.reused("2", req, &resp) {
		t.Fatal("the frame's answer did not become reusable")
	}
	if _, at := m.match.get("2", req.Term); at.IsZero() {
		t.Fatal("the frame's answer did not count as the follower's contact")
	}

	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	m.beats.answered("2", time.Now(), req, nil, errors.New("forget the last answer"))
	if sender.beat(m, 5, "2", raft.ServerAddress(rmux.advertise), req, &resp) {
		t.Fatal("a shard whose Raft no longer leads was answered in a frame")
	}
	select {
	case req := <-got:
		t.Fatalf("the receiver got a heartbeat of a Raft that no longer leads: %+v", req)
	default:
	}
}

// A heartbeat whose frame is out when a leadership confirmation begins is
// not answered from that frame: the round may count only heartbeats sent
// after it began, so the caller sends it again one by one.
func TestBeatHubSendsAgainAHeartbeatWhoseFrameOutlivedAConfirmStart(t *testing.T) {
	sender, smux := newTestHub(t, "1")
	receiver, rmux := newTestHub(t, "2")
	r := singleLeader(t)
	m := sender.add(5, newHeartbeats(time.Second, testHubTimeout), newMatchTracker())
	m.raft.Store(r)
	arrived, release := make(chan struct{}), make(chan struct{})
	handler := func(rpc raft.RPC) {
		close(arrived)
		<-release
		req := rpc.Command.(*raft.AppendEntriesRequest)
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: true}, nil)
	}
	receiver.add(5, newHeartbeats(time.Second, testHubTimeout), newMatchTracker()).handler.Store(&handler)

	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(smux.advertise)}, Term: r.CurrentTerm()}
	answered := make(chan bool, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		answered <- sender.beat(m, 5, "2", raft.ServerAddress(rmux.advertise), req, &resp)
	}()
	<-arrived
	m.beats.beginConfirm()
	defer m.beats.endConfirm()
	close(release)
	if <-answered {
		t.Fatal("a frame sent before the confirmation began answered its heartbeat")
	}
	if n := receiver.frames.Load() + sender.frames.Load(); n != 1 {
		t.Fatalf("%d frames, want the one", n)
	}
}

// A frame that none of the peer's Rafts answered (no replica there) pauses
// frames to that peer, as a failed one does: its heartbeats go one by one,
// where the peer's own stream decides, instead of every one waiting for a
// frame first.
func TestBeatHubPausesAfterAFrameNothingAnswered(t *testing.T) {
	sender, smux := newTestHub(t, "1")
	_, rmux := newTestHub(t, "2") // holds no shard 5
	r := singleLeader(t)
	m := sender.add(5, newHeartbeats(time.Second, testHubTimeout), newMatchTracker())
	m.raft.Store(r)
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(smux.advertise)}, Term: r.CurrentTerm()}
	var resp raft.AppendEntriesResponse
	target := raft.ServerAddress(rmux.advertise)
	for range 2 {
		if sender.beat(m, 5, "2", target, req, &resp) {
			t.Fatal("a frame nobody answered answered the heartbeat")
		}
	}
	if n := sender.frames.Load(); n != 1 {
		t.Fatalf("%d frames sent, want 1: the second heartbeat came during the pause", n)
	}
}

// testHubTimeout is the heartbeat timeout of newTestHub's hubs: long, so
// that a loaded test machine does not fail a frame.
const testHubTimeout = 2 * time.Second

// newTestHub is a hub on a Mux of its own on loopback, for the Raft
// server id id.
// Its tick is longer than the tests that use it, so every frame they see
// is one a heartbeat asked for.
func newTestHub(t *testing.T, id raft.ServerID) (*beatHub, *Mux) {
	t.Helper()
	return newTestHubReusing(t, id, testHubTimeout)
}

// newTestHubReusing is newTestHub for shards reusing answers for reuse.
func newTestHubReusing(t *testing.T, id raft.ServerID, reuse time.Duration) (*beatHub, *Mux) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := NewMux(ln, ln.Addr().String(), testLogger(t))
	t.Cleanup(func() { _ = mux.Close() })
	h, err := newBeatHub(mux, id, testHubTimeout, reuse, testHubTimeout, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	return h, mux
}

// singleLeader is a single-node Raft that leads, for hub tests that need
// a leader without a cluster.
func singleLeader(t *testing.T) *raft.Raft {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = "1"
	conf.Logger = testLogger(t)
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	_, trans := raft.NewInmemTransport("1")
	if err := raft.BootstrapCluster(conf, store, store, snaps, trans,
		raft.Configuration{Servers: []raft.Server{{ID: "1", Address: trans.LocalAddr()}}}); err != nil {
		t.Fatal(err)
	}
	r, err := raft.NewRaft(conf, &raft.MockFSM{}, store, store, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	eventually(t, 5*time.Second, "the single node leads", func() bool { return r.State() == raft.Leader })
	return r
}

// Frames go to a peer every tick for a shard that heartbeats it, without
// its heartbeats asking, so the follower hears every tick whatever raft's
// pace; once the shard stops heartbeating the peer (for beatRecent), they
// stop.
func TestBeatHubSendsAFrameEveryTick(t *testing.T) {
	sender, smux := newTestHubReusing(t, "1", 20*time.Millisecond)
	receiver, rmux := newTestHub(t, "2")

	r := singleLeader(t)
	m := sender.add(5, newHeartbeats(time.Second, testHubTimeout), newMatchTracker())
	m.raft.Store(r)
	var delivered atomic.Int64
	handler := func(rpc raft.RPC) {
		delivered.Add(1)
		req := rpc.Command.(*raft.AppendEntriesRequest)
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: true}, nil)
	}
	receiver.add(5, newHeartbeats(time.Second, testHubTimeout), newMatchTracker()).handler.Store(&handler)

	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(smux.advertise)}, Term: r.CurrentTerm()}
	var resp raft.AppendEntriesResponse
	if !sender.beat(m, 5, "2", raft.ServerAddress(rmux.advertise), req, &resp) {
		t.Fatal("the heartbeat was not answered in a frame")
	}
	// One heartbeat, then none: the shard is carried for beatRecent.
	time.Sleep(sender.recent)
	got := delivered.Load()
	if want := int64(sender.recent / sender.tick / 2); got < want {
		t.Fatalf("%d heartbeats delivered in the %v after one heartbeat, want at least %d (a frame every %v)", got, sender.recent, want, sender.tick)
	}
	time.Sleep(3 * sender.tick)
	quiet := delivered.Load()
	time.Sleep(5 * sender.tick)
	if late := delivered.Load() - quiet; late != 0 {
		t.Fatalf("%d frames went for a shard that stopped heartbeating the peer", late)
	}
	// A heartbeat answered from a fresh frame answer, which sends
	// nothing itself, starts the ticks again.
	m.beats.answeredFrame("2", time.Now(), req.Term, &raft.AppendEntriesResponse{Term: req.Term, Success: true}, nil)
	if !sender.beat(m, 5, "2", raft.ServerAddress(rmux.advertise), req, &resp) {
		t.Fatal("a heartbeat with a fresh frame answer was not reused")
	}
	time.Sleep(5 * sender.tick)
	if delivered.Load() == quiet {
		t.Fatal("no frame went after a reused heartbeat of a shard that had stopped heartbeating the peer")
	}
}
