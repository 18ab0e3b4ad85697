package raftnet

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// pipelineMaxInflight bounds the AppendEntries of one pipeline (one shard
// leader to one follower) sent and not yet handed back to Raft. Raft's
// send loop puts everything new since its last send, up to
// MaxAppendEntries entries, in each request, so requests in flight number
// about a round trip over the time between two commits: a handful under
// the heaviest load measured (64 writers). raft's own NetworkTransport
// allows 128 (rpcMaxPipeline), which buys nothing here: the follower's
// Raft takes one request of a shard at a time, and the append stream's
// receiver hands at most maxAppendInflight requests of a connection, all
// shards together, to the Rafts at once: 8 leaves room for 128 shards.
const pipelineMaxInflight = 8

// Errors with which a pipeline's AppendEntries fails, and its futures
// complete, once the pipeline is over. Raft's pipelineSend then stops
// pipelining, closes the pipeline and replicates one RPC at a time from
// the follower's last acknowledged index (replicateTo).
var (
	// errPipelineStopped: a future the pipeline handed to Raft carried a
	// refusal or a newer term, after which hashicorp/raft's pipelineDecode
	// reads no more.
	errPipelineStopped = errors.New("cluster: AppendEntries pipeline stopped: the follower refused an AppendEntries or answered a newer term")
	// errPipelineFull: no request in flight came back within the transport
	// timeout, or Raft did not take the answers that did.
	errPipelineFull = errors.New("cluster: AppendEntries pipeline full for the whole transport timeout")
	// errPipelineFellBack: the append hub would not carry a request (a
	// fault on the shard's traffic, a link pausing after a failure, a
	// receiver that refused it, a broken connection).
	errPipelineFellBack = errors.New("cluster: the append stream handed a pipelined AppendEntries back")
)

// appendPipeline is a raft.AppendPipeline from a shard leader to one
// follower on the append hub: its requests go in the hub's batched writes
// to the peer and come back on the hub's replies, with the wire format of
// every AppendEntries of the hub (appendwire.go), so the follower cannot
// tell them from requests sent one at a time.
//
// It differs from raft's netPipeline in that no hand-off can park for
// good (see the package doc, "The pipeline deadlock"):
//
//   - AppendEntries never blocks beyond the transport timeout: it waits
//     that long at most for one of pipelineMaxInflight slots, and fails at
//     once after Close or once the pipeline is over.
//   - One goroutine (run) takes the futures in send order, waits for each
//     answer (at most the transport timeout from its send) and hands it to
//     Consumer, every wait selecting on Close, the shard's transport
//     closing and the hub closing.
//   - After it handed Raft a refusal or a newer term, after which raft's
//     pipelineDecode stops reading, or after any request failed, the
//     pipeline is over: AppendEntries fails at once, and the requests
//     still in flight are given up (forget) and complete with the error
//     without being handed on.
//   - A request that failed is completed with its error and not handed
//     to Raft: v1.8.0's pipelineDecode ignores a future's error and would
//     count the failed request as contact from the follower (its lease).
//     Raft's next send fails instead, within its CommitTimeout at worst.
//   - The append stream's receiver hands each request to the shard's Raft
//     on a goroutine of its own, so two requests of a pipeline can reach
//     the follower's Raft in the wrong order; the second then finds the
//     first's entries missing. A refusal of a request sent while an
//     earlier one was unanswered that names a last log index before the
//     request's previous entry is sent again, once, when every earlier one
//     was answered, and its second answer counts.
//
// Raft's replication goroutine to the follower calls AppendEntries and
// Close, its decoder goroutine reads Consumer; every method is safe for
// concurrent use, and Close returns once run has ended.
type appendPipeline struct {
	hub    *appendHub
	member *appendMember
	shard  int32
	id     raft.ServerID
	target raft.ServerAddress
	beats  *heartbeats
	match  *matchTracker

	slots    chan struct{}          // one per future not yet handed on or given up
	sent     chan *pipelineFuture   // futures in send order, for run
	consumer chan raft.AppendFuture // Consumer: futures Raft takes, in send order
	shutdown chan struct{}          // closed by Close
	over     chan struct{}          // closed by end
	wg       sync.WaitGroup         // run

	// unanswered counts the futures sent whose answer run has not seen:
	// a request sent while it is above zero may overtake one.
	unanswered atomic.Int32

	mu      sync.Mutex // orders sends, and guards closed and overErr
	closed  bool
	overErr error
}

// newAppendPipeline starts a pipeline of shard's AppendEntries to the
// follower id at target, on hub as member; its answers are recorded in
// beats and match as the transport's own are.
func newAppendPipeline(hub *appendHub, member *appendMember, shard int32, id raft.ServerID, target raft.ServerAddress, beats *heartbeats, match *matchTracker) *appendPipeline {
	p := &appendPipeline{
		hub: hub, member: member, shard: shard, id: id, target: target, beats: beats, match: match,
		slots:    make(chan struct{}, pipelineMaxInflight),
		sent:     make(chan *pipelineFuture, pipelineMaxInflight),
		consumer: make(chan raft.AppendFuture),
		shutdown: make(chan struct{}),
		over:     make(chan struct{}),
	}
	hub.pipes.opened.Add(1)
	p.wg.Add(1)
	go p.run()
	return p
}

// AppendEntries sends args and returns its future, completed with resp
// once the follower answered. It waits at most the transport timeout for
// a slot, and fails at once after Close or once the pipeline is over.
func (p *appendPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if err := p.stopped(); err != nil {
		return nil, err
	}
	if err := p.takeSlot(); err != nil {
		return nil, err
	}
	f := &pipelineFuture{start: time.Now(), args: args, resp: resp, done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.overErr
	if p.closed {
		err = raft.ErrPipelineShutdown
	}
	if err == nil && !p.beats.reused(p.id, args, resp) {
		if f.peer, f.call = p.hub.send(p.shard, p.target, args); f.call == nil {
			err = errPipelineFellBack
			p.endLocked(err)
		}
	}
	if err != nil {
		<-p.slots
		return nil, err
	}
	f.mayOvertake = p.unanswered.Add(1) > 1
	p.sent <- f // never blocks: there are no more futures than slots
	return f, nil
}

// stopped returns the error of a pipeline closed or over, nil otherwise.
func (p *appendPipeline) stopped() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return raft.ErrPipelineShutdown
	}
	return p.overErr
}

// takeSlot waits for one of the pipeline's slots, at most the transport
// timeout: by then the oldest request in flight was answered or given up,
// and a slot still taken means Raft is not reading Consumer.
func (p *appendPipeline) takeSlot() error {
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	timer := time.NewTimer(p.hub.timeout)
	defer timer.Stop()
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-timer.C:
		p.hub.pipes.full.Add(1)
		p.end(errPipelineFull)
		return errPipelineFull
	case <-p.over:
		return p.stopped()
	case <-p.shutdown:
		return raft.ErrPipelineShutdown
	case <-p.member.gone:
		return raft.ErrTransportShutdown
	case <-p.hub.closeCh:
		return raft.ErrTransportShutdown
	}
}

// Consumer returns the channel of completed futures, in send order.
func (p *appendPipeline) Consumer() <-chan raft.AppendFuture { return p.consumer }

// Close ends the pipeline: requests in flight are given up and their
// futures complete with raft.ErrPipelineShutdown. It returns once the
// pipeline's goroutine ended, which waits on nothing that Close does not
// end. Idempotent.
func (p *appendPipeline) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	close(p.shutdown)
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// end makes the pipeline over after err (the first one counts).
func (p *appendPipeline) end(err error) {
	p.mu.Lock()
	p.endLocked(err)
	p.mu.Unlock()
}

func (p *appendPipeline) endLocked(err error) {
	if p.overErr != nil {
		return
	}
	p.overErr = err
	close(p.over)
	if errors.Is(err, errPipelineStopped) {
		p.hub.pipes.stopped.Add(1)
	} else {
		p.hub.pipes.failed.Add(1)
	}
	p.hub.logger.Debug("append pipeline over", "shard", p.shard, "peer", p.target, "error", err)
}

// run completes the futures in send order and hands them to Raft, until
// Close, the shard's transport closes or the hub closes; then it gives up
// the rest.
func (p *appendPipeline) run() {
	defer p.wg.Done()
	defer p.drain()
	for {
		var f *pipelineFuture
		select {
		case f = <-p.sent:
		case <-p.shutdown:
			return
		case <-p.member.gone:
			p.end(raft.ErrTransportShutdown)
			return
		case <-p.hub.closeCh:
			p.end(raft.ErrTransportShutdown)
			return
		}
		if err := p.stopped(); err != nil {
			p.giveUp(f, err)
			continue
		}
		err := p.answer(f)
		p.unanswered.Add(-1)
		if err != nil {
			p.end(err)
			f.complete(err)
			<-p.slots
			continue
		}
		f.complete(nil)
		select {
		case p.consumer <- f:
			<-p.slots
		case <-p.shutdown:
			return
		case <-p.member.gone:
			p.end(raft.ErrTransportShutdown)
			return
		case <-p.hub.closeCh:
			p.end(raft.ErrTransportShutdown)
			return
		}
		if !f.resp.Success || f.resp.Term > f.args.Term {
			// raft's pipelineDecode returns on this answer and reads no more.
			p.end(errPipelineStopped)
		}
	}
}

// drain gives up the futures left once run ends: after Close nothing is
// sent, and after the transport or the hub closed the pipeline is over,
// so none comes after them.
func (p *appendPipeline) drain() {
	for {
		select {
		case f := <-p.sent:
			p.giveUp(f, raft.ErrPipelineShutdown)
		default:
			return
		}
	}
}

// giveUp completes f with err without waiting for its answer, and frees
// its slot.
func (p *appendPipeline) giveUp(f *pipelineFuture, err error) {
	if f.call != nil {
		f.peer.forget(f.call)
	}
	p.unanswered.Add(-1)
	f.complete(err)
	<-p.slots
}

// answer waits for f's answer, at most the transport timeout from its
// send, fills f.resp with it and records it, or returns why there is
// none. A refusal that f overtaking an earlier request explains is sent
// again (see appendPipeline).
func (p *appendPipeline) answer(f *pipelineFuture) error {
	if f.call == nil {
		return nil // answered at once (heartbeats.reused)
	}
	sent := f.start
	err := p.await(f, sent)
	if err == nil && f.mayOvertake && overtaken(f.args, f.resp) {
		p.hub.pipes.resent.Add(1)
		if f.peer, f.call = p.hub.send(p.shard, p.target, f.args); f.call == nil {
			err = errPipelineFellBack
		} else {
			sent = time.Now()
			err = p.await(f, sent)
		}
	}
	if errors.Is(err, raft.ErrPipelineShutdown) {
		return err // the pipeline's end, not the follower's doing
	}
	p.beats.answered(p.id, sent, f.args, f.resp, err)
	if err == nil && f.resp.Success {
		p.match.acked(p.id, f.args.Term, f.args.PrevLogEntry+uint64(len(f.args.Entries)))
	}
	return err
}

// await waits for the answer to f.call, sent at sent, and fills f.resp.
func (p *appendPipeline) await(f *pipelineFuture, sent time.Time) error {
	timer := time.NewTimer(time.Until(sent.Add(p.hub.timeout)))
	defer timer.Stop()
	handled, err := p.hub.await(p.member, f.peer, f.call, timer.C, p.shutdown)
	switch {
	case !handled && f.call.err != nil:
		return fmt.Errorf("%w: %w", errPipelineFellBack, f.call.err)
	case !handled:
		return errPipelineFellBack
	case err != nil:
		return err
	}
	f.call.fill(f.args, f.resp)
	return nil
}

// overtaken reports whether resp, the answer to req, is a refusal for a
// previous entry the follower does not have yet: what it answers a
// request that reached its Raft before the one carrying that entry.
func overtaken(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) bool {
	return !resp.Success && resp.Term <= req.Term && resp.LastLog < req.PrevLogEntry
}

// pipelineFuture is one AppendEntries of an appendPipeline: a
// raft.AppendFuture.
type pipelineFuture struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	peer  *appendPeer
	call  *appendCall // nil: answered when sent
	// mayOvertake: an earlier request was unanswered when this one went.
	mayOvertake bool
	done        chan struct{} // closed by complete
	err         error
}

func (f *pipelineFuture) complete(err error) {
	f.err = err
	close(f.done)
}

// Error waits for the future to complete and returns its error.
func (f *pipelineFuture) Error() error {
	<-f.done
	return f.err
}

// Start is when the request was made.
func (f *pipelineFuture) Start() time.Time { return f.start }

// Request is the AppendEntries sent.
func (f *pipelineFuture) Request() *raft.AppendEntriesRequest { return f.args }

// Response is the follower's answer; read it once the future completed.
func (f *pipelineFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// carries reports whether shard's AppendEntries to target would go on the
// hub now: no fault sets the shard's traffic to the peer apart and the
// link does not pause after a failure. Raft's replication goroutines call
// it when they open a pipeline.
func (h *appendHub) carries(shard int32, target raft.ServerAddress) bool {
	if h.mux.faults.differs(shard, AppendStream, string(target), DirOutbound) {
		return false
	}
	p := h.link(target)
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !time.Now().Before(p.retryAt)
}

// pipelineCounters count what the append hub's pipelines did.
type pipelineCounters struct {
	opened, stopped, failed, full, resent atomic.Uint64
}

// PipelineStats counts what the append hub's AppendEntries pipelines did
// since the hub started (Config.PipelineAppends).
type PipelineStats struct {
	// Opened counts the pipelines Raft opened; Stopped, those that ended
	// on a refusal or a newer term handed to Raft; Failed, those that
	// ended on a failed request (timeout, fallback, shutdown included).
	Opened, Stopped, Failed uint64
	// Full counts the sends that found the pipeline full for the whole
	// transport timeout; Resent, the requests sent again after they
	// overtook an earlier one on the follower.
	Full, Resent uint64
}

// PipelineStats returns what the append hub's pipelines did so far (zero
// without an append hub). Any goroutine may call it.
func (h *Hubs) PipelineStats() PipelineStats {
	if h == nil || h.appends == nil {
		return PipelineStats{}
	}
	c := &h.appends.pipes
	return PipelineStats{Opened: c.opened.Load(), Stopped: c.stopped.Load(), Failed: c.failed.Load(), Full: c.full.Load(), Resent: c.resent.Load()}
}
