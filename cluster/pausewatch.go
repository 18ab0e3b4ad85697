package cluster

import (
	"sync"
	"sync/atomic"
	"time"
)

// pauseWatch notices that this process stopped running for a while (a
// SIGSTOP, a frozen VM, a host that stopped scheduling it), so leadership
// confirmations can stop trusting what a pause makes stale.
//
// raft's VerifyLeader counts the next answer each follower sends, and an
// answer to a heartbeat sent before the confirmation began counts too.
// While the process runs, such an answer is recent: the leader's lease
// check steps it down well before a newer leader can be elected. But an
// answer that sat unread in the socket of a paused leader can be from
// before a newer leader's election, and right after the pause it can win
// the race against the lease check. So while a pause is recent, rounds
// commit a barrier instead (see Shard.confirmRound), which no answer older
// than the round can satisfy.
//
// One watch serves the process: a goroutine ticks every pauseTick and
// records when it last ran; a gap longer than pauseGap marks a pause, and
// confirmations stay cautious for pauseSettle after it, time enough for
// every answer buffered during the pause to be read.
type pauseWatch struct {
	start    time.Time
	lastTick atomic.Int64 // nanoseconds since start, by the ticker
	until    atomic.Int64 // cautious until, nanoseconds since start
}

const (
	// pauseTick is how often the watch's goroutine runs.
	pauseTick = 10 * time.Millisecond
	// pauseGap is the longest gap between ticks that is not a pause:
	// several ticks, and well under LeaderLeaseTimeout (250 ms by default),
	// the staleness a lease check bounds.
	pauseGap = 50 * time.Millisecond
	// pauseSettle is how long confirmations stay cautious after a pause.
	pauseSettle = 2 * time.Second
)

var (
	pausesOnce sync.Once
	pauses     *pauseWatch
)

// processPauses starts the process's pause watch on first use.
func processPauses() *pauseWatch {
	pausesOnce.Do(func() {
		pauses = &pauseWatch{start: time.Now()}
		go pauses.run()
	})
	return pauses
}

// run ticks for the life of the process.
func (w *pauseWatch) run() {
	t := time.NewTicker(pauseTick)
	defer t.Stop()
	for range t.C {
		now := w.now()
		if gap := now - w.lastTick.Swap(now); gap > int64(pauseGap) {
			w.mark(now)
		}
	}
}

func (w *pauseWatch) now() int64 { return int64(time.Since(w.start)) }

// mark records a pause that ended at now (nanoseconds since start).
func (w *pauseWatch) mark(now int64) {
	until := now + int64(pauseSettle)
	for {
		cur := w.until.Load()
		if cur >= until || w.until.CompareAndSwap(cur, until) {
			return
		}
	}
}

// recent reports whether the process was paused lately, or may be just
// resuming from a pause the ticker has not run since (its last tick is
// overdue).
func (w *pauseWatch) recent() bool {
	now := w.now()
	return now < w.until.Load() || now-w.lastTick.Load() > int64(pauseGap)
}
