package groups

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// This file is how a consumer group's state reaches Raft: a chain of
// writes enqueued in the order they were computed, each answered only once
// committed, and a reload from the FSM when a link breaks.

// enqueue hands w to the log as the group's next write and returns what
// an answer that depends on it waits for. With w nil (nothing changed) it
// returns the latest write still in flight, since the answer reads state
// that write installed, or nil when every write has completed. Called with
// g.mu held, which orders the group's writes in the log as they were
// computed.
func (g *consumerGroup) enqueue(w *fsm.ConsumerGroupWrite) *pendingWrite {
	if w == nil {
		return g.last
	}
	if up := g.upgrade; up != nil {
		g.upgrade = nil
		g.enqueue(up)
	}
	w.GroupID, w.After = g.id, g.writes
	if w.Timestamp == 0 {
		w.Timestamp = g.c.now()
	}
	g.writes++
	f := g.c.write(w)
	pw := &pendingWrite{done: make(chan struct{})}
	g.last = pw
	go func() {
		err := waitWrite(f)
		g.mu.Lock()
		if g.last == pw {
			g.last = nil
		}
		if err != nil && !g.closed && !g.stale {
			g.c.logger.Warn("consumer group write failed; reloading the group", "group", g.id, "error", err)
			g.markStale()
		}
		g.mu.Unlock()
		pw.err = err
		close(pw.done)
	}()
	return pw
}

// await waits for a write and returns its error as the requester sees it:
// a write the FSM refused (computed from a state a failed write had
// installed) is ErrLoadInProgress, since the group is reloading and the
// member may retry at once. Called without g.mu.
func (pw *pendingWrite) await(ctx context.Context) error {
	select {
	case <-pw.done:
	case <-ctx.Done():
		// The write goes on; the member's retry reads its outcome. A
		// closed connection (Canceled) is not answered at all.
		return ctx.Err()
	}
	switch {
	case pw.err == nil:
		return nil
	case errors.Is(pw.err, fsm.ErrStaleConsumerGroupWrite), errors.Is(pw.err, fsm.ErrInvalidConsumerGroupWrite),
		errors.Is(pw.err, fsm.ErrGroupNotFound), errors.Is(pw.err, fsm.ErrGroupTypeConflict):
		return fmt.Errorf("%w: %v", ErrLoadInProgress, pw.err)
	}
	return pw.err
}

// markStale stops serving the group from memory after one of its writes
// failed: what memory holds may never have committed. Requests get
// ErrLoadInProgress, and timers do nothing, until reloadConsumer rebuilt
// the group. Called with g.mu held.
func (g *consumerGroup) markStale() {
	g.stale = true
	for _, m := range g.members {
		g.stopTimers(m)
	}
	g.startReload()
}

// startReload starts a reload unless one runs. Called with g.mu held.
func (g *consumerGroup) startReload() {
	if !g.reloading {
		g.reloading = true
		go g.c.reloadConsumer(g)
	}
}

// reloadConsumer rebuilds a stale consumer group from the FSM: after a
// barrier every write the group enqueued is applied or never will be, so
// the stored group is the truth; it replaces g, whose members get fresh
// sessions. On a failed barrier g stays stale, and the next request starts
// another reload. Runs on a goroutine of its own.
func (c *Coordinator) reloadConsumer(g *consumerGroup) {
	epoch, err := c.current()
	if err == nil {
		err = c.log.Barrier(c.cfg.WriteTimeout)
	}
	if err != nil {
		c.logger.Debug("consumer group reload failed; retrying", "group", g.id, "error", err)
		// Try again while this coordinator still serves, so a stale
		// group whose members are all gone is still fenced and expired.
		time.AfterFunc(time.Second, func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.reloading = false
			if !g.closed && c.Active() {
				g.startReload()
			}
		})
		return
	}
	var fresh *consumerGroup
	var classic *classicGroup
	if r, ok := c.state.ConsumerGroup(g.id); ok {
		fresh = consumerGroupFromRecord(c, r)
		fresh.mu.Lock() // private until its sessions run
		defer fresh.mu.Unlock()
	} else if r, ok := c.state.Group(g.id); ok {
		// The group is stored as a classic group (an upgrade or a
		// downgrade whose write failed): serve that again.
		classic = classicGroupFromRecord(c, r)
		classic.mu.Lock()
		defer classic.mu.Unlock()
	}
	c.mu.Lock()
	current := c.active && c.epoch == epoch && c.consumers[g.id] == g
	if current {
		delete(c.consumers, g.id)
		if fresh != nil {
			c.consumers[g.id] = fresh
		} else if classic != nil && c.classics[g.id] == nil {
			c.classics[g.id] = classic
		} else {
			classic = nil
		}
	}
	c.mu.Unlock()
	g.mu.Lock()
	g.close()
	g.mu.Unlock()
	if !current {
		return
	}
	if fresh != nil {
		fresh.startSessions()
	}
	if classic != nil {
		for _, m := range classic.members {
			classic.startSession(m)
		}
	}
	c.logger.Info("consumer group reloaded", "group", g.id, "epoch", fresh.epochOrZero())
}

// epochOrZero is the group epoch, 0 for no group.
func (g *consumerGroup) epochOrZero() int32 {
	if g == nil {
		return 0
	}
	return g.epoch
}

// close stops the group's timers for good. Called with g.mu held.
func (g *consumerGroup) close() {
	g.closed = true
	for _, m := range g.members {
		g.stopTimers(m)
	}
}
