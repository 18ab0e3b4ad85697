package testlog

import (
	"testing"
	"time"
)

// fakeT records its lines and cleanups; its Log blocks while hold is open.
type fakeT struct {
	lines    chan string
	hold     chan struct{}
	cleanups []func()
}

func (f *fakeT) Helper()           {}
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Log(args ...any) {
	<-f.hold
	f.lines <- args[0].(string)
}

func (f *fakeT) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// A line written while the test ends reaches t.Log before the test's end
// returns, and nothing written after it does: testing panics on a Log
// after the test completed.
func TestNoLineReachesTheTestAfterItEnded(t *testing.T) {
	f := &fakeT{lines: make(chan string, 2), hold: make(chan struct{})}
	w := Writer(f)
	go func() { _, _ = w.Write([]byte("late line\n")) }()
	time.Sleep(20 * time.Millisecond) // the Write is inside Log, held
	ended := make(chan struct{})
	go func() { f.end(); close(ended) }()
	select {
	case <-ended:
		t.Fatal("the test ended while a line was being logged")
	case <-time.After(50 * time.Millisecond):
	}
	close(f.hold)
	<-ended
	if got := <-f.lines; got != "late line" {
		t.Errorf("logged %q", got)
	}
	if _, err := w.Write([]byte("after the end\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-f.lines:
		t.Errorf("%q reached the test after it ended", l)
	default:
	}
}
