package cluster

import (
	"cmp"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A disk that answers, slowly, fences nothing, yet a leader on it makes
// every commit of its shards wait for its own fsync (hashicorp/raft's
// leader stores an entry before it replicates it). So a node whose group
// commits are much slower than its peers' for a while hands its
// leaderships to faster voters, and the others' balance loops give it
// none back, until its disk is fast again. A slow follower needs nothing:
// the leader commits on the fastest quorum (cluster tests pin it).
const (
	// slowFactor: a node is slow when its syncs take this many times
	// longer than the fastest peer's...
	slowFactor = 8
	// defaultSlowSyncFloor: ...and at least this long. A healthy sync is a
	// tenth of a millisecond here, 5-21 ms at worst beside a bulk writer
	// (nodestore.BenchmarkSyncLatencyBesideBulkWrites).
	defaultSlowSyncFloor = 50 * time.Millisecond
	// slowWindows: ...in each of this many one-second windows in a row
	// (windows without a commit do not count, either way).
	slowWindows = 3
)

// syncStats accumulates the node store's group-commit times between two
// looks of the disk watch. The store's committer adds to it
// (Config.ObserveLogSync's path); the watch takes it.
type syncStats struct {
	sum atomic.Int64 // nanoseconds
	n   atomic.Int64
}

func (s *syncStats) observe(d time.Duration) {
	s.sum.Add(int64(d))
	s.n.Add(1)
}

// take returns the mean since the last take and how many commits it
// covers, and starts afresh.
func (s *syncStats) take() (time.Duration, int64) {
	n := s.n.Swap(0)
	sum := s.sum.Swap(0)
	if n == 0 {
		return 0, 0
	}
	return time.Duration(sum / n), n
}

// slowJudge is the disk watch's view of how fast this node's syncs are
// against its peers'. Only the disk watch goroutine uses it.
type slowJudge struct {
	floor  time.Duration
	last   time.Time
	recent []time.Duration // the last slowWindows windows' means, oldest first
	slow   bool
}

// window records one window's mean sync time (skipped when no commit ran).
func (j *slowJudge) window(mean time.Duration, commits int64) {
	if commits == 0 {
		return
	}
	j.recent = append(j.recent, mean)
	if len(j.recent) > slowWindows {
		j.recent = j.recent[1:]
	}
}

// sustained is the fastest of the recent windows: the sync time the node
// kept up for all of them (0 until there are slowWindows).
func (j *slowJudge) sustained() time.Duration {
	if len(j.recent) < slowWindows {
		return 0
	}
	return slices.Min(j.recent)
}

// judge decides whether this node is slow given the fastest peer's
// gossiped sync time (0: no peer reports one). It leaves the slow state
// only once the node is well under the bar again, so it does not flap.
func (j *slowJudge) judge(fastestPeer time.Duration) bool {
	own := j.sustained()
	if fastestPeer <= 0 || own <= 0 {
		j.slow = false
		return false
	}
	if j.slow {
		j.slow = own >= j.floor/2 && own >= fastestPeer*slowFactor/2
	} else {
		j.slow = own >= j.floor && own >= fastestPeer*slowFactor
	}
	return j.slow
}

// syncBucket rounds a sync time to the power of two microseconds at or
// above it, so gossip changes only when the speed does by half again.
func syncBucket(d time.Duration) int64 {
	us := d.Microseconds()
	if us <= 0 {
		return 0
	}
	return 1 << bits.Len64(uint64(us-1))
}

// watchSpeed runs once a second on the disk watch: it gossips this node's
// sync time and whether it is slow, and a slow node that leads hands its
// leaderships to the fastest live voters. Nothing here waits for the
// disk; the hand-offs run on a goroutine of their own.
func (n *Node) watchSpeed(j *slowJudge, now time.Time) {
	if now.Sub(j.last) < time.Second {
		return
	}
	j.last = now
	j.window(n.syncs.take())
	was := j.slow
	slow := j.judge(n.members.fastestSync(n.cfg.NodeID))
	n.slowDisk.Store(slow)
	if g := n.gossip; g != nil && g.updateSelf(func(m *nodeMeta) {
		m.SyncMicros, m.SlowDisk = syncBucket(j.sustained()), slow
	}) {
		g.announce()
	}
	switch {
	case slow && !was:
		n.logger.Warn("node disk slow: handing its leaderships to faster voters",
			"sync", j.sustained(), "fastest_peer_sync", n.members.fastestSync(n.cfg.NodeID))
	case !slow && was:
		n.logger.Info("node disk fast again: it may lead again", "sync", j.sustained())
	}
	if slow && !n.disk.fenced() && n.handingOff.CompareAndSwap(false, true) {
		go func() {
			defer n.handingOff.Store(false)
			n.handOffSlow()
		}()
	}
}

// handOffSlow transfers every shard this node leads to its fastest live,
// unfenced voter that is not slow. From watchSpeed's goroutine; each
// transfer waits for Raft's answer.
func (n *Node) handOffSlow() {
	var moved atomic.Int64
	var wg sync.WaitGroup
	for _, s := range n.all {
		if !s.IsLeader() {
			continue
		}
		target, ok := n.fastestVoter(s)
		if !ok {
			continue
		}
		// All at once: each waits for the slow log, not for the others.
		wg.Go(func() {
			if err := s.transferLeadership(target.ID, target.Address); err != nil {
				n.logger.Debug("slow-disk hand-off failed", "shard", s.ID, "to", target.ID, "error", err)
				return
			}
			moved.Add(1)
		})
	}
	wg.Wait()
	if m := moved.Load(); m > 0 {
		n.logger.Info("moved shard leadership off a slow disk", "shards", m)
	}
}

// fastestVoter is the voter of s, other than this node, with the fastest
// gossiped syncs among the live, unfenced, not slow ones.
func (n *Node) fastestVoter(s *Shard) (raft.Server, bool) {
	var best raft.Server
	bestSync := int64(-1)
	for _, srv := range s.otherVoters() {
		id := voterID(srv)
		sync, ok := n.members.speed(id)
		if !ok || n.mux.Deaths().IsDead(string(srv.Address)) {
			continue
		}
		if bestSync < 0 || sync < bestSync {
			best, bestSync = srv, sync
		}
	}
	return best, bestSync >= 0
}

// speed returns member id's gossiped sync time in microseconds, if it is
// a member that may lead: not fenced, not slow.
func (t *memberTable) speed(id int32) (int64, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m, ok := t.m[id]
	return m.syncMicros, ok && m.disk == "" && !m.slow
}

// fastestSync is the fastest sync time any member but self gossips (0
// when none does).
func (t *memberTable) fastestSync(self int32) time.Duration {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var us []int64
	for id, m := range t.m {
		if id != self && m.syncMicros > 0 && m.disk == "" {
			us = append(us, m.syncMicros)
		}
	}
	if len(us) == 0 {
		return 0
	}
	return time.Duration(slices.MinFunc(us, cmp.Compare[int64])) * time.Microsecond
}

// slowNode reports whether member id gossips that its disk is slow.
func (t *memberTable) slowNode(id int32) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[id].slow
}
