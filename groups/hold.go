package groups

import (
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
// node leads, and the client's next FindCoordinator finds it) or when the
// hold expires (ErrLoadInProgress if still loading). A client is thus never
// sent back to a coordinator that may be dead, nor told to back off while
// the answer is moments away: sarama ends a member's session on
// COORDINATOR_LOAD_IN_PROGRESS, and franz-go when a heartbeat cannot dial.
//
// Each request entry point calls it once, first (a request is held at most
// once); the lookups after it answer at once. Called from request
// goroutines without any lock held. It wakes on the coordinator's own
// changes (Activate, Deactivate, which shutdown runs too) and the shard's
// routing changes, and rechecks every holdRecheck.
func (c *Coordinator) serving() (uint64, error) {
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
		active, loading, epoch, changed := c.active, c.loading, c.epoch, c.changed
		c.mu.RUnlock()
		if active && c.log.Leads(epoch) {
			return epoch, nil
		}
		err := ErrNotCoordinator
		if loading != 0 {
			err = ErrLoadInProgress
		}
		if c.cfg.ElectionHold <= 0 || (loading == 0 && !c.log.Settling()) {
			return 0, err
		}
		if recheck == nil {
			start = time.Now()
			timer := time.NewTimer(c.cfg.ElectionHold)
			defer timer.Stop()
			deadline = timer.C
			recheck = time.NewTicker(holdRecheck)
		}
		select {
		case <-changed:
		case <-c.log.RoutingChanges():
		case <-recheck.C:
		case <-deadline:
			c.holdExpired.Add(1)
			return 0, err
		}
	}
}

// holdStats counts held requests, for metrics.
type holdStats struct {
	held        atomic.Uint64 // requests held while the shard settled
	heldFor     atomic.Uint64 // their total wait, nanoseconds
	holdExpired atomic.Uint64 // held requests the hold's bound answered
}
