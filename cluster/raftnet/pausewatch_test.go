package raftnet

import (
	"testing"
	"time"
)

// TestPauseWatchSeesEveryKindOfPause: a gap between ticks on either clock
// (the monotonic one stands still while a host is suspended) marks a
// pause, a tick that is overdue counts as one before the ticker runs, and
// the caution ends pauseSettle after the pause.
func TestPauseWatchSeesEveryKindOfPause(t *testing.T) {
	var mono, wall int64 = 1, 1_000
	w := newPauseWatch(func() int64 { return mono }, func() int64 { return wall })
	step := func(d time.Duration, clocks ...*int64) {
		for _, c := range clocks {
			*c += int64(d)
		}
	}
	for range 20 {
		step(pauseTick, &mono, &wall)
		w.tick()
		if w.recent() {
			t.Fatal("regular ticks count as a pause")
		}
	}
	step(time.Second, &mono, &wall) // SIGSTOP: both clocks move, nothing ran
	if !w.recent() {
		t.Fatal("an overdue tick does not count as a pause")
	}
	w.tick()
	if !w.recent() {
		t.Fatal("the tick that ended a pause did not mark it")
	}
	for range int(pauseSettle/pauseTick) + 1 {
		step(pauseTick, &mono, &wall)
		w.tick()
	}
	if w.recent() {
		t.Fatal("still cautious after pauseSettle")
	}
	step(time.Second, &wall) // suspended host: the monotonic clock stood still
	step(pauseTick, &mono, &wall)
	w.tick()
	if !w.recent() {
		t.Fatal("a suspend (wall clock jump) is not a pause")
	}
}
