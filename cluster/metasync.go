package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/fsm"
)

// This file is the metadata group's read barrier: a node about to answer
// "no such topic", "no such user" or "not allowed" from its own replica
// first brings that replica up to what the metadata leader had applied
// (SyncMetadataSince), and a node whose replica no barrier has confirmed
// for a while does not trust it to allow anything (MetadataFresh).

// metaReplica is what the read barrier needs of the metadata group's FSM
// (fsm.MetaFSM): the Raft index of the last command it applied, whether
// that index is known (not after a snapshot of the first release), and a
// wait for an index. hashicorp/raft's own AppliedIndex
// runs ahead of the FSM (its main loop raises it when it hands entries to
// the FSM goroutine) and counts entries the FSM never sees (no-ops,
// barriers), so it cannot serve a barrier.
type metaReplica interface {
	AppliedIndex() uint64
	AppliedIndexKnown() bool
	WaitApplied(ctx context.Context, i uint64) error
}

// metaSyncTimeout bounds one read barrier round: asking the leader and
// waiting for this replica to apply what it answered.
const metaSyncTimeout = 5 * time.Second

// metaSyncPoll is how often a barrier that cannot use the FSM's index (a
// leader of the previous release, or a replica whose index is unknown)
// looks at Raft's applied index.
const metaSyncPoll = 5 * time.Millisecond

// SyncMetadata returns once this node's replica of the metadata group has
// applied every change acknowledged before the call (a read barrier), so
// that a read of it that follows sees them. See SyncMetadataSince.
func (n *Node) SyncMetadata(ctx context.Context) error {
	return n.SyncMetadataSince(ctx, time.Now())
}

// SyncMetadataSince returns once this node's replica of the metadata group
// has applied every change acknowledged before since: a request that
// arrived at since and found no topic, user or allowing ACL in the replica
// calls it, then looks again, so that a miss is answered only after the
// leader's state was consulted. A hit costs nothing; a miss costs one
// round trip to the metadata leader (VerifyLeader there, batched) and the
// local apply of what it answered.
//
// Calls are coalesced: a round that began at or after since serves the
// caller, whether it succeeded or failed (rounds run one at a time on
// their own goroutine, and every call queued behind a round shares the
// next), so one request's many misses and a burst of requests cost one
// round. Any goroutine may call it; it blocks at most until ctx ends or
// the node shuts down, and fails with raft.ErrNotLeader when no leader can
// be reached.
func (n *Node) SyncMetadataSince(ctx context.Context, since time.Time) error {
	if n.closed.Load() {
		return raft.ErrRaftShutdown
	}
	rd := n.metaSync.join(since, n.metaSyncRound)
	select {
	case <-rd.done:
		return rd.err
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the metadata read barrier: %w", ErrApplyTimeout, ctx.Err())
	case <-n.stop:
		return raft.ErrRaftShutdown
	}
}

// MetadataSyncRounds is how many read barrier rounds this node has run.
func (n *Node) MetadataSyncRounds() uint64 { return n.metaSync.rounds.Load() }

// metaSyncRound runs one read barrier round. Called on the round goroutine
// of metaSync.
func (n *Node) metaSyncRound() error {
	ctx, cancel := context.WithTimeout(context.Background(), metaSyncTimeout)
	defer cancel()
	go func() { // a shutdown ends the round at once
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, _, err := n.metaReadIndex(ctx)
	return err
}

// metaReadIndex returns the metadata group's read index once this node's
// replica has reached it: on the leader, whose replica holds everything
// it acknowledged, once a quorum confirmed that it still leads (so a
// deposed leader does not read alone); elsewhere, once the leader
// answered and this replica applied what it answered. exact says the
// index is a command's (see askMetaReadIndex). Called by barrier rounds
// and ConfirmMetadataEverywhere; it blocks at most until ctx ends.
func (n *Node) metaReadIndex(ctx context.Context) (index uint64, exact bool, err error) {
	if !n.shardsStarted.Load() {
		return 0, false, fmt.Errorf("%w: the node is still starting", raft.ErrNotLeader)
	}
	if n.meta.IsLeader() {
		index, err = n.metaReadIndexHere(ctx)
		return index, true, err
	}
	if index, exact, err = n.askMetaReadIndex(ctx); err == nil {
		err = n.awaitMetaIndex(ctx, index, exact)
	}
	return index, exact, err
}

// askMetaReadIndex asks the metadata leader for its read index. exact
// says the index is one of its FSM's (metaReadIndexHere); otherwise it is
// Raft's applied index, as a leader of the previous release answers
// "meta-index", and this replica compares it with its own Raft's.
func (n *Node) askMetaReadIndex(ctx context.Context) (index uint64, exact bool, err error) {
	b, ok := n.MetaLeader()
	for !ok {
		// An election: wait for its outcome within the round's bound.
		select {
		case <-ctx.Done():
			return 0, false, fmt.Errorf("%w: no metadata leader is known", raft.ErrNotLeader)
		case <-time.After(awaitLeaderRecheck):
		}
		b, ok = n.MetaLeader()
	}
	addr, ok := n.members.raftAddrs(n.mux.Deaths())[b.NodeID]
	if !ok {
		return 0, false, fmt.Errorf("%w: the metadata leader, node %d, is not reachable", raft.ErrNotLeader, b.NodeID)
	}
	resp, err := n.adminCall(ctx, addr, adminRequest{Op: "meta-read-index"})
	exact = true
	if err == nil && isUnknownOp(resp) {
		exact = false // a leader of the previous release
		resp, err = n.adminCall(ctx, addr, adminRequest{Op: "meta-index"})
	}
	if err == nil {
		err = adminError(resp)
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: asking the metadata leader, node %d, for its index: %v", raft.ErrNotLeader, b.NodeID, err)
	}
	return resp.Index, exact, nil
}

// awaitMetaIndex waits for this replica to reach a read index. An exact
// index (a command's) is waited for on the FSM; Raft's applied index
// stands in when the leader answered one of Raft's, when this FSM does not
// keep an index, or while it does not know its own (restored from a
// snapshot of the previous release, with no command since): Raft's runs
// ahead of the FSM by what it has handed it, close enough for the length
// of a rolling upgrade.
func (n *Node) awaitMetaIndex(ctx context.Context, index uint64, exact bool) error {
	if rep, ok := n.meta.FSM.(metaReplica); ok && exact && rep.AppliedIndexKnown() {
		return n.awaitMetaApplied(ctx, index)
	}
	for n.meta.Raft.AppliedIndex() < index {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: this replica of the metadata group did not reach index %d", ErrApplyTimeout, index)
		case <-time.After(metaSyncPoll):
		}
	}
	return nil
}

// awaitMetaApplied returns once this node's replica of the metadata group
// has applied the command at index (at once with an FSM that keeps no
// index), at most until ctx ends.
func (n *Node) awaitMetaApplied(ctx context.Context, index uint64) error {
	rep, ok := n.meta.FSM.(metaReplica)
	if !ok {
		return nil
	}
	if err := rep.WaitApplied(ctx, index); err != nil {
		return fmt.Errorf("%w: this replica of the metadata group did not apply index %d: %v", ErrApplyTimeout, index, err)
	}
	return nil
}

// metaReadIndexHere is the read index of the metadata group, served by its
// leader (admin op "meta-read-index"): the index of the last command its
// FSM applied, once the FSM holds every entry of earlier terms and a
// quorum confirmed, after the call began, that this node still leads. A
// replica that has applied the command at that index holds every change
// acknowledged before the call.
//
// Its errors wrap ErrNotMetaLeader and raft.ErrNotLeader (this node does
// not lead, or no longer: the caller asks the leader, a client hears
// NOT_CONTROLLER) or ErrApplyTimeout.
func (n *Node) metaReadIndexHere(ctx context.Context) (uint64, error) {
	if !n.shardsStarted.Load() {
		return 0, errNotMetaLeaderNow
	}
	l := n.meta.Leadership()
	if !n.meta.Leads(l.Epoch) {
		return 0, errNotMetaLeaderNow
	}
	if err := n.metaTermApplied(ctx); err != nil {
		return 0, err
	}
	if err := n.meta.ConfirmLeadership(ctx, l.Epoch); err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%w: confirming the metadata leadership: %w", ErrApplyTimeout, ctx.Err())
		}
		return 0, fmt.Errorf("%w: %v", errNotMetaLeaderNow, err)
	}
	if rep, ok := n.meta.FSM.(metaReplica); ok {
		return rep.AppliedIndex(), nil
	}
	return n.meta.Raft.AppliedIndex(), nil
}

// errNotMetaLeaderNow is ErrNotMetaLeader as raft.ErrNotLeader too, which
// the Kafka handlers answer NOT_CONTROLLER.
var errNotMetaLeaderNow = fmt.Errorf("%w (%w)", ErrNotMetaLeader, raft.ErrNotLeader)

// metaTermApplied returns once the metadata leader's FSM has applied every
// entry its predecessors committed: a barrier, once per term. A new
// leader's FSM may lag what the previous leader acknowledged until then.
// When the FSM does not know its own index (restored from a snapshot of
// the previous release, with no command since), it also applies a
// ClusterStamp of the cluster's id, which changes nothing but gives every
// replica a command index to meet at; the previous release applies it too.
// Until that is done the term does not count as applied (the index it
// would answer may be older than its state). Called by the metadata leader's
// placement loop and read index; it takes at most until ctx ends.
func (n *Node) metaTermApplied(ctx context.Context) error {
	term := n.meta.Term()
	if n.metaAppliedTerm.Load() == term {
		return nil
	}
	if err := n.meta.Barrier(remaining(ctx)); err != nil {
		return fmt.Errorf("barrier of the metadata group's term %d: %w", term, err)
	}
	if rep, ok := n.meta.FSM.(metaReplica); ok && !rep.AppliedIndexKnown() {
		id := n.ClusterID()
		if id == "" {
			return fmt.Errorf("%w: the metadata group's index is unknown before the cluster has an id", ErrApplyTimeout)
		}
		b, err := fsm.Encode(&fsm.ClusterStamp{ID: id})
		if err != nil {
			return err
		}
		// A stamp the FSM refuses (another id) still has its index.
		if _, err := n.meta.Apply(ctx, b, remaining(ctx)); err != nil && !errors.Is(err, fsm.ErrClusterIDMismatch) {
			return fmt.Errorf("%w: a command for the metadata group's index in term %d: %w", ErrApplyTimeout, term, err)
		}
	}
	n.metaAppliedTerm.Store(term)
	return nil
}

// metaIndexHere answers the previous release's "meta-index": Raft's applied
// index once a quorum confirmed the leadership. Kept for the followers of
// that release while a rolling upgrade runs.
func (n *Node) metaIndexHere() (uint64, error) {
	if !n.shardsStarted.Load() || !n.meta.IsLeader() {
		return 0, ErrNotMetaLeader
	}
	if err := n.meta.Raft.VerifyLeader().Error(); err != nil {
		return 0, err
	}
	return n.meta.Raft.AppliedIndex(), nil
}

// isUnknownOp reports whether an admin answer says the peer does not know
// the op: a node of an earlier release.
func isUnknownOp(resp adminResponse) bool {
	return resp.Code == "unknown-op" || (resp.Code == "error" && strings.HasPrefix(resp.Error, "unknown admin op"))
}

// MetadataFresh reports whether this node may trust its replica of the
// metadata group to allow a request (an ACL that allows it, a user's
// credential): a read barrier succeeded within maxStaleness, and since
// then the node has neither fenced itself for its disk nor been paused. A
// replica no barrier confirmed lately (just started, cut off from the
// leader, fenced, back from a pause) may miss a revocation that every
// other node applied. Cheap; connection goroutines call it on every
// request.
func (n *Node) MetadataFresh(maxStaleness time.Duration) bool {
	if n.closed.Load() || n.disk.fenced() || raftnet.PausedRecently() {
		return false
	}
	last := n.metaSync.lastSuccess()
	return !last.IsZero() && time.Since(last) <= maxStaleness
}

// EnsureMetadataFresh returns nil when this node may trust its replica of
// the metadata group to allow a request (MetadataFresh), running a read
// barrier first when it may not, and fails when that barrier fails (the
// caller refuses the request). A replica fresh for more than half of
// maxStaleness starts a barrier it does not wait for, so that while
// requests come the replica stays fresh and none of them waits. Any round
// that began within maxStaleness serves a caller, so callers never queue
// behind one another. Connection goroutines call it on every request of a
// node that authenticates; it allocates nothing while the replica is
// fresh, and blocks only when it is stale, at most timeout or until ctx
// ends.
func (n *Node) EnsureMetadataFresh(ctx context.Context, maxStaleness, timeout time.Duration) error {
	if n.MetadataFresh(maxStaleness) {
		if time.Since(n.metaSync.lastSuccess()) > maxStaleness/2 {
			n.metaSync.join(time.Now(), n.metaSyncRound) // ahead of need, not waited for
		}
		return nil
	}
	if n.closed.Load() {
		return raft.ErrRaftShutdown
	}
	since := time.Now().Add(-maxStaleness)
	if n.disk.fenced() || raftnet.PausedRecently() {
		since = time.Now() // nothing from before counts
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return n.SyncMetadataSince(ctx, since)
}

// metaSync coalesces a node's read barrier rounds (SyncMetadataSince).
// Rounds run one at a time on one goroutine; a caller is served by the
// last round that ended, or the one running, if it began at or after the
// caller's since, and otherwise waits for the next, which every caller
// queued meanwhile shares.
type metaSync struct {
	mu      sync.Mutex
	running bool
	cur     *metaSyncRound // the round in progress; nil between rounds
	next    *metaSyncRound // the round queued callers share; nil when none
	// last is the latest round that ended (nil before the first).
	last *metaSyncRound
	// lastOK is when the latest round that succeeded began, as
	// a monoOffset (0: none did); an atomic, since
	// every request of an authenticating node reads it (MetadataFresh).
	lastOK atomic.Int64
	// forgotAt is when forget last ran (a monoOffset): no round that
	// began before counts.
	forgotAt int64

	rounds atomic.Uint64
}

// metaSyncRound is one round; done closes once err is set.
type metaSyncRound struct {
	start time.Time
	done  chan struct{}
	err   error
}

// join returns the round that serves a caller whose read began at since,
// possibly one already ended. It starts the round goroutine, which calls
// run, if none runs.
func (m *metaSync) join(since time.Time, run func() error) *metaSyncRound {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last != nil && !m.last.start.Before(since) {
		return m.last
	}
	if m.cur != nil && !m.cur.start.Before(since) {
		return m.cur
	}
	if m.next == nil {
		m.next = &metaSyncRound{done: make(chan struct{})}
	}
	rd := m.next
	if !m.running {
		m.running = true
		go m.loop(run)
	}
	return rd
}

// forget makes every round that began before now count for nothing
// towards freshness, one still running included (a disk fence: the
// replica misses what is applied from now on).
func (m *metaSync) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgotAt = monoOffset(time.Now())
	m.lastOK.Store(0)
}

// lastSuccess is when the latest round that succeeded began (zero if
// none did). Lock-free.
func (m *metaSync) lastSuccess() time.Time {
	v := m.lastOK.Load()
	if v == 0 {
		return time.Time{}
	}
	return monoTime(v)
}

// loop runs rounds until none is queued.
func (m *metaSync) loop(run func() error) {
	for {
		m.mu.Lock()
		rd := m.next
		m.next, m.cur = nil, rd
		if rd == nil {
			m.running = false
			m.mu.Unlock()
			return
		}
		rd.start = time.Now()
		m.mu.Unlock()
		rd.err = run()
		m.rounds.Add(1)
		m.mu.Lock()
		if m.last == nil || rd.start.After(m.last.start) {
			m.last = rd
		}
		if at := monoOffset(rd.start); rd.err == nil && at > m.lastOK.Load() && at > m.forgotAt {
			m.lastOK.Store(max(at, 1))
		}
		m.cur = nil
		m.mu.Unlock()
		close(rd.done)
	}
}
