package groups

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// Log is the shard's replicated log as the coordinator uses it;
// cluster.Shard implements it.
type Log interface {
	// ApplyAsync enqueues an entry and returns at once; the future resolves
	// when the entry is committed and applied. It may be called with a group
	// lock held.
	ApplyAsync(cmd []byte, timeout time.Duration) raft.ApplyFuture
	// Barrier waits until every entry committed before it is applied.
	Barrier(timeout time.Duration) error
	// IsLeader reports whether Raft still holds the shard's leadership; it
	// must be cheap (the coordinator asks on every request): between Raft
	// stepping down and Deactivate, requests must not be served from a
	// state that no longer moves.
	IsLeader() bool
}

// Coordinator serves the classic groups of one shard while this node leads
// it. Request handlers (one goroutine per client connection) call its
// methods concurrently; each group serializes on its own lock. The cluster's
// leadership goroutine for the shard calls Activate and Deactivate.
type Coordinator struct {
	cfg    Config
	shard  int32
	log    Log
	state  *fsm.ShardFSM
	logger hclog.Logger
	// now returns the wall clock in Unix milliseconds; tests may replace it.
	now func() int64

	mu      sync.RWMutex
	active  bool
	loading bool
	// counters for metrics, monotonic for the coordinator's life.
	committed  atomic.Uint64 // partitions committed
	rebalances atomic.Uint64 // rebalances completed (group became Stable)
	expired    atomic.Uint64 // members removed for missing their session or rebalance deadline
	// epoch counts Activate and Deactivate calls, so an Activate that
	// finishes after a later Deactivate does not resurrect the coordinator.
	epoch  uint64
	groups map[string]*group
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
		cfg:    cfg,
		shard:  shard,
		log:    log,
		state:  state,
		logger: logger.With("shard", shard),
		now:    func() int64 { return time.Now().UnixMilli() },
		groups: make(map[string]*group),
	}, nil
}

// Activate starts serving after this node became the shard's leader: it
// waits for the log to be applied (a barrier), then rebuilds every group
// from the FSM and gives each member a fresh session timeout. Requests that
// arrive meanwhile get ErrLoadInProgress. It blocks on Raft, so the caller
// runs it on a goroutine of its own, not on the one delivering leadership
// notifications.
func (c *Coordinator) Activate() error {
	c.mu.Lock()
	c.epoch++
	epoch := c.epoch
	c.loading = true
	c.mu.Unlock()
	if err := c.log.Barrier(c.cfg.WriteTimeout); err != nil {
		c.mu.Lock()
		if c.epoch == epoch {
			c.loading = false
		}
		c.mu.Unlock()
		return err
	}
	groups := make(map[string]*group)
	for _, r := range c.state.Groups() {
		g := groupFromRecord(c, r)
		g.mu.Lock()
		for _, m := range g.members {
			g.startSession(m)
		}
		g.mu.Unlock()
		groups[g.id] = g
	}
	c.mu.Lock()
	if c.epoch != epoch {
		c.mu.Unlock()
		for _, g := range groups {
			g.mu.Lock()
			g.close()
			g.mu.Unlock()
		}
		return ErrNotCoordinator
	}
	n := len(groups)
	c.groups, c.active, c.loading = groups, true, false
	c.mu.Unlock()
	c.logAtInfoIf(n > 0, "coordinator active", "groups", n)
	return nil
}

// Deactivate stops serving after leadership was lost: every waiting join and
// sync fails with ErrNotCoordinator and every timer stops. Called from the
// shard's leadership goroutine.
func (c *Coordinator) Deactivate() {
	c.mu.Lock()
	c.epoch++
	groups, wasActive := c.groups, c.active
	c.groups, c.active, c.loading = make(map[string]*group), false, false
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		g.close()
		g.mu.Unlock()
	}
	if wasActive {
		c.logAtInfoIf(len(groups) > 0, "coordinator inactive", "groups", len(groups))
	}
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

// Active reports whether the coordinator serves requests.
func (c *Coordinator) Active() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.active
}

// lookup returns the live group, creating an Empty one when create is set.
// It returns ErrNotCoordinator or ErrLoadInProgress when not serving; a nil
// group with a nil error means the group does not exist.
func (c *Coordinator) lookup(id string, create bool) (*group, error) {
	c.mu.RLock()
	g, ok := c.groups[id]
	active, loading := c.active, c.loading
	c.mu.RUnlock()
	switch {
	case loading:
		return nil, ErrLoadInProgress
	case !active || !c.log.IsLeader():
		return nil, ErrNotCoordinator
	case ok || !create:
		return g, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active {
		return nil, ErrNotCoordinator
	}
	if g, ok = c.groups[id]; !ok {
		g = newGroup(c, id)
		c.groups[id] = g
	}
	return g, nil
}

// lockGroup looks a group up and locks it. On success the caller must
// unlock g.mu. A nil group with a nil error means it does not exist.
func (c *Coordinator) lockGroup(id string, create bool) (*group, error) {
	for {
		g, err := c.lookup(id, create)
		if err != nil || g == nil {
			return nil, err
		}
		g.mu.Lock()
		if !g.closed {
			return g, nil
		}
		g.mu.Unlock()
		// The group was closed by Deactivate or removed by a delete after
		// the lookup: look again, which answers from the current state.
		if !c.Active() {
			return nil, ErrNotCoordinator
		}
	}
}

// forget drops a deleted group from the map if it is still the one there.
// It may be called with the group's lock held: nothing takes a group lock
// while holding c.mu.
func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
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
func waitWrite(f raft.ApplyFuture) error {
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrEnqueueTimeout) {
			return ErrTimeout
		}
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
			return ErrNotCoordinator
		}
		return err
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// FailedFuture returns an ApplyFuture that already failed with err, for a
// Log that cannot reach Raft.
func FailedFuture(err error) raft.ApplyFuture { return errorFuture{err} }

// doneFuture is an ApplyFuture for a write there was no need to make.
var doneFuture raft.ApplyFuture = errorFuture{}

// errorFuture is an ApplyFuture that failed before reaching Raft.
type errorFuture struct{ err error }

func (f errorFuture) Error() error  { return f.err }
func (f errorFuture) Response() any { return nil }
func (f errorFuture) Index() uint64 { return 0 }
