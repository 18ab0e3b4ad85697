package raftnet

import (
	"sync"
	"sync/atomic"
	"time"
)

// pauseWatch notices that this process stopped running for a while (a
// SIGSTOP, a frozen VM, a suspended host), so leadership confirmations can
// stop trusting what a pause makes stale.
//
// raft's VerifyLeader counts the next answer each follower sends, and an
// answer to a heartbeat sent before the confirmation began counts too.
// While the process runs, such an answer is recent: the leader's lease
// check steps it down well before a newer leader can be elected. But an
// answer that sat unread in the socket of a paused leader can be from
// before a newer leader's election, and right after the pause it can win
// the race against the lease check. So while a pause is recent, rounds
// commit a barrier instead (see cluster.Shard.confirmRound), which no answer older
// than the round can satisfy.
//
// One watch serves the process: a goroutine ticks every pauseTick and
// records when it last ran, on the monotonic clock and on the wall clock
// (the monotonic one stands still while a host is suspended). A gap longer
// than pauseGap on either marks a pause, and confirmations stay cautious
// for pauseSettle after it, time enough for every answer buffered during
// the pause to be read. A tick that is overdue counts as a pause too: after
// a resume, a read can run before the ticker does.
type pauseWatch struct {
	mono func() int64 // monotonic nanoseconds
	wall func() int64 // wall-clock nanoseconds

	lastMono atomic.Int64 // at the last tick
	lastWall atomic.Int64 // at the last tick
	until    atomic.Int64 // cautious until, monotonic nanoseconds
}

const (
	// pauseTick is how often the watch's goroutine runs: four ticks to a
	// gap, and at 10ms its wakeups were a fifteenth of an idle node's.
	pauseTick = 25 * time.Millisecond
	// pauseGap is the longest gap between ticks that is not a pause: many
	// ticks, yet well under LeaderLeaseTimeout (250 ms by default) and
	// HeartbeatTimeout (500 ms), the gaps a stale answer needs to predate
	// a newer leader.
	pauseGap = 100 * time.Millisecond
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
		start := time.Now()
		pauses = newPauseWatch(func() int64 { return int64(time.Since(start)) }, func() int64 { return time.Now().UnixNano() })
		go pauses.run()
	})
	return pauses
}

func newPauseWatch(mono, wall func() int64) *pauseWatch {
	w := &pauseWatch{mono: mono, wall: wall}
	w.lastMono.Store(mono())
	w.lastWall.Store(wall())
	return w
}

// run ticks for the life of the process.
func (w *pauseWatch) run() {
	t := time.NewTicker(pauseTick)
	defer t.Stop()
	for range t.C {
		w.tick()
	}
}

// tick records that the process runs. A pause it ends is marked before
// the tick is recorded, so recent never sees a fresh tick without the
// pause it ended.
func (w *pauseWatch) tick() {
	mono, wall := w.mono(), w.wall()
	if mono-w.lastMono.Load() > int64(pauseGap) || wall-w.lastWall.Load() > int64(pauseGap) {
		w.mark(mono)
	}
	w.lastMono.Store(mono)
	w.lastWall.Store(wall)
}

// mark records a pause that ended at mono.
func (w *pauseWatch) mark(mono int64) {
	until := mono + int64(pauseSettle)
	for {
		cur := w.until.Load()
		if cur >= until || w.until.CompareAndSwap(cur, until) {
			return
		}
	}
}

// recent reports whether the process was paused lately, or may be just
// resuming from a pause the ticker has not run since (its tick is overdue).
func (w *pauseWatch) recent() bool {
	mono, wall := w.mono(), w.wall()
	return mono < w.until.Load() ||
		mono-w.lastMono.Load() > int64(pauseGap) || wall-w.lastWall.Load() > int64(pauseGap)
}

// PausedRecently reports whether this process was paused lately (a
// SIGSTOP, a frozen VM), or may be just resuming from a pause: what a
// pause makes stale, a leadership confirmation must not trust. Any
// goroutine may call it; the first call starts the process's watch.
func PausedRecently() bool { return processPauses().recent() }

// MarkPause records a pause that ended now, as the watch's ticker does
// after a long gap between its ticks: PausedRecently holds for
// pauseSettle. For tests.
func MarkPause() {
	w := processPauses()
	w.mark(w.mono())
}
