package server

import (
	"sync"
	"time"
)

// Event is one entry of a node's timeline: a rebalance its coordinators
// completed, or a shard leadership it gained or lost. The status page
// merges every node's.
type Event struct {
	At   time.Time `json:"at"`
	Node int32     `json:"node"`
	// Kind is "rebalance", "leader-gained" or "leader-lost".
	Kind  string `json:"kind"`
	Shard int32  `json:"shard"` // -1 for the metadata shard
	// Group, Generation, Members, Protocol and TookMs are a rebalance's:
	// the generation it completed, its members and assignor, and how long
	// since the group began PreparingRebalance.
	Group       string  `json:"group,omitempty"`
	GroupBase64 []byte  `json:"group_base64,omitempty"`
	Generation  int32   `json:"generation,omitempty"`
	Members     int     `json:"members,omitempty"`
	Protocol    string  `json:"protocol,omitempty"`
	TookMs      float64 `json:"took_ms,omitempty"`
	// Term is a gained leadership's Raft term.
	Term uint64 `json:"term,omitempty"`
}

// Event kinds.
const (
	eventRebalance    = "rebalance"
	eventLeaderGained = "leader-gained"
	eventLeaderLost   = "leader-lost"
)

// timelineSize is how many events a node keeps: its most recent ones. A
// start of 50 shards is 50 leadership events, so this keeps several
// starts' worth besides the rebalances.
const timelineSize = 512

// timeline is a node's ring of recent events, in memory only: a restarted
// node's begins empty. add is called with a group's lock held and from
// leadership callbacks, so it only appends under its own short lock.
type timeline struct {
	mu     sync.Mutex
	events []Event // a ring once it holds timelineSize
	next   int     // where the next event goes once the ring is full
}

func (t *timeline) add(e Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.events) < timelineSize {
		t.events = append(t.events, e)
		return
	}
	t.events[t.next] = e
	t.next = (t.next + 1) % timelineSize
}

// recent returns the events newest first.
func (t *timeline) recent() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Event, 0, len(t.events))
	for i := len(t.events) - 1; i >= 0; i-- {
		out = append(out, t.events[(t.next+i)%len(t.events)])
	}
	return out
}
