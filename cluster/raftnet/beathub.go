package raftnet

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// errNoAnswers is a frame whose reply answered none of its items.
var errNoAnswers = errors.New("cluster: the peer answered none of the frame's heartbeats")

// beatCodec encodes frames and replies, as raft's own transport encodes
// its RPCs. A Handle is safe for concurrent use once set up.
var beatCodec = &codec.MsgpackHandle{}

// beatFrame carries one leader node's heartbeats to one peer, for every
// shard it leads with that peer as a follower: what raft's heartbeat
// goroutines would have sent one by one. The dialer writes a frame and
// reads its beatReply before it writes the next, msgpack encoded.
type beatFrame struct {
	// ID and Addr are the leader's Raft server id and address, the same
	// in every shard (the node id and the Mux's address).
	ID, Addr        []byte
	ProtocolVersion raft.ProtocolVersion
	Beats           []beatItem
}

// beatItem is one shard's heartbeat: its leader's term.
type beatItem struct {
	Shard int32
	Term  uint64
}

// beatReply answers a frame: one answer for each item the follower's Raft
// answered. An item without an answer (no replica there, a fault, a Raft
// shutting down) is left out, and its leader sends that heartbeat itself.
type beatReply struct {
	Answers []beatAnswer
}

// beatAnswer is the follower's Raft's answer to one item.
type beatAnswer struct {
	Shard   int32
	Term    uint64
	LastLog uint64
	Success bool
}

// beatHub coalesces the heartbeats of every shard a node leads: one frame
// per peer, answered in one reply, where hashicorp/raft sends one RPC per
// shard and follower every 50–100 ms. CockroachDB and TiKV coalesce the
// heartbeats of their many Raft groups the same way.
//
// Sending. One sender goroutine per peer sends a frame every tick (nine
// tenths of HeartbeatReuse), carrying every shard whose Raft heartbeated
// the peer in the last beatRecent and still leads at that term, for as
// long as there is one. The reply's answers are real answers of each
// follower's Raft, stamped with the time the frame was sent, and refresh
// every carried shard's reuse and catch-up state. Raft's heartbeat
// goroutines keep running, at a slower pace while their shard leads
// (cluster.Shard.paceHeartbeats), and the shard transport answers them from the
// last frame's answer (heartbeats.reused). One that finds no fresh answer
// (the shard's first heartbeat to the peer, a frame late or failed) calls
// beat, which puts the heartbeat in the frame being sent or the next one
// and waits for the reply. So one frame per peer goes out every tick,
// whatever the number of shards, and each follower hears from its leaders
// that often.
//
// Receiving. Each item is handed to the shard's Raft through the heartbeat
// fast path raft gives its transport (SetHeartbeatHandler), as its own
// NetworkTransport does with a heartbeat RPC, and answered in the reply.
//
// Faults. A shard with a fault on its traffic with the peer (Faults, any
// drop or delay) is left out of frames, by the sender for its outbound
// faults and by the receiver for its inbound ones: its heartbeats then go
// one by one on the shard's own stream, where the fault applies as
// before. Faults on every shard apply to the frame's stream itself.
//
// Failures. A frame that fails ends reuse for every shard it carried, and
// frames to that peer pause (from beatBackoff, doubling up to
// beatMaxBackoff), so heartbeats go one by one, as without the hub. A
// peer of an older version has no beat stream and closes the connection.
//
// Raft's heartbeat goroutines call beat; one sender goroutine per peer
// sends frames; one goroutine per accepted connection answers them. beat
// blocks until its frame's reply, at most beatTimeout.
type beatHub struct {
	mux     *Mux
	layer   *StreamLayer
	logger  hclog.Logger
	localID raft.ServerID
	timeout time.Duration // one frame's dial, write and reply
	tick    time.Duration // a peer's frames go this often
	recent  time.Duration // a shard is carried while its Raft heartbeated the peer this recently
	backoff time.Duration // the first pause after a failed frame

	hubTable[beatMember, beatPeer]

	frames, carried, answers atomic.Uint64 // sent frames, items and answers received
}

// beatMaxBackoff is how far the pause after failed frames grows, in
// multiples of the first.
const beatMaxBackoff = 32

// beatMember is one shard of this node as the hub sees it.
type beatMember struct {
	beats   *heartbeats
	match   *matchTracker
	raft    atomic.Pointer[raft.Raft]      // set once NewRaft returned
	handler atomic.Pointer[func(raft.RPC)] // raft's heartbeat fast path
	gone    chan struct{}                  // closed by remove
}

// leads reports whether the shard's Raft leads, at term.
func (m *beatMember) leads(term uint64) bool {
	r := m.raft.Load()
	return r != nil && r.State() == raft.Leader && r.CurrentTerm() == term
}

// newBeatHub serves coalesced heartbeats on mux's BeatStream stream for the
// node whose Raft server id is localID. heartbeatTimeout is the shards':
// a frame may take half of it, a shard is carried for half of it after
// its last heartbeat, and frames pause for it after a failure. reuse is
// how long the shards reuse a frame's answers (cluster.Config.HeartbeatReuse):
// frames go every nine tenths of it, so that the next frame's answers
// come before the last ones are too old. leaderHeartbeat is the shards'
// LeaderHeartbeatTimeout: a shard stays carried for a fifth of it (raft's
// longest heartbeat interval) plus reuse after its last heartbeat, and at
// least half of heartbeatTimeout.
func newBeatHub(mux *Mux, localID raft.ServerID, heartbeatTimeout, reuse, leaderHeartbeat time.Duration, logger hclog.Logger) (*beatHub, error) {
	layer, err := mux.Listen(BeatStream)
	if err != nil {
		return nil, err
	}
	h := &beatHub{
		mux:     mux,
		layer:   layer,
		logger:  logger,
		localID: localID,
		timeout: heartbeatTimeout / 2,
		tick:    reuse * 9 / 10,
		recent:  max(heartbeatTimeout/2, leaderHeartbeat/5+reuse),
		backoff: heartbeatTimeout,

		hubTable: newHubTable[beatMember, beatPeer](),
	}
	h.wg.Add(1)
	go h.serve(layer, h.serveConn)
	return h, nil
}

// close stops the hub: waiting heartbeats go one by one, and the senders
// and connections end. Idempotent.
func (h *beatHub) close() {
	if _, first := h.shut(); !first {
		return
	}
	_ = h.layer.Close()
	h.wg.Wait()
}

// add registers a shard's reuse and catch-up state, before its Raft
// starts; setRaft adds its Raft once NewRaft returned.
func (h *beatHub) add(shard int32, beats *heartbeats, match *matchTracker) *beatMember {
	m := &beatMember{beats: beats, match: match, gone: make(chan struct{})}
	if old := h.setMember(shard, m); old != nil {
		close(old.gone)
	}
	return m
}

// remove unregisters m (its transport closed): its waiting heartbeats
// return, and frames carry it no more.
func (h *beatHub) remove(shard int32, m *beatMember) {
	if h.dropMember(shard, m) {
		close(m.gone)
	}
}

// sender returns the sender to addr, starting it the first time; nil
// once the hub is closed.
func (h *beatHub) sender(addr raft.ServerAddress) *beatPeer {
	return h.peer(addr, func() *beatPeer {
		p := &beatPeer{hub: h, addr: addr, wake: make(chan struct{}, 1), recent: make(map[int32]recentBeat)}
		h.wg.Add(1)
		go p.run()
		return p
	})
}

// beat answers req, member m's heartbeat of shard to the follower id at
// target: from the follower's last answer when m's reuse allows it (the
// shard's own frames or replications refresh it), else in the next frame
// to target, waiting for its reply. Either way it notes that the shard
// heartbeats target, so that frames carry it. It reports whether resp
// holds an answer; when not (reuse forbidden now, a fault, a failed frame,
// frames paused, no replica there, the hub or the shard closing), the
// caller sends req itself. Called by raft's heartbeat goroutines.
func (h *beatHub) beat(m *beatMember, shard int32, id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) bool {
	if req.Term == 0 || string(req.ID) != string(h.localID) || string(req.Addr) != h.mux.advertise {
		return m.beats.reused(id, req, resp)
	}
	p := h.sender(target)
	if p == nil {
		return m.beats.reused(id, req, resp)
	}
	b := recentBeat{id: id, term: req.Term, at: time.Now()}
	if m.beats.reused(id, req, resp) {
		p.seen(shard, b)
		return true
	}
	if !m.beats.mayReuse() {
		p.seen(shard, b)
		return false
	}
	r := p.join(shard, b)
	if r == nil {
		return false
	}
	select {
	case <-r.done:
	case <-m.gone:
		return false
	case <-h.closeCh:
		return false
	}
	if !m.beats.mayReuse() {
		// A confirmation, pause or transfer began while the frame was
		// out: it may count only a heartbeat sent after it began.
		return false
	}
	a, ok := r.answers[shard]
	if ok {
		*resp = a
	}
	return ok
}

// beatPeer sends frames to one peer.
type beatPeer struct {
	hub  *beatHub
	addr raft.ServerAddress
	wake chan struct{} // a round is waiting to be sent

	mu       sync.Mutex
	recent   map[int32]recentBeat // each shard's last heartbeat to the peer
	next     *beatRound           // collecting, sent once the sender is free
	sending  *beatRound
	retryAt  time.Time // frames pause until then after failures
	failures int
	idle     bool // the sender stopped ticking: no shard heartbeated the peer lately

	// The sender's connection, owned by run.
	conn net.Conn
	bw   *bufio.Writer
	enc  *codec.Encoder
	dec  *codec.Decoder
}

// recentBeat is a shard's last heartbeat to the peer: the follower's id,
// the leader's term and when.
type recentBeat struct {
	id   raft.ServerID
	term uint64
	at   time.Time
}

// beatRound is one frame: the shards it carries and, once done is closed,
// the answers it brought.
type beatRound struct {
	shards  map[int32]recentBeat
	done    chan struct{}
	answers map[int32]raft.AppendEntriesResponse
}

func newBeatRound() *beatRound {
	return &beatRound{shards: make(map[int32]recentBeat), done: make(chan struct{}), answers: make(map[int32]raft.AppendEntriesResponse)}
}

// seen records shard's heartbeat b, answered without a frame.
func (p *beatPeer) seen(shard int32, b recentBeat) {
	p.mu.Lock()
	p.recent[shard] = b
	p.resume()
	p.mu.Unlock()
}

// resume wakes a sender that stopped ticking, so that the shard just
// recorded is carried from the next tick. With p.mu held.
func (p *beatPeer) resume() {
	if !p.idle {
		return
	}
	p.idle = false
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// join records shard's heartbeat b and returns the round that will carry
// it: the one being sent if it carries shard at b's term, else the next.
// nil means frames to the peer are paused.
func (p *beatPeer) join(shard int32, b recentBeat) *beatRound {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.at.Before(p.retryAt) {
		return nil
	}
	p.recent[shard] = b
	p.idle = false
	if s := p.sending; s != nil {
		if c, ok := s.shards[shard]; ok && c.term == b.term {
			return s
		}
	}
	if p.next == nil {
		p.next = newBeatRound()
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	p.next.shards[shard] = b
	return p.next
}

// run sends a frame every tick while shards heartbeat the peer, and at
// once when a heartbeat that found no fresh answer waits for one, until
// the hub closes.
func (p *beatPeer) run() {
	h := p.hub
	defer h.wg.Done()
	defer p.closeConn()
	tick := time.NewTimer(h.tick)
	defer tick.Stop()
	for {
		select {
		case <-p.wake:
		case <-tick.C:
		case <-h.closeCh:
			return
		}
		p.mu.Lock()
		r := p.next
		p.next = nil
		select {
		case <-p.wake: // a wake queued meanwhile asked for this very round
		default:
		}
		if r == nil {
			r = newBeatRound() // the tick's frame
		}
		now := time.Now()
		if now.Before(p.retryAt) {
			// The frame before failed: heartbeats go one by one until
			// the pause ends, and the first after it wakes the sender.
			p.mu.Unlock()
			close(r.done)
			continue
		}
		for s, b := range p.recent {
			if now.Sub(b.at) > h.recent {
				delete(p.recent, s)
			} else if _, ok := r.shards[s]; !ok {
				r.shards[s] = b
			}
		}
		if len(r.shards) == 0 {
			// No shard heartbeats the peer: no ticks until one does
			// (seen or join wakes the sender).
			p.idle = true
			p.mu.Unlock()
			close(r.done)
			continue
		}
		p.sending = r
		p.mu.Unlock()

		p.send(r)
		tick.Reset(max(h.tick-time.Since(now), 0)) // drops a tick that fired meanwhile

		p.mu.Lock()
		p.sending = nil
		p.mu.Unlock()
		close(r.done)
	}
}

// carriedBeat is a shard in a frame being sent.
type carriedBeat struct {
	m *beatMember
	b recentBeat
}

// send sends one frame carrying r's shards that still lead at their term
// and have no fault towards the peer, and records what came back.
func (p *beatPeer) send(r *beatRound) {
	h := p.hub
	frame := beatFrame{ID: []byte(h.localID), Addr: []byte(h.mux.advertise), ProtocolVersion: raft.ProtocolVersionMax}
	carried := make(map[int32]carriedBeat, len(r.shards))
	for s, b := range r.shards {
		m := h.member(s)
		if m == nil || !m.leads(b.term) || faulted(h.mux.faults, s, string(p.addr), DirOutbound) {
			continue
		}
		frame.Beats = append(frame.Beats, beatItem{Shard: s, Term: b.term})
		carried[s] = carriedBeat{m, b}
	}
	if len(frame.Beats) == 0 {
		return
	}
	sent := time.Now()
	reply, err := p.exchange(&frame)
	h.frames.Add(1)
	h.carried.Add(uint64(len(frame.Beats)))
	if err == nil && len(reply.Answers) == 0 {
		// The peer's Rafts answered nothing (no replicas there, faults
		// on its side, its shards closing): the heartbeats go one by one
		// for a while, where the peer's own stream decides.
		err = errNoAnswers
	}
	if err != nil {
		p.failed(err)
		for _, c := range carried {
			c.m.beats.answeredFrame(c.b.id, sent, c.b.term, nil, err)
		}
		return
	}
	p.mu.Lock()
	p.failures = 0
	p.mu.Unlock()
	for _, a := range reply.Answers {
		c, ok := carried[a.Shard]
		if !ok {
			continue
		}
		h.answers.Add(1)
		resp := raft.AppendEntriesResponse{Term: a.Term, LastLog: a.LastLog, Success: a.Success}
		c.m.beats.answeredFrame(c.b.id, sent, c.b.term, &resp, nil)
		if resp.Success {
			c.m.match.acked(c.b.id, c.b.term, 0)
		}
		r.answers[a.Shard] = resp
	}
}

// exchange writes f and reads its reply, dialing first if need be. A
// failure closes the connection; the next frame dials anew.
func (p *beatPeer) exchange(f *beatFrame) (*beatReply, error) {
	h := p.hub
	deadline := time.Now().Add(h.timeout) // the dial's and the exchange's together
	if p.conn == nil {
		c, err := h.layer.Dial(p.addr, h.timeout)
		if err != nil {
			return nil, err
		}
		p.conn, p.bw = c, bufio.NewWriter(c)
		p.enc, p.dec = codec.NewEncoder(p.bw, beatCodec), codec.NewDecoder(bufio.NewReader(c), beatCodec)
	}
	var reply beatReply
	err := p.conn.SetDeadline(deadline)
	if err == nil {
		err = p.enc.Encode(f)
	}
	if err == nil {
		err = p.bw.Flush()
	}
	if err == nil {
		err = p.dec.Decode(&reply)
	}
	if err != nil {
		p.closeConn()
		return nil, err
	}
	return &reply, nil
}

// failed pauses frames to the peer after a failure, longer each time.
func (p *beatPeer) failed(err error) {
	p.mu.Lock()
	p.failures++
	pause := p.hub.backoff * time.Duration(min(1<<min(p.failures-1, 30), beatMaxBackoff))
	p.retryAt = time.Now().Add(pause)
	failures := p.failures
	p.mu.Unlock()
	p.hub.logger.Debug("coalesced heartbeats failed; sending them one by one for a while",
		"peer", p.addr, "error", err, "failures", failures, "pause", pause)
}

func (p *beatPeer) closeConn() {
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn, p.bw, p.enc, p.dec = nil, nil, nil, nil
	}
}

// serveConn answers the frames of one connection until it breaks or the
// hub closes. The hub's accept loop (hubTable.serve) runs it.
func (h *beatHub) serveConn(c net.Conn) {
	defer c.Close()
	peer := ""
	if mc, ok := c.(*muxConn); ok {
		peer = mc.peer
	}
	dec := codec.NewDecoder(bufio.NewReader(c), beatCodec)
	bw := bufio.NewWriter(c)
	enc := codec.NewEncoder(bw, beatCodec)
	respCh := make(chan raft.RPCResponse, 1)
	for {
		var f beatFrame
		if err := dec.Decode(&f); err != nil {
			return
		}
		reply := beatReply{Answers: make([]beatAnswer, 0, len(f.Beats))}
		for _, b := range f.Beats {
			if a, ok := h.deliver(peer, &f, b, respCh); ok {
				reply.Answers = append(reply.Answers, a)
			}
		}
		if err := enc.Encode(&reply); err != nil {
			return
		}
		if err := bw.Flush(); err != nil {
			return
		}
	}
}

// deliver hands one item to its shard's Raft through raft's heartbeat
// fast path and returns the answer. raft's handler answers before it
// returns, or not at all once its Raft is shut down.
func (h *beatHub) deliver(peer string, f *beatFrame, b beatItem, respCh chan raft.RPCResponse) (beatAnswer, bool) {
	if b.Term == 0 || len(f.Addr) == 0 || faulted(h.mux.faults, b.Shard, peer, DirInbound) {
		return beatAnswer{}, false
	}
	m := h.member(b.Shard)
	if m == nil {
		return beatAnswer{}, false
	}
	fn := m.handler.Load()
	if fn == nil {
		return beatAnswer{}, false
	}
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: f.ProtocolVersion, ID: f.ID, Addr: f.Addr},
		Term:      b.Term,
		Leader:    f.Addr,
	}
	(*fn)(raft.RPC{Command: req, RespChan: respCh})
	select {
	case r := <-respCh:
		resp, ok := r.Response.(*raft.AppendEntriesResponse)
		if r.Error != nil || !ok {
			return beatAnswer{}, false
		}
		return beatAnswer{Shard: b.Shard, Term: resp.Term, LastLog: resp.LastLog, Success: resp.Success}, true
	default:
		return beatAnswer{}, false
	}
}

// faulted reports whether any fault (drop or delay) applies to shard's
// traffic with peer in direction dir. It only looks: Faults.Dropped
// counts what the faults refused, not the shards left out of frames.
func faulted(f *Faults, shard int32, peer string, dir Direction) bool {
	if !f.active() {
		return false
	}
	return f.applies(shard, peer, dir)
}
