package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/release"
)

// Shard is one Raft group of a node: a group shard (ID 0..Shards-1) or the
// metadata group (ID MetaShard). Propose through Apply, ApplyAsync and
// Barrier rather than Raft.Apply/Raft.Barrier: their futures also complete
// at shutdown. Raft is exposed for everything else (state, configuration,
// stats, snapshots); do not shut it down directly, use Node.Shutdown.
//
// Open makes every Shard and Start starts its Raft. Before that, Raft is
// nil, and what a group coordinator asks (groups.Log: ApplyAsync, Leads,
// Settling, HandingOver, RoutingChanges, ConfirmLeadership, Barrier)
// answers as a shard this node does not lead: raft.ErrNotLeader, false,
// a nil channel. Those methods are safe from any goroutine at any time;
// the others need a started shard (one Node.Shards lists once Start
// returned).
type Shard struct {
	ID int32
	// Raft is set by Start, before running; nil until then.
	Raft *raft.Raft
	FSM  raft.FSM
	// running is set once Start has started Raft (and set Raft, store
	// and trans): the groups.Log methods look at it first.
	running atomic.Bool

	logger       hclog.Logger
	localID      raft.ServerID
	leaseTimeout time.Duration
	heartbeat    time.Duration // HeartbeatTimeout: a follower elects after it without contact
	election     time.Duration // ElectionTimeout
	// leaderHeartbeat is LeaderHeartbeatTimeout, the leader's own
	// HeartbeatTimeout: it heartbeats every tenth to fifth of it
	// (paceHeartbeats, and heartbeats.go answers most at home).
	leaderHeartbeat time.Duration
	reloadMu        sync.Mutex          // orders the ReloadConfig calls (paceHeartbeats, nudgeElection)
	deaths          *raftnet.PeerDeaths // the node's record of proven-dead peers
	disk            *diskFence          // the node's disk fence (diskfence.go)
	writeLevel      *atomic.Int32       // the feature level the node writes (features.go)
	peers           *memberTable        // the node's membership view (fenced peers)
	routing         *signal             // the node's routing-change broadcast (RoutingChanges)
	stopObserver    func()              // ends the leader observer (registerLeaderObserver)
	store           shardLogStore
	// trans is the shard's Raft transport: what each peer acknowledged
	// (placement's catch-up check), and the heartbeat thinning that
	// confirmRound and transferLeadership bracket.
	trans        *raftnet.Transport
	reported     configReport // the configurations this node reported as leader
	notifyCh     chan bool
	leaderDone   chan struct{}
	bootstrapped bool // this start bootstrapped the shard
	hadState     bool // the shard had Raft state when this start opened it
	shutdownOnce sync.Once
	shutdownErr  error

	// pending are the tracked futures answerLoop has not completed, in
	// the order track queued them (futures.go); answering is set while an
	// answerLoop runs.
	pendingMu sync.Mutex
	pending   []*shardFuture
	answering bool
	answerGen uint64 // the running answerLoop's; failPendingWith detaches it
	stopped   bool   // Raft has shut down

	// leadership is the latest notification; written by leadershipLoop only.
	leadership leadershipState
	// leaderships counts the notifications that this node leads (RaftStats).
	leaderships atomic.Uint64
	// handOffAt is when this node last asked Raft to hand the shard's
	// leadership over (Unix ns), for leaderChangeLog.
	handOffAt atomic.Int64
	// reads batches leadership confirmations (ConfirmLeadership).
	reads readIndex

	// leaders is the node's leader table: who gossip says leads which
	// shard (a fenced leader waits there for its successor: handingOver).
	leaders *leaderTable
	// handover is the term this node led the shard in when it fenced
	// itself for its disk, and when (settling.go).
	handover handover
}

// transferLeadership hands the shard's leadership to the voter id (any
// voter when id is empty) and waits for Raft's answer. Heartbeats are all
// sent meanwhile and for a heartbeat timeout after (raftnet.Transport.Transferring): a vote in
// a transfer ignores the follower's stickiness to this leader. Called by
// the balance and placement loops and by Node.TransferLeadership.
func (s *Shard) transferLeadership(id raft.ServerID, addr raft.ServerAddress) error {
	s.handOffAt.Store(time.Now().UnixNano())
	s.trans.Transferring()
	defer s.trans.Transferring()
	if id == "" {
		return s.Raft.LeadershipTransfer().Error()
	}
	return s.Raft.LeadershipTransferToServer(id, addr).Error()
}

// IsLeader reports whether this node currently leads the shard (as far as its
// Raft knows: a partitioned leader keeps the role until its lease expires).
func (s *Shard) IsLeader() bool { return s.Raft.State() == raft.Leader }

// Term is the shard's current Raft term.
func (s *Shard) Term() uint64 { return s.Raft.CurrentTerm() }

// Apply proposes cmd and waits until it is committed and applied to the local
// FSM, ctx is done, or timeout (if positive) expires; timeout bounds the
// enqueueing into Raft too (raft.ErrEnqueueTimeout). It returns what the
// FSM's Apply returned, except that an error value is returned as err. Raft's
// errors (raft.ErrNotLeader, raft.ErrLeadershipLost, raft.ErrEnqueueTimeout,
// raft.ErrRaftShutdown, ...) are returned unchanged. When ctx ends or timeout
// expires after enqueueing (ctx.Err() or ErrApplyTimeout), the command may
// still commit.
func (s *Shard) Apply(ctx context.Context, cmd []byte, timeout time.Duration) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return WaitApply(ctx, s.ApplyAsync(cmd, timeout), timeout)
}

// ApplyAsync enqueues cmd without waiting and returns its future; timeout
// bounds only the enqueueing. Wait with the future's Error (then read
// Response) or with WaitApply.
//
// Unlike raft's own future, this one always completes: with BatchApplyCh,
// raft can accept a command into its apply buffer while shutting down and
// never answer it; such futures fail with raft.ErrRaftShutdown once the
// shard has shut down.
func (s *Shard) ApplyAsync(cmd []byte, timeout time.Duration) raft.ApplyFuture {
	if !s.running.Load() {
		return failedFuture(raft.ErrNotLeader)
	}
	if s.disk.fenced() {
		return fencedFuture()
	}
	if s.writeLevel != nil {
		if err := checkWriteLevel(s.ID, cmd, release.Level(s.writeLevel.Load())); err != nil {
			return failedFuture(err)
		}
	}
	f := s.Raft.Apply(cmd, timeout)
	return s.track(f, f)
}

// WaitApply waits for an ApplyFuture like Shard.Apply does (until it
// completes, ctx is done, or timeout if positive expires) and translates its
// result the same way: an error returned by the FSM becomes err.
func WaitApply(ctx context.Context, f raft.ApplyFuture, timeout time.Duration) (any, error) {
	var done <-chan struct{}
	if sf, ok := f.(*shardFuture); ok {
		done = sf.done
	} else if ctx.Done() != nil || timeout > 0 {
		ch := make(chan struct{})
		go func() { _ = f.Error(); close(ch) }()
		done = ch
	}
	if done != nil {
		var timer <-chan time.Time
		if timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer:
			// raft's own enqueue timeout may have fired at the same time.
			select {
			case <-done:
			default:
				return nil, ErrApplyTimeout
			}
		}
	}
	if err := f.Error(); err != nil {
		return nil, err
	}
	resp := f.Response()
	if e, ok := resp.(error); ok && e != nil {
		return nil, e
	}
	return resp, nil
}

// Barrier waits until every entry committed before it is applied to the local
// FSM. A new leader calls it before serving, so its FSM holds every entry of
// earlier terms. timeout bounds the enqueueing. Raft's errors pass through
// unchanged.
func (s *Shard) Barrier(timeout time.Duration) error {
	if !s.running.Load() {
		return raft.ErrNotLeader
	}
	if s.disk.fenced() {
		return raft.ErrLeadershipLost
	}
	return s.track(s.Raft.Barrier(timeout), nil).Error()
}

// leadershipLoop delivers the shard's leadership changes in order until
// notifyCh is closed (after Raft has shut down). Each notification is
// recorded as the shard's Leadership before the callback runs.
func (s *Shard) leadershipLoop(onLeadership func(int32, bool)) {
	defer close(s.leaderDone)
	for isLeader := range s.notifyCh {
		l := s.leadership.next(isLeader, s.Raft.CurrentTerm())
		if isLeader {
			s.leaderships.Add(1)
		}
		s.logger.Debug("shard leadership changed", "shard", s.ID, "leader", isLeader, "term", l.Term, "epoch", l.Epoch)
		s.paceHeartbeats(isLeader)
		s.routing.fire()
		if onLeadership != nil {
			onLeadership(s.ID, isLeader)
		}
	}
}

// handedOffRecently reports whether this node asked Raft to hand the
// shard's leadership over within handOffWindow.
func (s *Shard) handedOffRecently() bool {
	at := s.handOffAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < handOffWindow
}

// nudgeElection makes a follower whose configuration has this node as its
// only voter start its election now rather than after 1-2 heartbeat
// timeouts. It lowers HeartbeatTimeout through ReloadConfig, which makes a
// follower re-check its heartbeat timer at once (it has never heard from a
// leader, so it starts an election), then sets the pace of the role it
// then has (paceHeartbeats). At worst (if Raft ignored the nudge) the
// election happens at the normal time.
func (s *Shard) nudgeElection() {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.Raft.State() != raft.Follower {
		return
	}
	f := s.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	var voters []raft.ServerID
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			voters = append(voters, srv.ID)
		}
	}
	if len(voters) != 1 || voters[0] != s.localID {
		return
	}
	rc := s.Raft.ReloadableConfig()
	short := max(s.leaseTimeout, 5*time.Millisecond)
	if short >= rc.HeartbeatTimeout {
		s.logger.Debug("election nudge impossible: LeaderLeaseTimeout equals HeartbeatTimeout", "shard", s.ID)
		return
	}
	nudged := rc
	nudged.HeartbeatTimeout = short
	if err := s.Raft.ReloadConfig(nudged); err != nil {
		s.logger.Debug("election nudge failed", "shard", s.ID, "error", err)
		return
	}
	s.reloadTimeouts(s.IsLeader())
}

// shutdown stops the shard's Raft and its transport, waits for Raft's
// goroutines, stops the leadership loop and closes its store. The
// transport closes before the wait: an RPC in flight to a peer that does
// not answer would otherwise hold Raft's Shutdown for the transport's
// whole timeout. Idempotent.
func (s *Shard) shutdown() error {
	s.shutdownOnce.Do(func() {
		var errs []error
		stopped := s.Raft.Shutdown()
		_ = s.trans.Close()
		if err := stopped.Error(); err != nil {
			errs = append(errs, err)
		}
		s.stopObserver()
		s.failPending()
		// Raft's goroutines have exited: nothing sends on notifyCh any more.
		close(s.notifyCh)
		<-s.leaderDone
		if err := s.store.Close(); err != nil {
			errs = append(errs, err)
		}
		s.shutdownErr = errors.Join(errs...)
	})
	return s.shutdownErr
}
