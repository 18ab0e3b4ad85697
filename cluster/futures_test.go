package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// heldFuture is a raft future that answers when release is closed.
type heldFuture struct {
	release chan struct{}
	err     error
}

func (f *heldFuture) Error() error { <-f.release; return f.err }

func newHeld(err error) *heldFuture { return &heldFuture{release: make(chan struct{}), err: err} }

// Tracked futures complete with what raft answered, and the shard's one
// answer loop stops once none is left.
func TestTrackedFuturesCompleteWithRaftsAnswer(t *testing.T) {
	s := &Shard{}
	fs := []*heldFuture{newHeld(nil), newHeld(raft.ErrLeadershipLost), newHeld(nil)}
	var sfs []*shardFuture
	for _, f := range fs {
		sfs = append(sfs, s.track(f, nil))
	}
	for _, f := range fs {
		close(f.release)
	}
	for i, sf := range sfs {
		if err := sf.Error(); !errors.Is(err, fs[i].err) {
			t.Errorf("future %d: %v, want %v", i, err, fs[i].err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.pendingMu.Lock()
		idle := !s.answering && len(s.pending) == 0
		s.pendingMu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the answer loop still runs with nothing queued")
		}
		time.Sleep(time.Millisecond)
	}
}

// A future the disk fence failed is not waited for: what was queued after
// it completes when raft answers it, though raft never answers the first
// (a stuck disk).
func TestAFencedFutureHoldsUpNoLaterOne(t *testing.T) {
	s := &Shard{}
	stuck := newHeld(nil)
	first := s.track(stuck, nil)
	s.failPendingWith(raft.ErrLeadershipLost)
	if err := first.Error(); !errors.Is(err, raft.ErrLeadershipLost) {
		t.Fatalf("fenced future: %v", err)
	}
	later := newHeld(nil)
	second := s.track(later, nil)
	close(later.release)
	select {
	case <-second.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a later future waited behind one the fence had failed")
	}
	if err := second.Error(); err != nil {
		t.Fatal(err)
	}
	close(stuck.release)
}

// valueFuture is answered when it is made, as raft's own errorFuture (a
// value, not a pointer) that Apply returns when it cannot enqueue.
type valueFuture struct{ err error }

func (f valueFuture) Error() error { return f.err }

// A refusal raft returned without enqueueing (an enqueue timeout while its
// loop is stuck) is answered at once, not behind a head the stuck loop
// has not answered.
func TestARefusalRaftReturnedAtOnceWaitsForNothing(t *testing.T) {
	s := &Shard{}
	stuck := newHeld(nil)
	head := s.track(stuck, nil)
	refused := s.track(valueFuture{raft.ErrEnqueueTimeout}, nil)
	select {
	case <-refused.done:
	case <-time.After(10 * time.Second):
		t.Fatal("an enqueue timeout waited behind the unanswered head")
	}
	if err := refused.Error(); !errors.Is(err, raft.ErrEnqueueTimeout) {
		t.Fatalf("refusal: %v", err)
	}
	close(stuck.release)
	if err := head.Error(); err != nil {
		t.Fatal(err)
	}
}

// A future tracked after the disk fence failed the queue (its shard's
// ApplyAsync checked the fence just before it came) fails as the queued
// ones did, rather than wait on a raft the stuck disk holds.
func TestAFutureTrackedAfterTheFenceFailsAtOnce(t *testing.T) {
	s := &Shard{disk: newDiskFence()}
	s.disk.set(DiskHealth{State: DiskStalled})
	s.failPendingWith(raft.ErrLeadershipLost)
	late := s.track(newHeld(nil), nil)
	select {
	case <-late.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a future tracked while fenced waited on raft")
	}
	if err := late.Error(); !errors.Is(err, raft.ErrLeadershipLost) {
		t.Fatalf("late future: %v", err)
	}
}
