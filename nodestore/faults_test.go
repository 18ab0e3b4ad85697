package nodestore

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestStalledDiskShowsAsGrowingBusy: while the disk does not answer, the
// commit in progress shows in Busy, growing, and its writer waits; once the
// disk answers the write is durable and Busy is back to zero.
func TestStalledDiskShowsAsGrowingBusy(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	if b := s.Busy(); b != 0 {
		t.Fatalf("Busy of an idle store = %v, want 0", b)
	}
	resume := s.Faults().Stall()
	done := make(chan error, 1)
	go func() { done <- ss.StoreLogs(entries(1, 3)) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Busy() < 50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatal("Busy did not grow while the disk stalled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("a write returned while the disk stalled: %v", err)
	default:
	}
	first := s.Busy()
	time.Sleep(20 * time.Millisecond)
	if s.Busy() <= first {
		t.Fatalf("Busy stood still at %v during a stall", first)
	}
	resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The writer is answered inside the commit, just before the
	// committer clears Busy.
	for deadline := time.Now().Add(5 * time.Second); s.Busy() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Busy after the stall = %v, want 0", s.Busy())
		}
	}
	wantBounds(t, ss, 1, 3)
}

// TestFailedSyncFailsTheStoreVisibly: an fsync that answers EIO fails its
// write and every later one, and Failed says why, for the node to fence
// itself without writing.
func TestFailedSyncFailsTheStoreVisibly(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(1, 2))
	if err := s.Failed(); err != nil {
		t.Fatalf("Failed of a healthy store = %v", err)
	}
	s.Faults().FailNextSync(syscall.EIO)
	if err := ss.StoreLogs(entries(3, 3)); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("write over a failing fsync = %v, want ErrFailed wrapping EIO", err)
	}
	if err := s.Failed(); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Failed = %v, want ErrFailed wrapping EIO", err)
	}
	if err := ss.SetUint64([]byte("CurrentTerm"), 2); !errors.Is(err, ErrFailed) {
		t.Fatalf("a later write = %v, want ErrFailed", err)
	}
	wantBounds(t, ss, 1, 2)
}

// TestFullDiskFailsTheStore: a write refused for want of space fails the
// store as a failed fsync does, and what was durable before stays.
func TestFullDiskFailsTheStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	s := openTestStoreAt(t, dir)
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(1, 4))
	s.Faults().FailNextWrite(syscall.ENOSPC)
	if err := ss.StoreLogs(entries(5, 5)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk = %v, want ENOSPC", err)
	}
	if !errors.Is(s.Failed(), syscall.ENOSPC) {
		t.Fatalf("Failed = %v, want ENOSPC", s.Failed())
	}
	s = reopen(t, s)
	wantBounds(t, shard(t, s, 0), 1, 4)
}

// TestSyncLatencyIsObserved: every group commit reports its write and
// fsync time, a slow disk's included.
func TestSyncLatencyIsObserved(t *testing.T) {
	var n atomic.Int64
	var slowest atomic.Int64
	s := openTestStoreWith(t, filepath.Join(t.TempDir(), "wal"), Options{ObserveSync: func(d time.Duration) {
		n.Add(1)
		if int64(d) > slowest.Load() {
			slowest.Store(int64(d))
		}
	}})
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(1, 1))
	restore := s.Faults().SlowSyncs(30 * time.Millisecond)
	storeLogs(t, ss, entries(2, 2))
	restore()
	storeLogs(t, ss, entries(3, 3))
	if n.Load() != 3 {
		t.Fatalf("observed %d syncs, want 3", n.Load())
	}
	if time.Duration(slowest.Load()) < 30*time.Millisecond {
		t.Fatalf("slowest observed sync %v, want at least the planted 30ms", time.Duration(slowest.Load()))
	}
}
