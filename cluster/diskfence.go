package cluster

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/nodestore"
)

// DefaultMaxSyncDuration is kcoord.log.max.sync.ms's default: how long a
// write or fsync of the node store may stay in flight before the node
// fences itself. See docs/reliability.md for the measurements behind it:
// far above the slowest sync a loaded healthy disk showed, and low enough
// that a stall, the hand-off and a client's retry fit in a 10 s session.
const DefaultMaxSyncDuration = 2 * time.Second

// DiskState is the node's disk as its watchdog judges it.
type DiskState string

const (
	// DiskHealthy: every write of the node store completes within
	// kcoord.log.max.sync.ms.
	DiskHealthy DiskState = "healthy"
	// DiskStalled: a write has been in flight for longer; the node is
	// fenced until the disk answers again.
	DiskStalled DiskState = "stalled"
	// DiskFailed: a write or fsync failed (EIO, ENOSPC). The store takes
	// no more writes, and the node stays fenced until it restarts.
	DiskFailed DiskState = "failed"
)

// DiskHealth is the watchdog's latest judgement of the node's disk.
type DiskHealth struct {
	State DiskState `json:"state"`
	// Reason says what was seen, for /readyz, the status page and logs.
	Reason string `json:"reason,omitempty"`
	// Since is when the state began (zero for a disk healthy from the
	// start).
	Since time.Time `json:"since,omitzero"`
}

// Fenced reports whether the node fences itself for this state.
func (h DiskHealth) Fenced() bool { return h.State == DiskStalled || h.State == DiskFailed }

// diskFence is the node's one record of whether it is fenced for its disk:
// while it is, the node leads nothing (Shard.Leads), holds no request
// (Shard.Settling), names no one but others (LeaderOf, Brokers), and its
// Raft port neither dials nor answers (Mux.fence). Any goroutine reads it
// without blocking; only the disk watch changes it.
type diskFence struct {
	cur atomic.Pointer[DiskHealth]
	// mu guards fencedCh's swaps; readers of cur need no lock.
	mu       sync.Mutex
	fencedCh chan struct{} // closed while fenced, replaced when unfenced
	fences   atomic.Uint64 // times the node fenced itself (kcoord_log_disk_fences_total)
}

func newDiskFence() *diskFence {
	f := &diskFence{fencedCh: make(chan struct{})}
	f.cur.Store(&DiskHealth{State: DiskHealthy})
	return f
}

func (f *diskFence) health() DiskHealth { return *f.cur.Load() }

func (f *diskFence) fenced() bool { return f.cur.Load().Fenced() }

// done returns a channel that is closed once the node is fenced (at once
// while it is). Waits for Raft select on it, so that a fence ends them.
func (f *diskFence) done() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fencedCh
}

// set records h and reports what changed: whether the state changed, and
// whether the node became fenced or unfenced with it.
func (f *diskFence) set(h DiskHealth) (changed, fenced, unfenced bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *f.cur.Load()
	if old.State == h.State {
		return false, false, false
	}
	f.cur.Store(&h)
	switch {
	case h.Fenced() && !old.Fenced():
		close(f.fencedCh)
		f.fences.Add(1)
		return true, true, false
	case !h.Fenced() && old.Fenced():
		f.fencedCh = make(chan struct{})
		return true, false, true
	}
	return true, false, false
}

// DiskHealth is this node's disk as its watchdog last judged it. Cheap and
// non-blocking: /readyz and the status page call it.
func (n *Node) DiskHealth() DiskHealth { return n.disk.health() }

// DiskFaults is the fault hooks of this node's store (tests and fault
// harnesses: a stalled, slow or failing disk); nil with LogStoreShard.
func (n *Node) DiskFaults() *nodestore.Faults {
	if n.nodeStore == nil {
		return nil
	}
	return n.nodeStore.Faults()
}

// DiskFences counts the times this node fenced itself for its disk.
func (n *Node) DiskFences() uint64 { return n.disk.fences.Load() }

// diskProbe is what the watch reads of the node store: both calls read
// atomics, however stuck the store's committer is.
type diskProbe interface {
	Busy() time.Duration
	Failed() error
}

// diskWatch judges the node store's health every tick, from the disk
// watch goroutine (Node.diskWatchLoop), its only caller.
type diskWatch struct {
	store diskProbe
	max   time.Duration // kcoord.log.max.sync.ms
	// hold is how long a stalled disk must answer within max before the
	// node unfences: long enough for the shards it led to have elected
	// elsewhere, so that it comes back a follower and does not flap.
	hold time.Duration
	// answering is when the stalled disk last started answering (zero
	// while a write is still stuck).
	answering time.Time
	// speed judges whether the disk is slow against the peers'.
	speed slowJudge
}

// judge returns the disk's state at now given its current one; the same
// state means no change.
func (w *diskWatch) judge(cur DiskHealth, now time.Time) DiskHealth {
	if cur.State == DiskFailed {
		return cur // for good: the store takes no more writes
	}
	if err := w.store.Failed(); err != nil {
		return DiskHealth{State: DiskFailed, Since: now,
			Reason: fmt.Sprintf("a write or fsync of the log failed: %v; restart the node once the disk is fixed", err)}
	}
	busy := w.store.Busy()
	if busy >= w.max {
		w.answering = time.Time{}
		if cur.State == DiskStalled {
			return cur
		}
		return DiskHealth{State: DiskStalled, Since: now.Add(-busy),
			Reason: fmt.Sprintf("a write to the log has been in flight for %s (kcoord.log.max.sync.ms is %d)", busy.Round(time.Millisecond), w.max.Milliseconds())}
	}
	if cur.State != DiskStalled {
		return cur
	}
	if w.answering.IsZero() {
		w.answering = now
	}
	if now.Sub(w.answering) < w.hold {
		return cur
	}
	return DiskHealth{State: DiskHealthy, Since: now, Reason: fmt.Sprintf("the disk answered again after %s", now.Sub(cur.Since).Round(time.Millisecond))}
}

// diskWatchTick is how often the watch looks: a tenth of the bound, so a
// stall is fenced within 1.1 times it, within [5ms, 100ms].
func diskWatchTick(bound time.Duration) time.Duration {
	return min(max(bound/10, 5*time.Millisecond), 100*time.Millisecond)
}

// diskWatchLoop runs the watch until Shutdown, on a goroutine of its own
// that Start starts once the shards run. Nothing it calls touches the
// disk or waits for a goroutine that does.
func (n *Node) diskWatchLoop(w *diskWatch) {
	t := time.NewTicker(diskWatchTick(w.max))
	defer t.Stop()
	for {
		wake := n.diskWake.wait()
		var now time.Time
		select {
		case <-n.stop:
			return
		case now = <-t.C:
		case <-wake:
			now = time.Now()
		}
		cur := n.disk.health()
		if next := w.judge(cur, now); next.State != cur.State {
			n.setDiskHealth(next)
		}
		n.watchSpeed(&w.speed, now)
	}
}

// setDiskHealth records the disk's new state and fences or unfences the
// node for it. Called by the disk watch (and tests).
func (n *Node) setDiskHealth(h DiskHealth) {
	changed, fenced, unfenced := n.disk.set(h)
	if !changed {
		return
	}
	switch {
	case fenced:
		n.fenceForDisk(h)
	case unfenced:
		n.unfenceForDisk(h)
	default: // stalled, then failed
		n.logger.Error("node disk failed while fenced; it stays fenced until it restarts", "state", h.State, "reason", h.Reason)
	}
	n.routing.fire()
	n.announceDisk()
}

// fenceForDisk makes this node stop acting as a leader and leave routing
// at once, without touching the disk or waiting for anything that does:
// Raft's own goroutines may be parked in a write that never returns, and
// its replication goroutines would keep heartbeating for it, so the node
// cuts them off itself.
//
//  0. The Raft port stops accepting: no peer's RPC reaches Raft from now
//     on (a vote request would make a Raft whose disk failed store a
//     term, and hashicorp/raft panics when it cannot).
//  1. Leads answers false from now on, and Settling too but for the
//     shards it led, until gossip names their successors (handingOver);
//     waits for Raft (futures, leadership confirmations) end with
//     ErrLeadershipLost, and each shard's coordinator is told the
//     leadership is gone.
//  2. Each shard it led hands off: a TimeoutNow to the most caught-up live
//     voter makes it elect at once, rather than an election timeout after
//     the last heartbeat, which Raft's goroutines keep sending until 3.
//  3. The Raft port closes every connection and refuses new ones, and
//     every shard's election timers are parked (in step 1), so the fenced
//     node disturbs no term while it cannot write.
//
// Gossip then says the node is fenced, and other nodes route around it.
func (n *Node) fenceForDisk(h DiskHealth) {
	n.mux.Fence(raftnet.FenceInbound)
	n.metaSync.forget() // the replica cannot take the removals made meanwhile
	var led []*Shard
	for _, s := range n.all {
		if s.Raft.State() == raft.Leader {
			led = append(led, s)
		}
		s.fence()
	}
	if hook := n.fenceHook.Load(); hook != nil {
		(*hook)()
	}
	handed := n.handOffFenced(led)
	n.mux.Fence(raftnet.FenceAll)
	n.logger.Error("node disk unhealthy: fenced, leading and serving nothing until it answers again",
		"state", h.State, "reason", h.Reason, "led", len(led), "handed_off", handed)
}

// unfenceForDisk lets the node take part again, as a follower: its shards'
// election timers run, its Raft port opens, and a shard whose Raft still
// leads (no one else elected: a short stall, or a single node) is
// announced to its coordinator afresh, which serves it only once a barrier
// commits, so nothing stale is served.
func (n *Node) unfenceForDisk(h DiskHealth) {
	n.mux.Fence(raftnet.FenceNone)
	still := 0
	for _, s := range n.all {
		if s.unfence() {
			still++
		}
	}
	n.logger.Info("node disk answers again: unfenced, rejoining its shards", "reason", h.Reason, "still_leading", still)
}

// handOffWait bounds how long fencing waits for its TimeoutNow hand-offs
// before it closes the Raft port under them.
const handOffWait = 250 * time.Millisecond

// handOffFenced asks, for each shard in led, its most caught-up live voter
// to start an election now, through the shard's transport (not Raft's main
// loop, which may be parked on the disk). A TimeoutNow carries no term:
// Raft's follower becomes a candidate whose votes ignore the voters'
// stickiness to the current leader, as in a leadership transfer. Among
// equally caught-up voters the shards go to those leading the fewest, so
// that the balance does not move them a second time soon after (each
// move costs their groups' members a session restart with some clients).
// It returns how many voters accepted within handOffWait.
func (n *Node) handOffFenced(led []*Shard) int {
	leads := n.gossipedLeadCounts()
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for _, s := range led {
		target, ok := n.handOffTarget(s, leads)
		if !ok {
			continue
		}
		leads[voterID(target)]++
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
				ProtocolVersion: raft.ProtocolVersionMax,
				ID:              []byte(s.localID),
				Addr:            []byte(n.mux.Advertise()),
			}}
			if err := s.trans.TimeoutNow(target.ID, target.Address, req, &raft.TimeoutNowResponse{}); err != nil {
				s.logger.Debug("fenced hand-off refused", "shard", s.ID, "to", target.ID, "error", err)
				return
			}
			accepted.Add(1)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(handOffWait):
	}
	return int(accepted.Load())
}

// handOffTarget is the voter of s to hand its leadership to, among the
// live, unfenced ones: one that acknowledged the most of this leadership's
// log (a less caught-up candidate would lose its election to the other),
// and of those the one leads counts the fewest shards for, then the lowest
// id.
func (n *Node) handOffTarget(s *Shard, leads map[int32]int) (raft.Server, bool) {
	term := s.Raft.CurrentTerm()
	var best raft.Server
	var bestIndex uint64
	found := false
	for _, srv := range s.otherVoters() {
		addr := string(srv.Address)
		if n.mux.Deaths().IsDead(addr) || n.members.fencedAddr(addr) {
			continue
		}
		index, _ := s.trans.Acked(srv.ID, term)
		better := !found || index > bestIndex
		if found && index == bestIndex {
			id, bestID := voterID(srv), voterID(best)
			better = leads[id] < leads[bestID] || (leads[id] == leads[bestID] && id < bestID)
		}
		if better {
			best, bestIndex, found = srv, index, true
		}
	}
	return best, found
}

// gossipedLeadCounts is how many group shards each node leads, by the
// leader table (what gossip and this node's own Raft last announced).
func (n *Node) gossipedLeadCounts() map[int32]int {
	counts := map[int32]int{}
	for _, s := range n.shards {
		if e, ok := n.leaders.get(s.ID); ok {
			counts[e.Node]++
		}
	}
	return counts
}

// announceDisk gossips the disk's state in this node's meta. From the disk
// watch; memberlist's UpdateNode waits at most announceWait.
func (n *Node) announceDisk() {
	g := n.gossip
	if g == nil {
		return
	}
	h := n.disk.health()
	disk := ""
	if h.Fenced() {
		disk = string(h.State)
	}
	if g.updateSelf(func(m *nodeMeta) { m.Disk = disk }) {
		g.announce()
	}
}

// fencedTimeout is the HeartbeatTimeout and ElectionTimeout of a fenced
// node's shards: no election starts while the node cannot write its term,
// and none comes back with a term that would unseat the leaders elected
// meanwhile.
const fencedTimeout = time.Hour

// fence takes the shard out of service for a disk fence (fenceForDisk,
// step 1): pending futures fail, its election timers park, and a leader's
// coordinator is told the leadership is gone. Never blocks.
func (s *Shard) fence() {
	// The hand-over first: the requests the failed futures wake must
	// find the shard settling here (handingOver).
	l := s.leadership.load()
	if l.Leader {
		s.handover.begin(l.Term)
	}
	s.failPendingWith(raft.ErrLeadershipLost)
	s.paceHeartbeats(s.IsLeader())
	if l.Leader {
		s.notifyAsync(false)
	}
}

// unfence puts the shard back in service after a disk fence: its timers
// run again, and a Raft that still leads is announced as a new leadership
// epoch, which its coordinator serves only after a barrier commits.
// It reports whether Raft still leads.
func (s *Shard) unfence() bool {
	s.handover.end()
	leader := s.IsLeader()
	s.paceHeartbeats(leader)
	if leader {
		s.notifyAsync(true)
	}
	return leader
}

// notifyAsync delivers a leadership notification of kcoord's own through
// the shard's leadership goroutine, in order with Raft's, without waiting:
// the buffer holds notifyBuffer, far more than are ever pending.
func (s *Shard) notifyAsync(leader bool) {
	select {
	case s.notifyCh <- leader:
	default:
		s.logger.Warn("leadership notification dropped: the shard's notification buffer is full", "shard", s.ID, "leader", leader)
	}
}

// fencedFuture is the answer to a write proposed while the node is fenced.
func fencedFuture() *shardFuture { return failedFuture(raft.ErrLeadershipLost) }

// failedFuture is a future that failed with err before Raft saw it.
func failedFuture(err error) *shardFuture {
	sf := &shardFuture{done: make(chan struct{})}
	sf.finish(err, true)
	return sf
}
