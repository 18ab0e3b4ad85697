package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// heartbeatReuse is the default share of HeartbeatTimeout
// (Config.HeartbeatReuse) for which a follower's answer may answer a shard
// leader's next heartbeats to it instead of their crossing the network
// (see heartbeats).
//
// hashicorp/raft heartbeats every follower at a random interval between a
// tenth and a fifth of HeartbeatTimeout (50–100 ms by default), for every
// shard: with 50 shards at replication factor 3 that is about 1,300 RPCs a
// second across three idle nodes, each a msgpack round trip that wakes
// four goroutines, and the bulk of what an idle cluster costs. Reusing
// answers for 2/10 of it sends about one heartbeat in two. A follower then
// hears from its leader at least every 2/10 + 2/10 of HeartbeatTimeout
// (200 ms), plus a round trip and timer lateness: within the half of it
// after which kcoord calls a follower cut off from its leader
// (Shard.Settling, LeaderOf), and far within its own election timeout.
// Config.Validate keeps a HeartbeatReuse of one's own to those bounds.
const heartbeatReuse = 2.0 / 10

// heartbeats thins a shard leader's heartbeats. hashicorp/raft's heartbeat
// goroutine uses an answer for two things only: it refreshes the
// follower's last contact (the leader lease counts it) and counts towards
// VerifyLeader rounds; it ignores the answer's term. So when a real
// heartbeat or replication to the same follower succeeded, in the same
// term, less than reuse ago, the transport answers the next heartbeat
// with it at once.
//
// What it must not weaken:
//   - Leadership confirmations (Shard.confirmRound): while one is in
//     progress (confirming > 0) every heartbeat is sent. An answer reused
//     just before a round began may still be counted by it, as raft counts
//     a real answer to a heartbeat sent before the round: the answer is at
//     most reuse old (from the time its request was sent), and a follower
//     that answered the leader does not vote for another candidate
//     (hashicorp/raft's leader stickiness) until its heartbeat timeout,
//     longer than reuse, has passed. Stickiness does not hold for a vote
//     in a leadership transfer, so nothing is reused from the moment this
//     leader starts one until a heartbeat timeout after it ended
//     (transferring): by then it has stepped down, or it has heard
//     from every follower since.
//   - Pauses: after this process was paused (pauseWatch) nothing is
//     reused, since a stalled monotonic clock makes old answers look
//     young.
//   - The lease: a dead follower's last contact stays fresh up to reuse
//     longer, so a partitioned leader steps down up to that much later
//     (LeaderLeaseTimeout + reuse). Followers elect on their own timeouts,
//     so failover time does not change.
//   - Placement's catch-up check (matchTracker) only counts real answers.
//
// Raft's heartbeat goroutines (one per follower) call it concurrently;
// the read index calls beginConfirm/endConfirm. Nothing blocks beyond a
// short mutex.
type heartbeats struct {
	reuse      time.Duration
	confirming atomic.Int32
	// noReuseUntil is when the last leadership transfer's no-reuse
	// window ends, in monotonic nanoseconds since born (transferring).
	noReuseUntil atomic.Int64
	hold         time.Duration // that window after a transfer: HeartbeatTimeout
	born         time.Time

	mu   sync.Mutex
	last map[raft.ServerID]heartbeatAnswer
}

// heartbeatAnswer is a follower's last real answer to a heartbeat.
type heartbeatAnswer struct {
	term uint64
	at   time.Time
	resp raft.AppendEntriesResponse
}

// newHeartbeats reuses answers for reuse (Config.HeartbeatReuse); zero or
// negative sends every heartbeat. heartbeatTimeout is the shard's.
func newHeartbeats(reuse, heartbeatTimeout time.Duration) *heartbeats {
	return &heartbeats{
		reuse: reuse,
		hold:  heartbeatTimeout,
		born:  time.Now(),
		last:  make(map[raft.ServerID]heartbeatAnswer),
	}
}

// isHeartbeat reports whether req is what raft's heartbeat goroutine
// sends: a term and a leader, no log position, entries or commit index.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	return len(req.Entries) == 0 && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 && req.LeaderCommitIndex == 0
}

// reused fills resp with id's last real answer and reports true if req may
// be answered without sending it.
func (h *heartbeats) reused(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) bool {
	if h.reuse <= 0 || !isHeartbeat(req) || h.confirming.Load() > 0 || processPauses().recent() ||
		int64(time.Since(h.born)) < h.noReuseUntil.Load() {
		return false
	}
	h.mu.Lock()
	a, ok := h.last[id]
	h.mu.Unlock()
	if !ok || a.term != req.Term || time.Since(a.at) >= h.reuse {
		return false
	}
	*resp = a.resp
	return true
}

// answered records the answer to an AppendEntries that was sent. A
// heartbeat's success becomes reusable; so does a replication's, as a
// heartbeat's answer (the follower heard from its leader just as well), so
// under load hardly any heartbeat is sent. A heartbeat's failure or any
// error ends reuse until the next success; a replication the follower
// refused (a log mismatch) is no answer to reuse either way.
//
// sent is when req was sent: the follower handled it between then and its
// answer's arrival, so the answer's age counts from then.
func (h *heartbeats) answered(id raft.ServerID, sent time.Time, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, err error) {
	beat := isHeartbeat(req)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil || (beat && !resp.Success):
		delete(h.last, id)
	case beat || resp.Success:
		h.last[id] = heartbeatAnswer{term: req.Term, at: sent, resp: answerCopy(resp)}
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
