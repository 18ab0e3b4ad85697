package nodestore

import (
	"sync"
	"time"
)

// Faults makes the store's disk misbehave the ways real disks do, for
// in-process tests of what sits above it (the cluster's disk watchdog, Raft
// under a slow or stuck log): a stall that blocks every write and fsync, a
// delay on each fsync, and an fsync or write that fails. They act inside the
// committer, where the write(2) and fdatasync calls are, so the store
// behaves as it would on such a disk: a stalled commit keeps Busy growing
// and every writer queued behind it waits, a failure is sticky (ErrFailed).
//
// Get them with Store.Faults. Safe for concurrent use; a change applies
// from the committer's next write or fsync. Close ends a stall (a real one
// would not end, and Close would wait for it).
type Faults struct {
	mu      sync.Mutex
	stalled chan struct{} // closed when the stall ends; nil: no stall
	delay   time.Duration // slept before each fsync
	failSync,
	failWrite error // returned instead of the next fsync or write
}

// Faults returns the store's fault hooks (tests and fault harnesses).
func (s *Store) Faults() *Faults { return &s.faults }

// Stall blocks every write and fsync of the log, from the committer's next
// one, until resume is called (idempotent) or the store closes: a disk
// that stopped answering.
func (f *Faults) Stall() (resume func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stalled == nil {
		f.stalled = make(chan struct{})
	}
	ch := f.stalled
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.stalled == ch {
				f.stalled = nil
			}
			close(ch)
		})
	}
}

// SlowSyncs makes every fsync take d longer until restore is called: a
// disk that answers, slowly.
func (f *Faults) SlowSyncs(d time.Duration) (restore func()) {
	f.mu.Lock()
	f.delay = d
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.delay = 0
		f.mu.Unlock()
	}
}

// FailNextSync makes the next fsync return err instead of syncing (an EIO
// from a failing device), which fails the store for good (ErrFailed).
func (f *Faults) FailNextSync(err error) {
	f.mu.Lock()
	f.failSync = err
	f.mu.Unlock()
}

// FailNextWrite makes the next write return err instead of writing (ENOSPC
// when the disk is full), which fails the store for good (ErrFailed).
func (f *Faults) FailNextWrite(err error) {
	f.mu.Lock()
	f.failWrite = err
	f.mu.Unlock()
}

// beforeWrite runs on the committer before each write of a commit: it
// waits out a stall (or closing) and returns a planted write failure.
func (f *Faults) beforeWrite(closing <-chan struct{}) error {
	f.waitStall(closing)
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.failWrite
	f.failWrite = nil
	return err
}

// beforeSync runs on the committer before each fsync of a commit: it waits
// out a stall (or closing), sleeps the planted delay and returns a planted
// sync failure.
func (f *Faults) beforeSync(closing <-chan struct{}) error {
	f.waitStall(closing)
	f.mu.Lock()
	delay, err := f.delay, f.failSync
	f.failSync = nil
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-closing:
		}
	}
	return err
}

func (f *Faults) waitStall(closing <-chan struct{}) {
	f.mu.Lock()
	ch := f.stalled
	f.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-closing:
	}
}
