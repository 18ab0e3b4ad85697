package raftnet

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// DefaultHeartbeatReuse is the default share of HeartbeatTimeout
// (cluster.Config.HeartbeatReuse) for which a follower's answer in a frame of
// coalesced heartbeats answers a shard leader's next heartbeats to it
// instead of their crossing the network (see heartbeats).
//
// hashicorp/raft heartbeats every follower at a random interval between a
// tenth and a fifth of HeartbeatTimeout, for every shard: with 50 shards
// at replication factor 3 that is about 1,300 RPCs a second across three
// idle nodes, each a msgpack round trip that wakes four goroutines, and
// the bulk of what an idle cluster costs. Instead the beatHub sends one
// frame per peer every beatTick (nine tenths of this), carrying every
// shard that heartbeats the peer, and raft's heartbeats take their
// answers. A follower then hears from its leader every beatTick plus a
// round trip (about 115 ms by default): within the half of
// HeartbeatTimeout after which kcoord calls a follower cut off from its
// leader (cluster.Shard.Settling, cluster.Node.LeaderOf), and far within its own election
// timeout. cluster.Config.Validate keeps a HeartbeatReuse of one's own to those
// bounds.
const DefaultHeartbeatReuse = 1.0 / 4

// probeReuseFor bounds how long idle replication probes to a follower
// are answered from its last answer to the same probe (heartbeats.reused):
// one is sent for real at least this often. A follower that restarted
// loses its commit index, and relearns it from the next probe; a broken
// connection ends probe reuse at once (answered, answeredFrame), and the
// beatHub's frames, every beatTick, break on a restarted follower's
// closed connection, so this is only a bound for a restart that no send
// to that follower noticed. Each real probe wakes half a dozen goroutines
// on two nodes; at 5 s these were a tenth of an idle cluster's wakeups.
const probeReuseFor = 30 * time.Second

// heartbeats thins a shard leader's heartbeats and idle replication
// probes: it answers them from the follower's last real answer, a frame's
// (beatHub) for heartbeats, when that answer may stand for a new one. The
// package doc, "Heartbeat thinning", says when that is, and why it leaves
// leadership confirmations, the lease and placement's catch-up check as
// safe as without it.
//
// Raft's heartbeat and replication goroutines (two per follower) call it
// concurrently, and so does the beatHub's sender; the read index calls
// beginConfirm/endConfirm. Nothing blocks beyond a short mutex.
type heartbeats struct {
	reuse      time.Duration
	confirming atomic.Int32
	// noReuseUntil is when the last leadership transfer's no-reuse
	// window ends, in monotonic nanoseconds since born (transferring).
	noReuseUntil atomic.Int64
	hold         time.Duration // that window after a transfer: HeartbeatTimeout
	born         time.Time

	// sentAlone counts the heartbeats sent one by one, on the shard's
	// own stream (tests compare it with the beatHub's answers).
	sentAlone atomic.Uint64

	mu     sync.Mutex
	last   map[raft.ServerID]heartbeatAnswer
	probes map[raft.ServerID]probeAnswer
}

// heartbeatAnswer is a follower's last real answer in a term: when the
// request it answered was sent, the answer, and when the last frame the
// follower answered in that term was sent (zero if none).
type heartbeatAnswer struct {
	term     uint64
	at       time.Time
	resp     raft.AppendEntriesResponse
	framedAt time.Time
}

// probeAnswer is a follower's last successful answer to an idle probe
// that was sent: the probe's term, position and commit index, when it was
// sent, and the answer.
type probeAnswer struct {
	term, prevIndex, prevTerm, commit uint64
	sent                              time.Time
	resp                              raft.AppendEntriesResponse
}

// newHeartbeats reuses answers for reuse (cluster.Config.HeartbeatReuse); zero or
// negative sends every heartbeat. heartbeatTimeout is the shard's.
func newHeartbeats(reuse, heartbeatTimeout time.Duration) *heartbeats {
	return &heartbeats{
		reuse:  reuse,
		hold:   heartbeatTimeout,
		born:   time.Now(),
		last:   make(map[raft.ServerID]heartbeatAnswer),
		probes: make(map[raft.ServerID]probeAnswer),
	}
}

// isHeartbeat reports whether req is what raft's heartbeat goroutine
// sends: a term and a leader, no log position, entries or commit index.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	return len(req.Entries) == 0 && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 && req.LeaderCommitIndex == 0
}

// isProbe reports whether req is an idle replication probe: no entries,
// but a log position or commit index.
func isProbe(req *raft.AppendEntriesRequest) bool {
	return len(req.Entries) == 0 && !isHeartbeat(req)
}

// mayReuse reports whether answers may be reused now at all: reuse is on,
// and no leadership confirmation, recent pause or leadership transfer
// forbids it. When it is false, heartbeats go out one by one, as raft
// sends them.
func (h *heartbeats) mayReuse() bool {
	return h.reuse > 0 && h.confirming.Load() == 0 && !processPauses().recent() &&
		int64(time.Since(h.born)) >= h.noReuseUntil.Load()
}

// reused fills resp with id's last real answer and reports true if req may
// be answered without sending it.
func (h *heartbeats) reused(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) bool {
	beat, probe := isHeartbeat(req), isProbe(req)
	if !beat && !probe || !h.mayReuse() {
		return false
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.last[id]
	if !ok || a.term != req.Term || now.Sub(a.at) >= h.reuse {
		return false
	}
	if beat {
		if a.framedAt.IsZero() || now.Sub(a.framedAt) >= h.reuse {
			return false
		}
		*resp = a.resp
		return true
	}
	p, ok := h.probes[id]
	if !ok || p.term != req.Term || p.prevIndex != req.PrevLogEntry || p.prevTerm != req.PrevLogTerm ||
		p.commit != req.LeaderCommitIndex || now.Sub(p.sent) >= probeReuseFor {
		return false
	}
	*resp = p.resp
	return true
}

// answered records the answer to an AppendEntries that was sent one by
// one. A success (a heartbeat's or a replication's: the follower heard
// from its leader just as well) is the follower's last answer, which
// probes' reuse asks for; it keeps the term's last frame answer, which
// heartbeats' reuse asks for. A heartbeat's failure or any error ends
// reuse until the next success; a replication the follower refused (a log
// mismatch) is no answer to reuse either way, and ends the reuse of
// probes.
//
// sent is when req was sent: the follower handled it between then and its
// answer's arrival, so the answer's age counts from then.
func (h *heartbeats) answered(id raft.ServerID, sent time.Time, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, err error) {
	h.record(id, sent, req, resp, err, false)
}

// answeredFrame records the follower's answer to the shard's heartbeat in
// a frame sent at sent (or the frame's failure, err), which heartbeats
// may reuse.
func (h *heartbeats) answeredFrame(id raft.ServerID, sent time.Time, term uint64, resp *raft.AppendEntriesResponse, err error) {
	h.record(id, sent, &raft.AppendEntriesRequest{Term: term}, resp, err, true)
}

func (h *heartbeats) record(id raft.ServerID, sent time.Time, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, err error, framed bool) {
	beat := isHeartbeat(req)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil || (beat && !resp.Success):
		delete(h.last, id)
		delete(h.probes, id)
		return
	case beat || resp.Success:
		a := heartbeatAnswer{term: req.Term, at: sent, resp: answerCopy(resp)}
		if old, ok := h.last[id]; ok && old.term == req.Term {
			a.framedAt = old.framedAt
		}
		if framed {
			a.framedAt = sent
		}
		h.last[id] = a
	}
	switch {
	case beat:
	case !resp.Success:
		delete(h.probes, id)
	case isProbe(req):
		h.probes[id] = probeAnswer{term: req.Term, prevIndex: req.PrevLogEntry, prevTerm: req.PrevLogTerm,
			commit: req.LeaderCommitIndex, sent: sent, resp: answerCopy(resp)}
	}
}

// answerCopy is what a reused answer holds of resp: its term, last log
// index and success, and no RPCHeader. The header's byte slices belong to
// the goroutine that decoded resp, which decodes its next answer into
// them; a reused copy aliasing them would have two of raft's goroutines
// decoding into one array. raft's heartbeat goroutine reads only Success.
func answerCopy(resp *raft.AppendEntriesResponse) raft.AppendEntriesResponse {
	return raft.AppendEntriesResponse{Term: resp.Term, LastLog: resp.LastLog, Success: resp.Success, NoRetryBackoff: resp.NoRetryBackoff}
}

// beginConfirm and endConfirm bracket a leadership confirmation round:
// heartbeats in between are all sent.
func (h *heartbeats) beginConfirm() { h.confirming.Add(1) }
func (h *heartbeats) endConfirm()   { h.confirming.Add(-1) }

// transferring is called before and after this leader asks Raft to hand
// its leadership over: every heartbeat is sent from then until a
// heartbeat timeout after the last call.
func (h *heartbeats) transferring() {
	h.noReuseUntil.Store(int64(time.Since(h.born) + h.hold))
}
