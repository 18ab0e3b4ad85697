package raftnet

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// errAppendTimeout is an AppendEntries the peer did not answer within the
// transport timeout; Raft backs off and retries it, as after a timed-out
// RPC of its own transport.
var errAppendTimeout = errors.New("cluster: AppendEntries on the append stream timed out")

// appendHub carries the AppendEntries of every shard of this node to each
// peer on one connection, where hashicorp/raft's NetworkTransport gives
// each shard its own connections and sends each RPC with a write of its
// own: under load, a follower node received a thousand small RPCs a second
// per shard, each decoded by reflection and answered by a write(2) of its
// own. Here the requests queued for a peer go out in one write, the
// answers queued for a leader come back in one, and both are encoded by
// generated code (appendwire.go). Heartbeats keep their own hub
// (beatHub); votes, snapshots and leadership transfers keep the shard's
// NetworkTransport.
//
// Sending. A shard's transport hands an AppendEntries to append, which
// queues it for the peer's writer goroutine and waits for its reply (one
// reader goroutine per connection matches replies to requests by
// sequence number). Requests of different shards are in flight together;
// Raft sends one at a time per shard and follower, unless a pipeline
// (pipeline.go, off by default) sends up to pipelineMaxInflight. Without
// one, only a request that timed out on the leader can still reach the
// follower's Raft after the one sent next, and Raft takes a stale
// AppendEntries of the same term as a no-op, as it does a retry.
//
// Receiving. Each request is handed to its shard's Raft through the
// shard transport's consumer channel, the one raft reads its RPCs from
// (the NetworkTransport's RPCs are forwarded into it), on a goroutine of
// its own, so a shard whose Raft is busy (a follower's fsync) holds up no
// other shard; its answer joins the connection's next write.
//
// Falling back. append reports false, and the shard sends the request on
// its own stream, when: the request has a fault on its traffic with the
// peer (Faults, any drop or delay, so a fault applies as it did; faults
// on every shard apply to the hub's stream itself); the receiver refused
// it (no replica there, an inbound fault, the shard closing); it is over
// maxAppendMessage; or the connection failed, after which the hub is not
// used to that peer for a while (from appendBackoff, doubling up to
// appendMaxBackoff). An AppendEntries may be delivered twice that way,
// which Raft tolerates as a retry. A peer of an older version has no
// append stream and closes the connection: the shards then use their own.
//
// Raft's replication goroutines call append concurrently; it blocks until
// the reply, at most the transport timeout.
type appendHub struct {
	mux     *Mux
	layer   *StreamLayer
	logger  hclog.Logger
	timeout time.Duration // a request's dial, write and reply
	backoff time.Duration // the first pause after a failed connection

	hubTable[appendMember, appendPeer]

	// sent counts requests answered through the hub; fellBack, those
	// handed back to the shard's own stream; timedOut, those the peer did
	// not answer in time; broken, the links' connections that failed.
	sent, fellBack, timedOut, broken atomic.Uint64
	// pipes counts what the shards' pipelines did (pipeline.go).
	pipes pipelineCounters
}

// replyDue is how long a link waits for the next reply while requests
// are pending: a quarter longer than a request waits for its own, so a
// request that times out is forgotten (forget) before the link's deadline
// fires, and a lone late answer does not break the link for every shard.
func (h *appendHub) replyDue() time.Duration { return h.timeout + h.timeout/4 }

// appendMaxBackoff is how far the pause after failed connections grows,
// in multiples of the first.
const appendMaxBackoff = 32

// appendMember is one shard of this node as the hub sees it: the channel
// its Raft reads RPCs from.
type appendMember struct {
	rpcs chan raft.RPC
	gone chan struct{} // closed by remove
}

// newAppendHub serves the append stream on mux for this node's shards.
// timeout bounds a request (the shards' transport timeout); backoff is
// the first pause after a failed connection.
func newAppendHub(mux *Mux, timeout, backoff time.Duration, logger hclog.Logger) (*appendHub, error) {
	layer, err := mux.Listen(AppendStream)
	if err != nil {
		return nil, err
	}
	h := &appendHub{
		mux:     mux,
		layer:   layer,
		logger:  logger,
		timeout: timeout,
		backoff: backoff,

		hubTable: newHubTable[appendMember, appendPeer](),
	}
	h.wg.Add(1)
	go h.serve(layer, h.serveConn)
	return h, nil
}

// close stops the hub: waiting requests fail, and the writers, readers and
// connections end. Idempotent.
func (h *appendHub) close() {
	peers, first := h.shut()
	if !first {
		return
	}
	_ = h.layer.Close()
	for _, p := range peers {
		p.breakConn(nil, net.ErrClosed)
	}
	h.wg.Wait()
}

// add registers a shard before its Raft starts, and forwards the RPCs of
// its own transport (from) into the channel the Raft will read
// (member.rpcs) until remove.
func (h *appendHub) add(shard int32, from <-chan raft.RPC) *appendMember {
	m := &appendMember{rpcs: make(chan raft.RPC), gone: make(chan struct{})}
	if old := h.setMember(shard, m); old != nil {
		close(old.gone)
	}
	go func() {
		for {
			select {
			case rpc := <-from:
				select {
				case m.rpcs <- rpc:
				case <-m.gone:
					rpc.Respond(nil, raft.ErrTransportShutdown)
					return
				}
			case <-m.gone:
				return
			}
		}
	}()
	return m
}

// remove unregisters m (its transport closed): requests to it are
// refused, and its forwarding ends.
func (h *appendHub) remove(shard int32, m *appendMember) {
	if h.dropMember(shard, m) {
		close(m.gone)
	}
}

// link returns the link to addr, starting its writer the first time; nil
// once the hub is closed.
func (h *appendHub) link(addr raft.ServerAddress) *appendPeer {
	return h.peer(addr, func() *appendPeer {
		p := &appendPeer{hub: h, addr: addr, wake: make(chan struct{}, 1), pending: make(map[uint64]*appendCall)}
		h.wg.Add(1)
		go p.run()
		return p
	})
}

// append sends req, shard's AppendEntries to the follower at target, and
// fills resp with its answer. It reports false, with resp untouched, when
// the shard should send req on its own stream instead (see appendHub).
// Called by raft's replication goroutines.
func (h *appendHub) append(m *appendMember, shard int32, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (bool, error) {
	p, c := h.send(shard, target, req)
	if c == nil {
		return false, nil
	}
	timer := time.NewTimer(h.timeout)
	defer timer.Stop()
	handled, err := h.await(m, p, c, timer.C, nil)
	if handled && err == nil {
		c.fill(req, resp)
	}
	return handled, err
}

// send queues req, shard's AppendEntries to the follower at target, on
// the link to target and returns the link and the call to await; a nil
// call when the shard should send req on its own stream instead (see
// appendHub). It does not block beyond the link's mutex.
func (h *appendHub) send(shard int32, target raft.ServerAddress, req *raft.AppendEntriesRequest) (*appendPeer, *appendCall) {
	if h.mux.faults.differs(shard, AppendStream, string(target), DirOutbound) {
		return nil, nil
	}
	p := h.link(target)
	if p == nil {
		return nil, nil
	}
	c := &appendCall{shard: shard, req: req, done: make(chan struct{})}
	if !p.enqueue(c) {
		return nil, nil
	}
	return p, c
}

// await waits for the answer to c, sent on p by shard member m, until
// expired fires (the caller's timeout) or stop closes (nil: never), and
// reports false when the shard should send the request on its own stream
// instead; true with an error when the follower's Raft answered one or no
// answer came in time. On true and no error the answer is c.reply (fill).
// A call given up on is taken out of the link (forget), so its late
// answer is dropped and breaks nothing.
func (h *appendHub) await(m *appendMember, p *appendPeer, c *appendCall, expired <-chan time.Time, stop <-chan struct{}) (bool, error) {
	var gaveUp error
	select {
	case <-c.done:
	case <-expired:
		gaveUp = errAppendTimeout
	case <-m.gone:
		// The shard's transport closed (its Raft is shutting down):
		// fail at once, as a closed NetworkTransport does.
		gaveUp = raft.ErrTransportShutdown
	case <-h.closeCh:
		gaveUp = raft.ErrTransportShutdown
	case <-stop:
		gaveUp = raft.ErrPipelineShutdown
	}
	if gaveUp != nil {
		if p.forget(c) {
			if gaveUp == errAppendTimeout {
				h.timedOut.Add(1)
			}
			return true, gaveUp
		}
		<-c.done // answered meanwhile
	}
	switch {
	case c.err != nil || c.reply.Refused:
		h.fellBack.Add(1)
		return false, nil
	case c.reply.Error != "":
		h.sent.Add(1)
		return true, errors.New(c.reply.Error)
	}
	h.sent.Add(1)
	return true, nil
}

// appendCall is one request in the hub, from append to its reply.
type appendCall struct {
	seq   uint64
	shard int32
	req   *raft.AppendEntriesRequest
	done  chan struct{} // closed once reply or err is set
	reply appendReply
	err   error // the connection failed: the shard sends it itself
}

// fill sets resp, the answer to req, from c's reply.
func (c *appendCall) fill(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	*resp = raft.AppendEntriesResponse{
		RPCHeader:      raft.RPCHeader{ProtocolVersion: req.ProtocolVersion},
		Term:           c.reply.Term,
		LastLog:        c.reply.LastLog,
		Success:        c.reply.Success,
		NoRetryBackoff: c.reply.NoRetryBackoff,
	}
}

// appendPeer is the link to one peer: the requests waiting to be
// written, those written and waiting for a reply, and the connection.
type appendPeer struct {
	hub  *appendHub
	addr raft.ServerAddress
	wake chan struct{} // requests are queued

	mu       sync.Mutex
	queue    []*appendCall
	pending  map[uint64]*appendCall // written, by seq
	seq      uint64
	conn     net.Conn // nil until the writer dials
	retryAt  time.Time
	failures int
}

// enqueue queues c for the writer; false while the link pauses after a
// failure.
func (p *appendPeer) enqueue(c *appendCall) bool {
	p.mu.Lock()
	if time.Now().Before(p.retryAt) {
		p.mu.Unlock()
		return false
	}
	p.seq++
	c.seq = p.seq
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// forget takes a timed-out c out of the link; false if it was answered
// first.
func (p *appendPeer) forget(c *appendCall) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pending[c.seq]; ok {
		delete(p.pending, c.seq)
		return true
	}
	for i, q := range p.queue {
		if q == c {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			return true
		}
	}
	return false
}

// run writes queued requests, all of them in one write, until the hub
// closes. It dials when there is no connection, and starts the
// connection's reader. A request is in pending from the moment run takes
// it off the queue, so forget finds a timed-out one wherever it is.
func (p *appendPeer) run() {
	h := p.hub
	defer h.wg.Done()
	var buf []byte
	var tooLarge []*appendCall
	for {
		select {
		case <-p.wake:
		case <-h.closeCh:
			return
		}
		p.mu.Lock()
		calls := p.queue
		p.queue = nil
		for _, c := range calls {
			p.pending[c.seq] = c
		}
		conn := p.conn
		p.mu.Unlock()
		if len(calls) == 0 {
			continue
		}
		if conn == nil {
			c, err := h.layer.Dial(p.addr, h.timeout)
			if err != nil {
				p.fail(p.take(calls), err)
				continue
			}
			p.mu.Lock()
			p.conn, conn = c, c
			p.mu.Unlock()
			h.wg.Add(1)
			go p.read(c)
		}
		tooLarge = tooLarge[:0]
		for len(calls) > 0 && conn != nil {
			// A batch ends once it holds maxAppendBatch bytes, so one
			// write and its deadline stay bounded when many shards
			// catch a follower up at once.
			buf = buf[:0]
			for len(calls) > 0 && len(buf) < maxAppendBatch {
				var err error
				if buf, err = appendAppendReq(buf, calls[0].seq, calls[0].shard, calls[0].req); err != nil {
					tooLarge = append(tooLarge, calls[0])
				}
				calls = calls[1:]
			}
			if len(buf) > 0 && !p.write(conn, buf) {
				conn = nil // broken: what was pending went back to the shards
			}
		}
		for _, c := range p.take(tooLarge) {
			c.err = errAppendTooLarge
			close(c.done)
		}
		if cap(buf) > maxKeptAppendBuffer {
			buf = nil
		}
	}
}

// write writes buf, requests pending on conn, with the read deadline for
// their replies; false if conn broke (then breakConn handed back every
// pending request).
func (p *appendPeer) write(conn net.Conn, buf []byte) bool {
	h := p.hub
	p.mu.Lock()
	if p.conn != conn {
		// The reader broke the connection meanwhile.
		p.mu.Unlock()
		return false
	}
	err := conn.SetReadDeadline(time.Now().Add(h.replyDue())) // the replies are due
	p.mu.Unlock()
	if err == nil {
		err = conn.SetWriteDeadline(time.Now().Add(h.timeout))
	}
	if err == nil {
		_, err = conn.Write(buf)
	}
	if err != nil {
		p.breakConn(conn, err)
		return false
	}
	return true
}

// take removes from pending those of calls still there (not timed out,
// answered or failed meanwhile) and returns them.
func (p *appendPeer) take(calls []*appendCall) []*appendCall {
	if len(calls) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*appendCall
	for _, c := range calls {
		if p.pending[c.seq] == c {
			delete(p.pending, c.seq)
			out = append(out, c)
		}
	}
	return out
}

// maxAppendInflight bounds the requests of one connection being handed
// to Rafts at once; the connection is not read further until one is
// answered. Raft sends one request at a time per shard and follower, or
// pipelineMaxInflight with a pipeline, so it is far above what a leader
// node sends.
const maxAppendInflight = 1024

// maxAppendBatch is about the most bytes one write of a link carries
// (one message may take it past).
const maxAppendBatch = 4 << 20

// maxKeptAppendBuffer bounds the write buffer a link keeps between
// writes, so one large catch-up does not pin its memory.
const maxKeptAppendBuffer = 1 << 20

// read matches the replies on conn to their requests until conn fails.
func (p *appendPeer) read(conn net.Conn) {
	defer p.hub.wg.Done()
	br := bufio.NewReaderSize(conn, 64<<10)
	var head [4]byte
	for {
		n, got, err := readAppendLength(br, head[:])
		var msg []byte
		if err == nil {
			msg, err = readAppendBody(br, n)
		}
		if err == nil {
			var r appendReply
			if r, err = decodeAppendReply(msg); err == nil {
				p.mu.Lock()
				c := p.pending[r.Seq]
				delete(p.pending, r.Seq)
				// Read-deadline changes happen under mu, where the
				// writer adds what it waits for.
				if len(p.pending) > 0 {
					err = conn.SetReadDeadline(time.Now().Add(p.hub.replyDue()))
				} else {
					err = conn.SetReadDeadline(time.Time{})
				}
				if p.conn == conn {
					p.failures = 0 // not a reader of a connection already broken
				}
				p.mu.Unlock()
				if c != nil {
					c.reply = r
					close(c.done)
				}
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && got == 0 && p.idle(conn) {
				// Every request the deadline was for timed out on its
				// own (forget): no reply is due, so the link is fine.
				continue
			}
			p.breakConn(conn, err)
			return
		}
	}
}

// idle reports whether nothing is pending on conn, the link's connection,
// and if so clears its read deadline.
func (p *appendPeer) idle(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != conn || len(p.pending) > 0 {
		return false
	}
	return conn.SetReadDeadline(time.Time{}) == nil
}

// breakConn closes conn after err, if it is still the link's (nil: any),
// and hands every request waiting on it back to its shard.
func (p *appendPeer) breakConn(conn net.Conn, err error) {
	p.mu.Lock()
	if p.conn == nil || (conn != nil && p.conn != conn) {
		p.mu.Unlock()
		return
	}
	c := p.conn
	p.conn = nil
	if err != net.ErrClosed {
		p.hub.broken.Add(1)
	}
	calls := make([]*appendCall, 0, len(p.pending)+len(p.queue))
	for _, pc := range p.pending {
		calls = append(calls, pc)
	}
	calls = append(calls, p.queue...)
	clear(p.pending)
	p.queue = nil
	p.mu.Unlock()
	_ = c.Close()
	p.fail(calls, err)
}

// fail hands calls back to their shards after err, and pauses the link.
func (p *appendPeer) fail(calls []*appendCall, err error) {
	for _, c := range calls {
		c.err = err
		close(c.done)
	}
	p.mu.Lock()
	p.failures++
	pause := p.hub.backoff * time.Duration(min(1<<min(p.failures-1, 30), appendMaxBackoff))
	p.retryAt = time.Now().Add(pause)
	failures := p.failures
	p.mu.Unlock()
	select {
	case <-p.hub.closeCh:
	default:
		p.hub.logger.Debug("append stream failed; shards send their own AppendEntries for a while",
			"peer", p.addr, "error", err, "failures", failures, "pause", pause)
	}
}

// appendReplier writes one connection's replies, whatever is queued in
// one write.
type appendReplier struct {
	conn net.Conn
	wake chan struct{}
	mu   sync.Mutex
	out  []byte
}

func (w *appendReplier) reply(r *appendReply) {
	w.mu.Lock()
	w.out = appendAppendReply(w.out, r)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run writes queued replies until done closes or a write fails.
func (w *appendReplier) run(done <-chan struct{}, timeout time.Duration) {
	var buf []byte
	for {
		select {
		case <-w.wake:
		case <-done:
			return
		}
		w.mu.Lock()
		buf, w.out = w.out, buf[:0]
		w.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		err := w.conn.SetWriteDeadline(time.Now().Add(timeout))
		if err == nil {
			_, err = w.conn.Write(buf)
		}
		if err != nil {
			_ = w.conn.Close()
			return
		}
		if cap(buf) > maxKeptAppendBuffer {
			buf = nil
		}
	}
}

// serveConn hands the requests of one connection to their shards' Rafts
// until it breaks or the hub closes. The hub's accept loop
// (hubTable.serve) runs it.
func (h *appendHub) serveConn(c net.Conn) {
	peer := ""
	if mc, ok := c.(*muxConn); ok {
		peer = mc.peer
	}
	done := make(chan struct{})
	w := &appendReplier{conn: c, wake: make(chan struct{}, 1)}
	var inflight sync.WaitGroup
	inflight.Go(func() { w.run(done, h.timeout) })
	defer func() {
		close(done)
		_ = c.Close()
		inflight.Wait()
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	var head [4]byte
	slots := make(chan struct{}, maxAppendInflight)
	for {
		// Between messages a connection may idle; once one has begun,
		// the rest of it is due within the timeout.
		n, _, err := readAppendLength(br, head[:])
		if err == nil {
			err = c.SetReadDeadline(time.Now().Add(h.timeout))
		}
		var msg []byte
		if err == nil {
			msg, err = readAppendBody(br, n)
		}
		if err == nil {
			err = c.SetReadDeadline(time.Time{})
		}
		if err != nil {
			return
		}
		seq, shard, req, err := decodeAppendReq(msg)
		if err != nil {
			h.logger.Warn("closing an append stream that sent a request it cannot decode", "peer", peer, "error", err)
			return
		}
		select {
		case slots <- struct{}{}:
		case <-h.closeCh:
			return
		}
		inflight.Go(func() {
			w.reply(h.deliver(peer, seq, shard, req, done))
			<-slots
		})
	}
}

// deliver hands req to shard's Raft and returns the reply to send.
func (h *appendHub) deliver(peer string, seq uint64, shard int32, req *raft.AppendEntriesRequest, done <-chan struct{}) *appendReply {
	refused := &appendReply{Seq: seq, Refused: true}
	if h.mux.faults.differs(shard, AppendStream, peer, DirInbound) {
		return refused
	}
	m := h.member(shard)
	if m == nil {
		return refused
	}
	respCh := make(chan raft.RPCResponse, 1)
	select {
	case m.rpcs <- raft.RPC{Command: req, RespChan: respCh}:
	case <-m.gone:
		return refused
	case <-done:
		return refused
	}
	select {
	case r := <-respCh:
		if r.Error != nil {
			return &appendReply{Seq: seq, Error: r.Error.Error()}
		}
		resp, ok := r.Response.(*raft.AppendEntriesResponse)
		if !ok {
			return &appendReply{Seq: seq, Error: "cluster: raft answered an AppendEntries with no AppendEntriesResponse"}
		}
		return &appendReply{Seq: seq, Term: resp.Term, LastLog: resp.LastLog, Success: resp.Success, NoRetryBackoff: resp.NoRetryBackoff}
	case <-done:
		return refused
	}
}
