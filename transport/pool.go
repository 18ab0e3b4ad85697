package transport

import (
	"container/list"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// memoryPool is queued.max.request.bytes (Config.QueuedMaxRequestBytes): a
// server-wide budget, in bytes, for the request frames held in memory over
// all connections. A frame is held from the moment its reader has read the
// size prefix until its response is written (or its connection gives it
// up): while its body is read, while it waits in the connection's queue
// (read-ahead) and while it is handled.
//
// Goroutines: a connection's reader calls acquire after reading a frame's
// size prefix and before allocating the body. acquire waits on a channel of
// the caller's own, so a reader that waits holds up only its connection,
// which then reads nothing more and the client meets TCP backpressure, as
// Kafka mutes a channel its Selector cannot allocate for. release is called
// by whoever is done with the frame (the connection's handler goroutine
// once the response is written, or the reader on an error path); it never
// blocks and grants waiters itself. Metrics read the counters at scrape
// time. Every method is safe for concurrent use.
//
// Grants are strict (the bytes held never exceed the capacity) and in
// arrival order, except that a frame that fits may pass an older one that
// does not. Bytes released but perhaps not yet freed by the garbage
// collector are counted too, and a reader runs a collection before
// allocating when they crowd the pool (collectIfCrowded). See the package
// doc, # Request memory, for the grant policy and why the heap stays
// near the capacity.
type memoryPool struct {
	capacityBytes int64 // UnboundedQueuedMaxRequestBytes: no bound, usage is only counted
	collectSlack  int64 // capacityBytes/8

	usedBytes      atomic.Int64 // held now; written under mu when bounded
	waitNanos      atomic.Int64 // total time acquire callers waited, for metrics
	waitingReaders atomic.Int64 // acquire callers waiting now, for metrics
	collections    atomic.Int64 // collections acquire ran, for metrics

	mu      sync.Mutex
	waiters list.List // of *poolWaiter, oldest first

	// Bytes released that may still occupy the heap, by when they were
	// released: a collection counted in gcCycles after a release may
	// have begun marking before it, so only the second one is sure to
	// have freed the frame (see rotateLocked).
	releasedBytes     int64         // released while gcCycles was gcEpoch
	prevReleasedBytes int64         // released while gcCycles was gcEpoch-1
	gcEpoch           uint64        // gcCycles when releasedBytes started
	collectingBytes   int64         // released before the running collection began
	collectDone       chan struct{} // non-nil while a reader runs a collection; closed after
}

// poolWaiter is one acquire call waiting for its bytes.
type poolWaiter struct {
	sizeBytes int64
	granted   bool          // set under memoryPool.mu, with ready closed
	ready     chan struct{} // closed when granted
}

func newMemoryPool(capacityBytes int64) *memoryPool {
	p := &memoryPool{capacityBytes: capacityBytes, collectSlack: capacityBytes / 8}
	if p.bounded() {
		startGCCycles.Do(armGCSentinel)
		p.gcEpoch = gcCycles.Load()
	}
	return p
}

// bounded reports whether the pool limits anything.
func (p *memoryPool) bounded() bool { return p.capacityBytes != UnboundedQueuedMaxRequestBytes }

// acquire reserves sizeBytes, waiting until they fit or ctx ends, and
// collects garbage first when frames released earlier may still occupy
// their memory (see memoryPool). It returns nil once they are held (the
// caller must release them), ctx's error when ctx ended first (nothing is
// held), and an error wrapping ErrFrameExceedsQueuedMaxRequestBytes at once
// when sizeBytes is above the capacity, which no wait could grant. Only
// connection readers call it; it blocks only its caller.
func (p *memoryPool) acquire(ctx context.Context, sizeBytes int64) error {
	if !p.bounded() {
		p.usedBytes.Add(sizeBytes)
		return nil
	}
	if sizeBytes > p.capacityBytes {
		return fmt.Errorf("%w: frame of %d bytes, pool of %d", ErrFrameExceedsQueuedMaxRequestBytes, sizeBytes, p.capacityBytes)
	}
	p.mu.Lock()
	if p.usedBytes.Load()+sizeBytes <= p.capacityBytes {
		p.usedBytes.Add(sizeBytes)
		p.mu.Unlock()
		p.collectIfCrowded()
		return nil
	}
	w := &poolWaiter{sizeBytes: sizeBytes, ready: make(chan struct{})}
	elem := p.waiters.PushBack(w)
	p.mu.Unlock()

	p.waitingReaders.Add(1)
	start := time.Now()
	defer func() {
		p.waitNanos.Add(int64(time.Since(start)))
		p.waitingReaders.Add(-1)
	}()
	select {
	case <-w.ready:
		p.collectIfCrowded()
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if w.granted { // granted while ctx ended: hand the bytes on
		p.mu.Unlock()
		p.release(sizeBytes)
		return ctx.Err()
	}
	p.waiters.Remove(elem)
	p.mu.Unlock()
	return ctx.Err()
}

// release returns sizeBytes acquired earlier and grants the waiters that
// now fit, oldest first. It never blocks beyond the pool's mutex.
func (p *memoryPool) release(sizeBytes int64) {
	if sizeBytes == 0 {
		return // a frame read outside the pool (poolExemptFrameBytes)
	}
	if !p.bounded() {
		p.usedBytes.Add(-sizeBytes)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rotateLocked()
	p.releasedBytes += sizeBytes
	used := p.usedBytes.Add(-sizeBytes)
	for e := p.waiters.Front(); e != nil && used < p.capacityBytes; {
		next := e.Next()
		if w := e.Value.(*poolWaiter); used+w.sizeBytes <= p.capacityBytes {
			used = p.usedBytes.Add(w.sizeBytes)
			w.granted = true
			close(w.ready)
			p.waiters.Remove(e)
		}
		e = next
	}
}

// collectIfCrowded runs after a grant, on the granted reader's goroutine
// and before it allocates the frame. When the bytes held and those
// released but perhaps not yet freed exceed the capacity by more than
// collectSlack, it runs a garbage collection (runtime.GC), or waits for the
// one another reader is running, so that the heap does not hold the new
// frame next to dead ones. It blocks only its caller, for as long as a
// collection takes; other goroutines run on, but for the collector's brief
// stop-the-world pauses.
func (p *memoryPool) collectIfCrowded() {
	for {
		p.mu.Lock()
		p.rotateLocked()
		if p.usedBytes.Load()+p.releasedBytes+p.prevReleasedBytes+p.collectingBytes <= p.capacityBytes+p.collectSlack {
			p.mu.Unlock()
			return
		}
		if done := p.collectDone; done != nil {
			p.mu.Unlock()
			<-done
			continue // releases during that collection may still be in the heap
		}
		done := make(chan struct{})
		p.collectDone = done
		p.collectingBytes = p.releasedBytes + p.prevReleasedBytes
		p.releasedBytes, p.prevReleasedBytes = 0, 0
		p.mu.Unlock()

		p.collections.Add(1)
		runtime.GC() // a whole cycle begun after the call: frees every frame released before it

		p.mu.Lock()
		p.collectingBytes, p.collectDone = 0, nil
		p.mu.Unlock()
		close(done)
		return
	}
}

// rotateLocked ages the released bytes by the collections counted since
// the last call. A frame released while gcCycles was n may have been
// marked live by the collection counted as n+1, which could have begun
// before the release; the collection counted as n+2 began after n+1's
// sentinel cleanup had run, so after the release, and freed it. p.mu must
// be held.
func (p *memoryPool) rotateLocked() {
	switch n := gcCycles.Load(); n - p.gcEpoch {
	case 0:
		return
	case 1:
		p.prevReleasedBytes, p.releasedBytes = p.releasedBytes, 0
		p.gcEpoch = n
	default:
		p.prevReleasedBytes, p.releasedBytes = 0, 0
		p.gcEpoch = n
	}
}

// gcCycles counts the garbage collections completed since the first
// bounded pool was made, approximately: a collection is counted once the
// runtime runs the cleanup of a sentinel object it found unreachable,
// shortly after the collection's mark phase. Reading it costs an atomic
// load, where runtime/metrics would take a global lock per request.
var (
	gcCycles      atomic.Uint64
	startGCCycles sync.Once
)

// gcSentinel is allocated, dropped, and counted in gcCycles when
// collected. Its pointer field keeps it out of the tiny allocator, whose
// blocks are shared with other objects and freed with them.
type gcSentinel struct{ _ *int }

// armGCSentinel drops a sentinel whose cleanup (run on the runtime's
// cleanup goroutine after the collection that frees it) counts the cycle
// and arms the next one.
func armGCSentinel() {
	runtime.AddCleanup(new(gcSentinel), func(struct{}) {
		gcCycles.Add(1)
		armGCSentinel()
	}, struct{}{})
}

// availableBytes is what a frame could be granted now; for an unbounded
// pool it is -1.
func (p *memoryPool) availableBytes() int64 {
	if !p.bounded() {
		return -1
	}
	return p.capacityBytes - p.usedBytes.Load()
}
