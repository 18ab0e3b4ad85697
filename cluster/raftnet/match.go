package raftnet

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// matchTracker records, on a shard leader, the highest log index each peer
// acknowledged holding: the transport sees every AppendEntries and
// InstallSnapshot answer, so placement can tell when a non-voter has
// caught up without anything from hashicorp/raft's private replication
// state. Raft's replication goroutines write it; the placement loop reads
// it. Neither blocks beyond a short mutex.
type matchTracker struct {
	mu sync.Mutex
	m  map[raft.ServerID]matchState
}

type matchState struct {
	// term is the leader term of the requests the answers below answered:
	// an index acknowledged to an earlier leadership of this node says
	// nothing of the follower's log now (a leader in between may have
	// truncated it).
	term  uint64
	index uint64    // highest index acknowledged by an answer that checked the log
	at    time.Time // last successful answer, heartbeats included
}

func newMatchTracker() *matchTracker { return &matchTracker{m: make(map[raft.ServerID]matchState)} }

// acked records a successful answer of id to a request of leader term
// term, covering the log up to index; index 0 is a heartbeat's (it checks
// no log) and only refreshes the time. An answer of a later term starts
// afresh; a late answer of an earlier term is ignored.
func (t *matchTracker) acked(id raft.ServerID, term, index uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.m[id]
	switch {
	case term < st.term:
		return
	case term > st.term:
		st = matchState{term: term}
	}
	st.index, st.at = max(st.index, index), time.Now()
	t.m[id] = st
}

// reset forgets id (it is being added afresh).
func (t *matchTracker) reset(id raft.ServerID) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// get returns what id acknowledged to this node's leadership of term,
// and when; zero when it answered none of that term.
func (t *matchTracker) get(id raft.ServerID, term uint64) (uint64, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.m[id]
	if st.term != term {
		return 0, time.Time{}
	}
	return st.index, st.at
}
