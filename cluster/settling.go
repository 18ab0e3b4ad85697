package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Settling reports whether a request for this shard that reaches this node
// should wait here for the shard's leadership to settle, rather than be
// sent to the last leader: this node leads (or won an election whose
// notification and activation are still on their way), or this replica
// followed a leader that is gone or going (its death is proven, an election
// is under way, or it has been silent for half a heartbeat timeout, at
// least two missed heartbeats even where heartbeats.go answers some of
// them locally) within the last election's length.
//
// It is not settling when there is nothing to wait for here: this replica
// never heard from a leader since it started or since it stepped down
// itself (a restarted node whose leader still backs off its heartbeats to
// it, or a deposed leader cut off from the rest, whose Raft stamps its own
// contact time at the step-down), or it has been cut off for longer than an
// election takes.
//
// Node.LeaderOf names this node while the shard settles, and the group
// coordinator holds the requests that reach it until the outcome. Cheap:
// any goroutine may call it, on every request.
func (s *Shard) Settling() bool {
	if !s.running.Load() {
		return false
	}
	if s.disk.fenced() {
		// Nothing is served here until the disk answers; but a shard
		// this node led settles until gossip names its successor.
		return s.handingOver()
	}
	switch s.Raft.State() {
	case raft.Leader:
		return true
	case raft.Follower, raft.Candidate:
	default:
		return false
	}
	if !s.votes() {
		return false // a non-voter never leads: nothing to wait for here
	}
	last := s.Raft.LastContact()
	if last.IsZero() || !last.After(s.leadership.steppedDown()) {
		return false
	}
	silent := time.Since(last)
	if silent > s.heartbeat+2*s.election {
		return false
	}
	addr, id := s.Raft.LeaderWithID()
	switch {
	case id == "":
		return true // Raft forgot its leader: an election is under way
	case id == s.localID:
		return true
	case s.leaderDead(addr, last), s.peers.fencedAddr(string(addr)):
		return true
	}
	return silent >= s.heartbeat/2
}

// deathContactSlack is how long after a death's proof a contact from the
// dead leader still counts as a leftover: frames the process wrote before
// it died can be read, on another of its connections, after the refused
// probe. A process that really came back has to restart and dial first,
// and its new connection clears the record anyway (peerDeaths.alive).
const deathContactSlack = 100 * time.Millisecond

// votes reports whether this replica is a voter of the shard's latest
// configuration.
func (s *Shard) votes() bool {
	v, ok := s.suffrage()
	return ok && v == raft.Voter
}

// suffrage returns this replica's suffrage in the shard's latest
// configuration, if the configuration names it.
func (s *Shard) suffrage() (raft.ServerSuffrage, bool) {
	f := s.Raft.GetConfiguration()
	if f.Error() != nil {
		return 0, false
	}
	for _, srv := range f.Configuration().Servers {
		if srv.ID == s.localID {
			return srv.Suffrage, true
		}
	}
	return 0, false
}

// leaderDead reports whether the leader at addr is proven dead and has not
// been heard from (last) since the proof: a contact newer than the proof
// by more than deathContactSlack overrides the record.
func (s *Shard) leaderDead(addr raft.ServerAddress, last time.Time) bool {
	at, dead := s.deaths.DeadSince(string(addr))
	return dead && !last.After(at.Add(deathContactSlack))
}

// RoutingChanges returns a channel closed at the next change that can end a
// shard's settling on this node: a Raft leader change of any shard, a
// leadership notification, or a peer's death proven or disproven. A request
// held while a shard settles waits on it (and on a short recheck, since a
// settling window also ends by time passing).
func (s *Shard) RoutingChanges() <-chan struct{} {
	if !s.running.Load() {
		return nil // nothing settles before Raft runs; a nil channel never fires
	}
	return s.routing.wait()
}

// signal is a broadcast to any number of waiters: wait returns a channel
// that the next fire closes. Any goroutine may use it; fire never blocks.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}

// observeLeaders fires routing on every leader change Raft observes for the
// shard (including "no leader" when an election starts), until obsCh is
// closed at shutdown. Runs on a goroutine of its own.
func (s *Shard) observeLeaders(obsCh <-chan raft.Observation) {
	for range obsCh {
		s.routing.fire()
	}
}

// registerLeaderObserver starts observeLeaders; the returned function
// deregisters it and ends the goroutine, once Raft has shut down.
func (s *Shard) registerLeaderObserver() (stop func()) {
	obsCh := make(chan raft.Observation, 16)
	obs := raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	s.Raft.RegisterObserver(obs)
	go s.observeLeaders(obsCh)
	return func() {
		s.Raft.DeregisterObserver(obs)
		close(obsCh)
	}
}

// handover is a fenced leader's hand-off of one shard (diskfence.go): the
// term it led in, and when it fenced itself.
type handover struct {
	term atomic.Uint64
	at   atomic.Int64 // a monoOffset
}

func (h *handover) begin(term uint64) {
	h.at.Store(monoOffset(time.Now()))
	h.term.Store(term)
}

func (h *handover) end() { h.term.Store(0) }

// since is how long ago the hand-off began.
func (h *handover) since() time.Duration {
	return time.Since(monoTime(h.at.Load()))
}

// HandingOver reports whether this node led the shard when it fenced
// itself for its disk and does not know yet, through gossip, which node
// took it over (handingOver). Cheap; the group coordinator asks it before
// it answers a request whose leadership was lost NOT_COORDINATOR.
func (s *Shard) HandingOver() bool { return s.running.Load() && s.handingOver() }

// handingOver reports whether this node led the shard when it fenced
// itself for its disk and no node is known, through gossip, to lead it in
// a later term yet, within an election's length of the fence. Its group
// requests are held meanwhile (Settling): answered NOT_COORDINATOR at
// once, a client asks another node for the coordinator in the moment
// before that node has heard of the hand-off, is named this node again,
// and segmentio/kafka-go leaves its group on the second refusal.
//
// It is false on a node that is not fenced. In the instant between the fence
// and fenceForDisk reaching the shard, the hand-off is not recorded yet,
// but the shard's leadership still says this node leads: that counts too.
func (s *Shard) handingOver() bool {
	if !s.disk.fenced() {
		return false
	}
	term := s.handover.term.Load()
	if term == 0 {
		l := s.leadership.load()
		if !l.Leader {
			return false
		}
		term = l.Term
	} else if s.handover.since() > s.heartbeat+2*s.election {
		return false
	}
	e, ok := s.leaders.get(s.ID)
	return !ok || serverID(e.Node) == s.localID || e.Term <= term
}
