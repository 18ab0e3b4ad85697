package groups

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// holdRecheck is how often a held request looks at the shard again without
// being woken: a settling window also ends by time passing (the leader
// followed stays silent for longer than an election takes), which no event
// announces.
const holdRecheck = 25 * time.Millisecond

// serving returns the epoch the coordinator serves under. A request that
// reaches it while the shard's leadership settles (this node is winning or
// loading the groups, or the leader this replica followed is gone or going:
// Log.Settling) is held for the outcome, at most Config.ElectionHold from
// its first wait: it is served once this node serves, and answered
// ErrNotCoordinator as soon as the shard no longer settles here (another
// node leads, and the client's next FindCoordinator finds it), when the
// hold runs out (ErrLoadInProgress if still loading), when ctx ends, or when
// the coordinator stops. A client is thus never sent back to a coordinator
// that may be dead, nor told to back off while the answer is moments away:
// sarama ends a member's session on COORDINATOR_LOAD_IN_PROGRESS, and
// franz-go when a heartbeat cannot dial.
//
// Each request entry point calls it once, first; the lookups after it
// answer at once. A request covering several groups (DescribeGroups,
// DeleteGroups, OffsetFetch) passes a ctx from OneHold, so all its waits
// share one bound. Called from request goroutines without any lock held. It
// wakes on the coordinator's own changes (Activate, Deactivate, Stop) and
// the shard's routing changes, and rechecks every holdRecheck.
func (c *Coordinator) serving(ctx context.Context) (uint64, error) {
	var (
		deadline <-chan time.Time
		recheck  *time.Ticker
		start    time.Time
	)
	defer func() {
		if recheck != nil {
			recheck.Stop()
			c.held.Add(1)
			c.heldFor.Add(uint64(time.Since(start)))
		}
	}()
	for {
		c.mu.RLock()
		active, loading, epoch := c.active, c.loading, c.epoch
		changed := c.changed.wait()
		c.mu.RUnlock()
		if active && c.log.Leads(epoch) {
			return epoch, nil
		}
		err := ErrNotCoordinator
		if loading != 0 {
			err = ErrLoadInProgress
		}
		if c.cfg.ElectionHold <= 0 || c.isStopped() || (loading == 0 && !c.log.Settling()) {
			return 0, err
		}
		if recheck == nil {
			start = time.Now()
			timer := time.NewTimer(time.Until(holdDeadline(ctx, start.Add(c.cfg.ElectionHold))))
			defer timer.Stop()
			deadline = timer.C
			recheck = time.NewTicker(holdRecheck)
		}
		select {
		case <-changed:
		case <-c.log.RoutingChanges():
		case <-recheck.C:
		case <-c.stopCh:
		case <-ctx.Done():
			return 0, err
		case <-deadline:
			c.holdExpired.Add(1)
			return 0, err
		}
	}
}

// holdWhileHandingOver waits, at most Config.ElectionHold (the request's
// shared bound, OneHold), while this node hands the shard over after a
// disk fence (Log.HandingOver) before a request that lost its leadership
// is answered ErrNotCoordinator: until the node knows which node took the
// shard over, a client told NOT_COORDINATOR would ask for the coordinator
// in the moment no node names the new one. Called from request
// goroutines without any lock held.
func (c *Coordinator) holdWhileHandingOver(ctx context.Context) {
	if c.cfg.ElectionHold <= 0 || !c.log.HandingOver() {
		return
	}
	start := time.Now()
	deadline := time.NewTimer(time.Until(holdDeadline(ctx, start.Add(c.cfg.ElectionHold))))
	defer deadline.Stop()
	recheck := time.NewTicker(holdRecheck)
	defer recheck.Stop()
	defer func() {
		c.held.Add(1)
		c.heldFor.Add(uint64(time.Since(start)))
	}()
	for c.log.HandingOver() {
		select {
		case <-c.log.RoutingChanges():
		case <-recheck.C:
		case <-c.stopCh:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			c.holdExpired.Add(1)
			return
		}
	}
}

// Stop ends every held request and holds no more: the server calls it
// first when it stops, so that closing the Kafka listener (which waits for
// the handlers) is not held up by requests waiting for an election.
// Idempotent; any goroutine.
func (c *Coordinator) Stop() {
	c.stopOnce.Do(func() { close(c.stopCh) })
}

func (c *Coordinator) isStopped() bool {
	select {
	case <-c.stopCh:
		return true
	default:
		return false
	}
}

// holdBudgetKey keys a request's shared hold deadline in its context.
type holdBudgetKey struct{}

// holdBudget is one request's hold deadline, set by its first wait.
type holdBudget struct {
	mu       sync.Mutex
	deadline time.Time
}

// OneHold returns a context under which every wait of one request for
// settling shards (see serving) shares a single bound, the first wait's:
// a request naming many groups is held at most kcoord.group.election.hold.ms
// in all, below the client's request timeout. The API handlers of
// multi-group requests call it once per request.
func OneHold(ctx context.Context) context.Context {
	return context.WithValue(ctx, holdBudgetKey{}, &holdBudget{})
}

// holdDeadline is the bound of a wait that would end at own: the request's
// shared one when ctx has a budget (set to own by its first wait).
func holdDeadline(ctx context.Context, own time.Time) time.Time {
	b, ok := ctx.Value(holdBudgetKey{}).(*holdBudget)
	if !ok {
		return own
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.deadline.IsZero() {
		b.deadline = own
	}
	return b.deadline
}

// holdStats counts held requests, for metrics.
type holdStats struct {
	held        atomic.Uint64 // requests held while the shard settled
	heldFor     atomic.Uint64 // their total wait, nanoseconds
	holdExpired atomic.Uint64 // held requests the hold's bound answered
}
