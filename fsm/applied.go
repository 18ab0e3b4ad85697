package fsm

import (
	"context"
	"sync"
	"sync/atomic"
)

// appliedIndex is the Raft index of the last command a MetaFSM applied,
// with a way to wait for it to reach an index.
//
// hashicorp/raft's own AppliedIndex cannot serve a read barrier: its main
// loop raises it when it hands entries to the FSM goroutine, before the
// FSM applied them, and it counts entries the FSM never sees (no-ops,
// barriers). This index moves only once a command's change is in the
// state, so a reader that saw it reach i sees every command up to i.
//
// Raft's FSM goroutine calls set and restore; any goroutine reads and
// waits. Nothing blocks: a change closes the channel waiters hold.
type appliedIndex struct {
	index atomic.Uint64
	// unknown is set while the index is not known: restored from a
	// snapshot that did not keep it, with no command since.
	unknown atomic.Bool

	mu      sync.Mutex
	changed chan struct{} // closed at the next change; nil while no one waits
}

func (a *appliedIndex) get() uint64 { return a.index.Load() }

// set records that the command at index i is applied, or that a snapshot
// of the state as of i was restored (0 for a snapshot of a release before
// the index was kept: unknown until the next command).
func (a *appliedIndex) set(i uint64) {
	a.index.Store(i)
	a.unknown.Store(false)
	a.wake()
}

// restored records the index of a restored snapshot: 0 when the snapshot
// did not keep one, which leaves the index unknown until the next command.
func (a *appliedIndex) restored(i uint64) {
	a.set(i)
	a.unknown.Store(i == 0)
}

func (a *appliedIndex) wake() {
	a.mu.Lock()
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
	a.mu.Unlock()
}

// wait returns once the index is at least i, or with ctx's error.
func (a *appliedIndex) wait(ctx context.Context, i uint64) error {
	for {
		if a.index.Load() >= i {
			return nil
		}
		a.mu.Lock()
		if a.changed == nil {
			a.changed = make(chan struct{})
		}
		ch := a.changed
		a.mu.Unlock()
		// Checked again after taking the channel: a change between the
		// first check and here closed no channel of ours.
		if a.index.Load() >= i {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AppliedIndex is the Raft index of the last command this replica
// applied, or of the last command in the snapshot it restored if no
// command came since (0: none). Every command up to it is in the state
// the readers return. See AppliedIndexKnown.
func (f *MetaFSM) AppliedIndex() uint64 { return f.applied.get() }

// AppliedIndexKnown is false while AppliedIndex does not say what the
// state holds: restored from a snapshot of the first release (which did
// not keep the index), with no command since.
func (f *MetaFSM) AppliedIndexKnown() bool { return !f.applied.unknown.Load() }

// WaitApplied returns once this replica has applied the command at Raft
// index i (and every one before it), or with ctx's error. Any goroutine
// may call it; it blocks only on ctx.
func (f *MetaFSM) WaitApplied(ctx context.Context, i uint64) error { return f.applied.wait(ctx, i) }
