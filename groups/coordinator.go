package groups

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// Log is the shard's replicated log as the coordinator uses it;
// *cluster.Shard implements it (the server hands each coordinator its
// shard, opened before the node starts).
//
// Leadership is identified by an epoch that the log owns (it counts the
// shard's leadership notifications): the coordinator serves under the
// epoch it was activated for and asks the log whether that epoch is still
// current, so a quick loss and regain of leadership can never let a stale
// activation or a stale read through.
type Log interface {
	// ApplyAsync enqueues an entry and returns at once; the future resolves
	// when the entry is committed and applied. It may be called with a group
	// lock held.
	ApplyAsync(cmd []byte, timeout time.Duration) raft.ApplyFuture
	// Barrier waits until every entry committed before it is applied.
	Barrier(timeout time.Duration) error
	// Leads reports whether epoch is still this node's current leadership
	// of the shard and Raft has not stepped down. It must be cheap (the
	// coordinator asks on every request) and never block: between Raft
	// stepping down and Deactivate, requests must not be served from a
	// state that no longer moves.
	Leads(epoch uint64) bool
	// ConfirmLeadership returns nil once a quorum confirmed, after the call
	// began, that epoch is still current (a read index); any other answer
	// means this node must not serve reads under epoch. It blocks for about
	// one round trip and may be called from any request goroutine, with no
	// group lock held.
	ConfirmLeadership(ctx context.Context, epoch uint64) error
	// Settling reports whether a request for the shard that reaches this
	// node should wait here for its leadership to settle (cluster.Shard's
	// Settling: this node leads or is winning, or the leader it followed is
	// gone or going). Cheap; asked while a request is held.
	Settling() bool
	// HandingOver reports whether this node led the shard when it fenced
	// itself for its disk and does not know yet which node took it over
	// (cluster.Shard's HandingOver): a request that lost its leadership
	// waits before it answers NOT_COORDINATOR. Cheap.
	HandingOver() bool
	// RoutingChanges returns a channel closed at the next change that may
	// end the shard's settling (a leader change, a leadership notification,
	// a peer's death proven). Cheap.
	RoutingChanges() <-chan struct{}
}

// Coordinator serves the groups of one shard, classic and consumer
// (KIP-848), while this node leads it. Request handlers (one goroutine per
// client connection) call its methods concurrently; each group serializes
// on its own lock. The cluster's leadership goroutine for the shard calls
// Activate and Deactivate.
type Coordinator struct {
	cfg    Config
	shard  int32
	log    Log
	state  *fsm.ShardFSM
	logger hclog.Logger
	// now returns the wall clock in Unix milliseconds; tests may replace it.
	now func() int64

	mu sync.RWMutex
	// active is set while the coordinator serves under epoch.
	active bool
	// epoch is the leadership epoch the coordinator last served under (0
	// before the first activation). An activation for an epoch at or below
	// it is stale.
	epoch uint64
	// loading is the epoch an activation is loading for (0: none). Requests
	// are held meanwhile (see serving).
	loading uint64
	// changed fires whenever active, epoch or loading change, under mu:
	// held requests wait on it.
	changed broadcast
	// stopCh is closed by Stop: held requests end, none are held again.
	stopCh   chan struct{}
	stopOnce sync.Once
	// counters for metrics, monotonic for the coordinator's life.
	committed  atomic.Uint64 // partitions committed
	rebalances atomic.Uint64 // rebalances completed (group became Stable)
	expired    atomic.Uint64 // members removed for missing their session or rebalance deadline
	// offsetsExpired counts the partitions' offsets removed for retention.
	offsetsExpired atomic.Uint64
	holdStats
	classics map[string]*classicGroup
	// classics and consumers (in consumerGroups, consumer.go) are the
	// live groups by id; an id is in one of them, never both. A simple
	// group of the FSM in neither is dormant (dormant.go).
	consumerGroups
	// removing counts, by group id, the removals of an Empty group that a
	// retention sweep enqueued and that are still in flight: such a group
	// is not woken (dormant.go).
	removing map[string]int
}

// NewCoordinator returns an inactive coordinator for shard, writing through
// log and reading stored state from state.
func NewCoordinator(cfg Config, shard int32, log Log, state *fsm.ShardFSM) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Coordinator{
		cfg:      cfg,
		shard:    shard,
		log:      log,
		state:    state,
		logger:   logger.With("shard", shard),
		now:      func() int64 { return time.Now().UnixMilli() },
		classics: make(map[string]*classicGroup),
		removing: make(map[string]int),
		consumerGroups: consumerGroups{
			consumers: make(map[string]*consumerGroup),
		},
		changed: newBroadcast(),
		stopCh:  make(chan struct{}),
	}, nil
}

// Activate starts serving under leadership epoch after this node became the
// shard's leader: it waits for the log to be applied (a barrier), rebuilds
// every group from the FSM and, once installed, gives each member a fresh
// session timeout. Requests that arrive meanwhile get ErrLoadInProgress.
//
// An activation that is no longer current does nothing: if the log has
// moved past epoch, or a later activation already ran, it returns
// ErrNotCoordinator having installed nothing, closed nothing and started no
// timer. Activating the epoch already served is a no-op that succeeds. It blocks on Raft, so the caller runs it on a goroutine of its own,
// not on the one delivering leadership notifications; the caller may retry
// it while epoch lasts.
func (c *Coordinator) Activate(epoch uint64) error {
	c.mu.Lock()
	if c.active && c.epoch == epoch {
		c.mu.Unlock()
		return nil // served already: a second activation of this epoch
	}
	if epoch <= c.epoch || !c.log.Leads(epoch) || c.isStopped() {
		c.mu.Unlock()
		return ErrNotCoordinator
	}
	c.loading = epoch
	c.changed.fire()
	c.mu.Unlock()
	if err := c.log.Barrier(c.cfg.WriteTimeout); err != nil {
		c.mu.Lock()
		if c.loading == epoch {
			c.loading = 0
			c.changed.fire()
		}
		c.mu.Unlock()
		return err
	}
	// The groups are private until installed: lock them all now, so that
	// no request reaches one before its members' sessions have started.
	// (Iterate the slice afterwards: once installed, the map is shared.)
	// Simple groups stay dormant until a request names one (dormant.go).
	classics, loaded := loadLocked(c.state.FullGroups(), func(r fsm.Group) *classicGroup { return classicGroupFromRecord(c, r) })
	consumers, loadedConsumers := loadLocked(c.state.ConsumerGroups(), func(r fsm.ConsumerGroup) *consumerGroup { return consumerGroupFromRecord(c, r) })
	all := append(loaded, loadedConsumers...)
	unlockAll := func() {
		for _, g := range all {
			g.unlock()
		}
	}
	c.mu.Lock()
	if c.loading != epoch || epoch <= c.epoch || !c.log.Leads(epoch) {
		c.mu.Unlock()
		unlockAll()
		return ErrNotCoordinator
	}
	superseded := groupList(c.classics, c.consumers)
	c.classics, c.consumers, c.active, c.epoch, c.loading = classics, consumers, true, epoch, 0
	c.changed.fire()
	c.mu.Unlock()
	for _, g := range all {
		g.startSessions()
	}
	unlockAll()
	// A leadership that ended without Deactivate (it always runs, but a
	// coordinator must not leak timers if it did not).
	closeGroups(superseded)
	n, nc := len(loaded), len(loadedConsumers)
	dormant, _ := c.state.CountSimpleGroups(nil)
	c.logAtInfoIf(n+nc+dormant > 0, "coordinator active", "groups", n, "consumer_groups", nc, "dormant_groups", dormant, "epoch", epoch)
	return nil
}

// Deactivate stops serving after leadership was lost: every waiting join and
// sync fails with ErrNotCoordinator and every timer stops; an activation
// still loading will install nothing. Called from the shard's leadership
// goroutine (and at shutdown).
func (c *Coordinator) Deactivate() {
	c.mu.Lock()
	n, nc, wasActive := len(c.classics), len(c.consumers), c.active
	groups := groupList(c.classics, c.consumers)
	c.classics, c.consumers, c.active, c.loading = make(map[string]*classicGroup), make(map[string]*consumerGroup), false, 0
	c.changed.fire()
	c.mu.Unlock()
	closeGroups(groups)
	if wasActive {
		c.logAtInfoIf(n+nc > 0, "coordinator inactive", "groups", n, "consumer_groups", nc)
	}
}

// closeGroups closes groups no longer served, each under its lock.
func closeGroups(groups []anyGroup) {
	for _, g := range groups {
		g.lock()
		g.close()
		g.unlock()
	}
}

// confirmRead confirms with a quorum that this coordinator still leads its
// shard in the epoch it serves, before an answer is served from its state
// (invariant 7: reads are linearizable). A paused or partitioned former
// leader gets ErrNotCoordinator here, never a stale answer. Called from
// request goroutines without any lock held; blocks about one round trip.
func (c *Coordinator) confirmRead(ctx context.Context) error {
	epoch, err := c.serving(ctx)
	if err != nil {
		return err
	}
	return c.confirm(ctx, epoch)
}

// current returns the epoch the coordinator serves under, or
// ErrLoadInProgress or ErrNotCoordinator, at once (serving holds instead).
func (c *Coordinator) current() (uint64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch {
	case c.loading != 0:
		return 0, ErrLoadInProgress
	case !c.active:
		return 0, ErrNotCoordinator
	}
	return c.epoch, nil
}

// confirm asks a quorum whether epoch is still this node's leadership: an
// answer read from state while serving under epoch may go out once it
// returns nil. It waits at most WriteTimeout, or until ctx ends; a
// leadership lost to a disk fence is answered only once the fenced node
// knows its successor (holdWhileHandingOver).
func (c *Coordinator) confirm(ctx context.Context, epoch uint64) error {
	err := c.confirmNow(ctx, epoch)
	if err != nil {
		c.holdWhileHandingOver(ctx)
	}
	return err
}

// confirmNow is confirm without the hand-over's hold.
func (c *Coordinator) confirmNow(ctx context.Context, epoch uint64) error {
	if c.cfg.UnconfirmedReads {
		if !c.log.Leads(epoch) {
			return ErrNotCoordinator
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
	defer cancel()
	if err := c.log.ConfirmLeadership(ctx, epoch); err != nil {
		c.logger.Debug("leadership not confirmed; not serving the read", "epoch", epoch, "error", err)
		return ErrNotCoordinator
	}
	return nil
}

// logAtInfoIf logs at info when the event matters to an operator (a shard
// with groups moved) and at debug otherwise, so a node's start does not log a
// line per empty shard.
func (c *Coordinator) logAtInfoIf(cond bool, msg string, args ...any) {
	if cond {
		c.logger.Info(msg, args...)
		return
	}
	c.logger.Debug(msg, args...)
}

// readServing runs read under c.mu's read lock and reports, as of then,
// whether the coordinator serves: ErrLoadInProgress while it loads,
// ErrNotCoordinator when it is not active or its epoch is over. The
// lookups of both kinds start with it. It never blocks.
func (c *Coordinator) readServing(read func()) error {
	c.mu.RLock()
	read()
	active, loading, epoch := c.active, c.loading, c.epoch
	c.mu.RUnlock()
	switch {
	case loading != 0:
		return ErrLoadInProgress
	case !active || !c.log.Leads(epoch):
		return ErrNotCoordinator
	}
	return nil
}

// Active reports whether the coordinator serves requests.
func (c *Coordinator) Active() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.active
}

// lookupClassic returns the live classic group, waking a dormant one
// (dormant.go) or creating an Empty one when create is set. It returns ErrNotCoordinator or ErrLoadInProgress when not
// serving, and errConsumerGroup for the id of a consumer group (an empty
// one is taken over when create is set: Kafka turns an empty consumer
// group into a classic one on a classic join); a nil group with a nil
// error means the group does not exist.
func (c *Coordinator) lookupClassic(id string, create bool) (*classicGroup, error) {
	for {
		g, err := c.lookupClassicOnce(id, create)
		if err != errLookAgain {
			return g, err
		}
	}
}

// lookupClassicOnce is one try of lookup; errLookAgain asks for another.
func (c *Coordinator) lookupClassicOnce(id string, create bool) (*classicGroup, error) {
	var (
		g  *classicGroup
		ok bool
	)
	if err := c.readServing(func() { g, ok = c.classics[id] }); err != nil {
		return nil, err
	}
	if ok {
		return g, nil
	}
	if cg := c.consumerOf(id); cg != nil {
		if err := c.takeOverConsumer(cg, create); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return nil, ErrNotCoordinator
	}
	if _, taken := c.consumers[id]; taken {
		return nil, errConsumerGroup // a consumer group was made meanwhile
	}
	if g, ok = c.classics[id]; ok {
		return g, nil
	}
	if g = c.wakeLocked(id); g == nil {
		if !create {
			return nil, nil
		}
		g = newClassicGroup(c, id)
	}
	c.classics[id] = g
	return g, nil
}

// lockClassic looks a group up and locks it. On success the caller must
// unlock g.mu. A nil group with a nil error means it does not exist.
func (c *Coordinator) lockClassic(id string, create bool) (*classicGroup, error) {
	return lockFound(c, func() (*classicGroup, error) { return c.lookupClassic(id, create) }, nil)
}

// forgetClassic drops a deleted group from the map if it is still the one there.
// It may be called with the group's lock held: nothing takes a group lock
// while holding c.mu.
func (c *Coordinator) forgetClassic(g *classicGroup) {
	c.mu.Lock()
	if c.classics[g.id] == g {
		delete(c.classics, g.id)
	}
	c.mu.Unlock()
}

// write enqueues cmd on the shard's log. Called with the group lock held so
// a group's entries are ordered as its state changes; wait for the future
// without the lock.
func (c *Coordinator) write(cmd fsm.Command) raft.ApplyFuture {
	b, err := fsm.Encode(cmd)
	if err != nil {
		return errorFuture{err}
	}
	return c.log.ApplyAsync(b, c.cfg.WriteTimeout)
}

// waitWrite waits for a write and folds the FSM's response into the error.
// Raft's errors come back as this package's sentinels (ApplyError).
func waitWrite(f raft.ApplyFuture) error {
	if err := f.Error(); err != nil {
		return ApplyError(err)
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// doneFuture is an ApplyFuture for a write there was no need to make.
var doneFuture raft.ApplyFuture = errorFuture{}

// errorFuture is an ApplyFuture that failed before reaching Raft.
type errorFuture struct{ err error }

func (f errorFuture) Error() error  { return f.err }
func (f errorFuture) Response() any { return nil }
func (f errorFuture) Index() uint64 { return 0 }
