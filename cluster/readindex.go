package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/cluster/raftnet"
)

// readIndex batches a shard's leadership confirmations, so that a read
// served from the leader's state costs about one round trip (see
// confirmRound) however many reads arrive together.
//
// Reads that arrive while a round is in flight wait for the next round, never
// the current one: a round that started before a read was invoked could
// have collected its quorum before a newer leader was elected, which would
// let that read miss a write acknowledged before it began. One round runs at
// a time; when it ends, every read queued behind it shares the next.
type readIndex struct {
	mu      sync.Mutex
	running bool       // a round's goroutine is live
	next    *readRound // the round queued reads will share; nil when none is queued

	rounds    atomic.Uint64 // rounds run, for tests and metrics
	committed atomic.Uint64 // rounds that committed a barrier (after a pause)
}

// readRound is one confirmation round; done closes once err is set.
type readRound struct {
	done chan struct{}
	err  error
}

// join queues the caller for the next round, starting the round goroutine
// if none runs. verify runs one round (Shard.confirmRound) and is called on
// that goroutine.
func (ri *readIndex) join(verify func() error) *readRound {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if ri.next == nil {
		ri.next = &readRound{done: make(chan struct{})}
	}
	rd := ri.next
	if !ri.running {
		ri.running = true
		go ri.run(verify)
	}
	return rd
}

// run confirms rounds until none is queued.
func (ri *readIndex) run(verify func() error) {
	for {
		ri.mu.Lock()
		rd := ri.next
		ri.next = nil
		if rd == nil {
			ri.running = false
			ri.mu.Unlock()
			return
		}
		ri.mu.Unlock()
		rd.err = verify()
		ri.rounds.Add(1)
		close(rd.done)
	}
}

// ConfirmLeadership returns nil once a quorum of the shard's voters has
// confirmed, after the call began, that this node still leads in epoch
// (confirmRound): the read index of a linearizable read. State the caller reads from this
// node's FSM or coordinator after it returns nil holds every write
// acknowledged before the call. It returns ErrNotLeading when the
// leadership of epoch is gone (or is lost during the round: a paused leader
// that resumes learns of the newer term from the first follower that
// answers), raft.ErrNotLeader before Start started the shard, or ctx's
// error.
//
// Any goroutine may call it; it blocks for about one round trip (one
// commit right after a pause), never holding a lock the leadership
// goroutine or Raft needs.
func (s *Shard) ConfirmLeadership(ctx context.Context, epoch uint64) error {
	if !s.running.Load() {
		return raft.ErrNotLeader
	}
	if !s.Leads(epoch) {
		return ErrNotLeading
	}
	rd := s.reads.join(s.confirmRound)
	select {
	case <-rd.done:
	case <-s.disk.done():
		return fmt.Errorf("%w: the node fenced itself for its disk", ErrNotLeading)
	case <-ctx.Done():
		return ctx.Err()
	}
	if rd.err != nil {
		return fmt.Errorf("%w: %v", ErrNotLeading, rd.err)
	}
	if !s.Leads(epoch) {
		return ErrNotLeading
	}
	return nil
}

// confirmRound runs one confirmation round. Normally that is raft's
// VerifyLeader: the leader heartbeats every follower at once and counts
// their answers, about one round trip. Right after this process was
// paused (pauseWatch) it is a barrier entry of this term committed by a
// quorum instead, about one commit: VerifyLeader would also count answers
// to heartbeats sent before the pause, which can predate a newer leader's
// election, while a barrier cannot commit on answers older than itself.
// Once a barrier applied, the FSM also holds every entry committed before
// it.
func (s *Shard) confirmRound() error {
	if raftnet.PausedRecently() {
		s.reads.committed.Add(1)
		return s.Barrier(confirmRoundTimeout)
	}
	s.trans.BeginConfirm()
	defer s.trans.EndConfirm()
	return s.Raft.VerifyLeader().Error()
}

// confirmRoundTimeout bounds how long a committed confirmation round waits
// to enter Raft's queue.
const confirmRoundTimeout = 5 * time.Second

// ReadRounds is how many leadership confirmation rounds the shard has run
// (each serves every read queued behind it).
func (s *Shard) ReadRounds() uint64 { return s.reads.rounds.Load() }
