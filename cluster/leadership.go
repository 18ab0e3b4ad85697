package cluster

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Leadership is one notification of this node's role in a shard, as the
// shard's leadership goroutine delivered it: Epoch counts the notifications
// of the shard since the node started (so two leaderships of one shard never
// share an epoch, even when Raft re-elects this node in a quick flap), Term
// is the Raft term it was observed in, and Leader says whether this node
// leads.
//
// It is the one owner of "this node leads shard S in term T": the group
// coordinator, the server's activation retries and the metadata registry
// all compare the epoch they started under with Shard.Leadership, rather
// than each keeping a counter of its own.
type Leadership struct {
	Epoch  uint64
	Term   uint64
	Leader bool
}

// leadershipState is a shard's current Leadership. The leadership goroutine
// writes it before it calls the OnLeadership callbacks, so a callback that
// reads it sees its own notification; any goroutine may read it.
type leadershipState struct {
	cur atomic.Pointer[Leadership]
	// down is when the latest notification that this node no longer
	// leads arrived (nil: never). A time.Time keeps its monotonic reading,
	// so comparing it with Raft's last contact survives a wall-clock step.
	down atomic.Pointer[time.Time]
}

// steppedDown returns when this node last stopped leading the shard, as
// notified (the zero time if it never did).
func (l *leadershipState) steppedDown() time.Time {
	if d := l.down.Load(); d != nil {
		return *d
	}
	return time.Time{}
}

// load returns the current leadership (the zero value before the first
// notification).
func (l *leadershipState) load() Leadership {
	if p := l.cur.Load(); p != nil {
		return *p
	}
	return Leadership{}
}

// next records a new notification. Called only by the shard's leadership
// goroutine.
func (l *leadershipState) next(leader bool, term uint64) Leadership {
	n := Leadership{Epoch: l.load().Epoch + 1, Term: term, Leader: leader}
	if !leader {
		now := time.Now()
		l.down.Store(&now)
	}
	l.cur.Store(&n)
	return n
}

// Leadership returns the shard's latest leadership notification. Cheap:
// request handlers call it on every request.
func (s *Shard) Leadership() Leadership { return s.leadership.load() }

// Leads reports whether epoch is still the current leadership of this node
// and Raft has not stepped down since: between Raft stepping down and the
// notification arriving, State already says Follower (or the term moved
// on). A node fenced for its disk leads nothing, whatever its Raft says.
// It does not ask a quorum (see ConfirmLeadership).
func (s *Shard) Leads(epoch uint64) bool {
	if !s.running.Load() {
		return false
	}
	l := s.leadership.load()
	// The term too: a leader's term changes only when it steps down, so a
	// newer term means this epoch ended even if its notification lags.
	return l.Leader && l.Epoch == epoch && s.Raft.State() == raft.Leader && s.Raft.CurrentTerm() == l.Term && !s.disk.fenced()
}

// ErrNotLeading is returned by ConfirmLeadership when this node no longer
// leads the shard in the epoch the caller serves under.
var ErrNotLeading = errors.New("cluster: this node no longer leads the shard")
