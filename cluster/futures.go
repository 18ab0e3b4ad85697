package cluster

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// shardFutureGrace is how long a shard that has shut down waits for the
// watchers of futures raft did answer before failing the rest.
const shardFutureGrace = 100 * time.Millisecond

// shardFuture is a raft future that also completes when its shard shuts
// down (see ApplyAsync).
type shardFuture struct {
	f         raft.Future
	af        raft.ApplyFuture // nil for barriers
	done      chan struct{}
	once      sync.Once
	err       error
	abandoned bool // failed by shutdown: f never completed
}

func (f *shardFuture) finish(err error, abandoned bool) {
	f.once.Do(func() {
		f.err, f.abandoned = err, abandoned
		close(f.done)
	})
}

// Error waits for the future and returns its error.
func (f *shardFuture) Error() error {
	<-f.done
	return f.err
}

// Response is the FSM's response; call it after Error.
func (f *shardFuture) Response() any {
	<-f.done
	if f.abandoned || f.af == nil {
		return nil
	}
	return f.af.Response()
}

// Index is the log index of the command; call it after Error.
func (f *shardFuture) Index() uint64 {
	<-f.done
	if f.abandoned || f.af == nil {
		return 0
	}
	return f.af.Index()
}

// track wraps a raft future so that it completes when the shard shuts down,
// and queues it for the shard's answer loop (answerLoop), which it starts
// when none runs. Any goroutine; it does not block.
func (s *Shard) track(f raft.Future, af raft.ApplyFuture) *shardFuture {
	sf := &shardFuture{f: f, af: af, done: make(chan struct{})}
	if answeredAtOnce(f) {
		// Refused before it reached raft's loop (ErrEnqueueTimeout,
		// ErrRaftShutdown): queued, it would wait behind a head the
		// stuck loop has not answered.
		sf.finish(storeFailure(f.Error()), false)
		return sf
	}
	s.pendingMu.Lock()
	if s.stopped {
		s.pendingMu.Unlock()
		// Raft is gone: whatever it did not answer at once, it never will.
		sf.finish(raft.ErrRaftShutdown, true)
		return sf
	}
	if s.disk != nil && s.disk.fenced() {
		// The fence came between ApplyAsync's check and here, after
		// failPendingWith emptied the queue: this one fails as those did,
		// rather than wait on a raft the stuck disk holds.
		s.pendingMu.Unlock()
		sf.finish(raft.ErrLeadershipLost, true)
		return sf
	}
	s.pending = append(s.pending, sf)
	start, gen := !s.answering, s.answerGen
	s.answering = true
	s.pendingMu.Unlock()
	if start {
		go s.answerLoop(gen)
	}
	return sf
}

// answeredAtOnce reports whether raft returned f already answered: raft
// v1.8.0's Apply and Barrier return a value of its errorFuture type when
// they refuse before enqueueing (enqueue timeout, shutdown), and a pointer
// to a future its loops answer otherwise.
func answeredAtOnce(f raft.Future) bool {
	return reflect.TypeOf(f).Kind() != reflect.Pointer
}

// answerLoop completes the shard's tracked futures in the order they were
// queued, waiting on each raft future in turn, and returns when the queue
// is empty (track starts it again) or when failPendingWith has detached it
// (gen is no longer the shard's answerGen). One goroutine per shard while
// commits are in flight, rather than one per future: raft answers a
// shard's futures in log order (an apply or barrier once the entries
// before it are applied, a refusal at once), so waiting in queue order
// delays none by more than the time between neighbours. (A refusal raft
// returns without enqueueing never reaches the queue: answeredAtOnce.)
func (s *Shard) answerLoop(gen uint64) {
	for {
		s.pendingMu.Lock()
		if s.answerGen != gen {
			s.pendingMu.Unlock()
			return
		}
		if len(s.pending) == 0 {
			s.pending = nil // let a burst's backing array go
			s.answering = false
			s.pendingMu.Unlock()
			return
		}
		sf := s.pending[0]
		s.pendingMu.Unlock()
		sf.finish(storeFailure(sf.f.Error()), false)
		s.pendingMu.Lock()
		if s.answerGen == gen {
			s.pending[0] = nil
			s.pending = s.pending[1:]
		}
		s.pendingMu.Unlock()
	}
}

// storeFailure is err, a Raft future's, made raft.ErrLeadershipLost when
// it is the log store's failure: a leader whose log write failed steps
// down (hashicorp/raft's dispatchLogs) and the entry may still commit
// under the next leader, but raft.LogCache hands the store's error on as
// text (%q), so nothing else can recognise it, and clients would hear
// UNKNOWN_SERVER_ERROR instead of NOT_COORDINATOR. Other errors pass
// through unchanged.
func storeFailure(err error) error {
	if err != nil && strings.HasPrefix(err.Error(), logCacheStoreFailed) {
		return fmt.Errorf("%w: %v", raft.ErrLeadershipLost, err)
	}
	return err
}

// logCacheStoreFailed opens the error raft.LogCache.StoreLogs returns when
// the store under it fails (hashicorp/raft v1.8.0, log_cache.go).
const logCacheStoreFailed = "unable to store logs within log store"

// failPendingWith fails, at once, every future Raft has not answered yet
// with err: the node fenced itself for its disk, and Raft may not answer
// while the disk is stuck. What they proposed may still commit, as after
// raft.ErrLeadershipLost.
func (s *Shard) failPendingWith(err error) {
	s.pendingMu.Lock()
	pending := s.pending
	// The answer loop may be waiting on a raft future the stuck disk
	// holds: it is detached (it returns once raft answers), so futures
	// tracked from now on get a loop of their own and wait behind none of
	// these.
	s.pending, s.answering = nil, false
	s.answerGen++
	s.pendingMu.Unlock()
	for _, f := range pending {
		f.finish(err, true)
	}
}

// failPending fails the futures raft will never answer. Raft must have shut
// down.
func (s *Shard) failPending() {
	s.pendingMu.Lock()
	s.stopped = true
	pending := slices.Clone(s.pending)
	s.pendingMu.Unlock()
	grace := time.NewTimer(shardFutureGrace)
	defer grace.Stop()
	expired, failed := false, 0
	for _, f := range pending {
		if !expired {
			select {
			case <-f.done:
				continue
			case <-grace.C:
				expired = true
			}
		}
		select {
		case <-f.done:
		default:
			failed++
		}
		f.finish(raft.ErrRaftShutdown, true)
	}
	if failed > 0 {
		s.logger.Debug("failed futures raft left unanswered at shutdown", "shard", s.ID, "count", failed)
	}
}
