package transport

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// acquireAsync calls p.acquire on a goroutine of its own; the channel
// yields its result.
func acquireAsync(ctx context.Context, p *memoryPool, sizeBytes int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- p.acquire(ctx, sizeBytes) }()
	return done
}

func waitingReaders(t *testing.T, p *memoryPool, n int64) {
	t.Helper()
	waitFor(t, 2*time.Second, "waiting readers", func() bool { return p.waitingReaders.Load() == n })
}

func mustBeWaiting(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s granted while it cannot fit: %v", what, err)
	case <-time.After(20 * time.Millisecond):
	}
}

func mustBeGranted(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("%s not granted", what)
	}
}

// TestMemoryPoolGrantsWholeFramesOldestFirstLettingFittingOnesPass: a
// frame is granted only when all of it fits; on release the oldest waiter
// that fits goes first, and a small frame passes a large one that does not
// fit.
func TestMemoryPoolGrantsWholeFramesOldestFirstLettingFittingOnesPass(t *testing.T) {
	p := newMemoryPool(100)
	ctx := testCtx(t)
	if err := p.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	large := acquireAsync(ctx, p, 50)
	waitingReaders(t, p, 1)
	mustBeWaiting(t, "50 bytes with 40 free", large)
	if err := p.acquire(ctx, 30); err != nil { // fits: passes the waiting 50
		t.Fatal(err)
	}
	small := acquireAsync(ctx, p, 20)
	waitingReaders(t, p, 2)
	p.release(30) // 40 free: the 50 still waits, the 20 behind it fits
	mustBeGranted(t, "20 bytes with 40 free", small)
	mustBeWaiting(t, "50 bytes with 20 free", large)
	p.release(60)
	mustBeGranted(t, "50 bytes with 80 free", large)
	if used := p.usedBytes.Load(); used != 70 {
		t.Fatalf("used %d bytes, want 70", used)
	}
	p.release(20)
	p.release(50)
	if used, avail := p.usedBytes.Load(), p.availableBytes(); used != 0 || avail != 100 {
		t.Fatalf("after releasing everything: used %d, available %d", used, avail)
	}
}

// TestMemoryPoolWaitEndsWithItsContextHoldingNothing: a waiter whose ctx
// ends gets ctx's error, holds nothing and is not granted later.
func TestMemoryPoolWaitEndsWithItsContextHoldingNothing(t *testing.T) {
	p := newMemoryPool(100)
	if err := p.acquire(testCtx(t), 100); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := acquireAsync(ctx, p, 10)
	waitingReaders(t, p, 1)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("acquire = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("wait did not end with its context")
	}
	waitingReaders(t, p, 0)
	p.release(100)
	if used := p.usedBytes.Load(); used != 0 {
		t.Fatalf("a cancelled waiter was granted: %d bytes used", used)
	}
}

// TestMemoryPoolRejectsFrameLargerThanItself: no wait could grant it.
func TestMemoryPoolRejectsFrameLargerThanItself(t *testing.T) {
	p := newMemoryPool(100)
	if err := p.acquire(testCtx(t), 101); !errors.Is(err, ErrFrameExceedsQueuedMaxRequestBytes) {
		t.Fatalf("acquire(101) = %v", err)
	}
	if used := p.usedBytes.Load(); used != 0 {
		t.Fatalf("used %d", used)
	}
}

// TestUnboundedMemoryPoolOnlyCounts: queued.max.request.bytes=-1 never
// waits and still reports what is held.
func TestUnboundedMemoryPoolOnlyCounts(t *testing.T) {
	p := newMemoryPool(UnboundedQueuedMaxRequestBytes)
	for range 3 {
		if err := p.acquire(testCtx(t), 1<<40); err != nil {
			t.Fatal(err)
		}
	}
	if used := p.usedBytes.Load(); used != 3<<40 {
		t.Fatalf("used %d", used)
	}
	for range 3 {
		p.release(1 << 40)
	}
	if used, avail := p.usedBytes.Load(), p.availableBytes(); used != 0 || avail != -1 {
		t.Fatalf("used %d, available %d", used, avail)
	}
}

// TestMemoryPoolNeverHoldsMoreThanItsCapacity: many goroutines acquire
// and release random sizes, some giving up on a deadline; the pool never
// holds more than its capacity and ends empty.
func TestMemoryPoolNeverHoldsMoreThanItsCapacity(t *testing.T) {
	const capacity = 1000
	p := newMemoryPool(capacity)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				size := 1 + r.Int64N(capacity)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
				err := p.acquire(ctx, size)
				cancel()
				if err != nil {
					continue
				}
				if used := p.usedBytes.Load(); used > capacity {
					t.Errorf("%d bytes held, capacity %d", used, capacity)
				}
				if r.IntN(4) == 0 {
					runtime.Gosched()
				}
				p.release(size)
			}
		}()
	}
	wg.Wait()
	p.mu.Lock()
	waiters := p.waiters.Len()
	p.mu.Unlock()
	if used := p.usedBytes.Load(); used != 0 || waiters != 0 || p.waitingReaders.Load() != 0 {
		t.Fatalf("after the run: %d bytes used, %d waiters", used, waiters)
	}
}

// TestMemoryPoolCollectsBeforeRegrantingReleasedBytes: bytes released and
// granted again before any collection would occupy the heap twice, so the
// granted reader collects first; a collection the runtime ran on its own
// meanwhile makes that unnecessary.
func TestMemoryPoolCollectsBeforeRegrantingReleasedBytes(t *testing.T) {
	before := gcCycles.Load()
	runtime.GC()
	waitFor(t, 2*time.Second, "the collection counted", func() bool { return gcCycles.Load() > before })

	p := newMemoryPool(100)
	ctx := testCtx(t)
	if err := p.acquire(ctx, 80); err != nil {
		t.Fatal(err)
	}
	p.release(80)
	cycles := gcCycles.Load()
	if err := p.acquire(ctx, 80); err != nil { // 80 held + 80 perhaps not freed > 100 + 12
		t.Fatal(err)
	}
	if n := p.collections.Load(); n != 1 && gcCycles.Load() == cycles {
		t.Fatalf("%d collections before re-granting released bytes, want 1", n)
	}
	p.release(80)

	// After collections of its own (the second surely began after the
	// release) the runtime has freed them already.
	collections := p.collections.Load()
	released := gcCycles.Load()
	waitFor(t, 2*time.Second, "two collections counted", func() bool {
		runtime.GC() // the sentinel's cleanup runs on a goroutine of its own, soon after
		return gcCycles.Load() >= released+2
	})
	if err := p.acquire(ctx, 80); err != nil {
		t.Fatal(err)
	}
	if n := p.collections.Load(); n != collections {
		t.Fatalf("collected although the runtime just had")
	}
	p.release(80)
	// Small frames collect once about a pool's worth of them may await
	// collection, not once per frame.
	p2 := newMemoryPool(100)
	for range 100 {
		if err := p2.acquire(ctx, 5); err != nil {
			t.Fatal(err)
		}
		p2.release(5)
	}
	if n := p2.collections.Load(); n > 5 {
		t.Fatalf("%d collections for 500 bytes released through a pool of 100", n)
	}
}
