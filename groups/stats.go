package groups

import "time"

// Stats is a point-in-time count of a coordinator's groups, for metrics.
type Stats struct {
	// Active is whether the coordinator serves its shard.
	Active bool
	// GroupsByState counts groups per state name, classic and consumer
	// groups together (Kafka's names: both have Empty and Stable; only
	// consumer groups are Assigning or Reconciling).
	GroupsByState map[string]int
	// Members counts members over every group.
	Members int
	// Committed, Rebalances and Expired are counters since the
	// coordinator was created: partitions committed, rebalances completed,
	// members removed for missing a session, join or sync deadline.
	Committed, Rebalances, Expired uint64
	// OffsetsExpired counts partitions' offsets removed for retention
	// (offsets.retention.minutes).
	OffsetsExpired uint64
	// Held counts requests held while the shard's leadership settled,
	// HeldFor their total wait, and HoldsExpired those the hold's bound
	// (kcoord.group.election.hold.ms) answered.
	Held, HoldsExpired uint64
	HeldFor            time.Duration
}

// Stats counts the groups: the live ones, each under its lock briefly, one
// at a time, and the dormant ones (dormant.go), counted Empty. Called by
// the metrics scraper.
func (c *Coordinator) Stats() Stats {
	c.mu.RLock()
	st := Stats{Active: c.active, GroupsByState: make(map[string]int),
		Committed: c.committed.Load(), Rebalances: c.rebalances.Load(), Expired: c.expired.Load(), OffsetsExpired: c.offsetsExpired.Load(),
		Held: c.held.Load(), HoldsExpired: c.holdExpired.Load(), HeldFor: time.Duration(c.heldFor.Load())}
	groups := groupList(c.classics, c.consumers)
	if dormant := c.dormantCountLocked(); dormant > 0 {
		st.GroupsByState[Empty.String()] += dormant
	}
	c.mu.RUnlock()
	for _, g := range groups {
		g.lock()
		g.countInto(&st)
		g.unlock()
	}
	return st
}

// Rebalance is one completed rebalance, as Config.ObserveRebalance is told
// of it.
type Rebalance struct {
	Shard      int32
	Group      string
	Generation int32
	Members    int
	Protocol   string
	// At is when the group became Stable; Took how long since it entered
	// PreparingRebalance.
	At   time.Time
	Took time.Duration
}

// countInto adds the group to st unless it is closed. Called with g.mu
// held.
func (g *classicGroup) countInto(st *Stats) {
	if !g.closed || g.evicted {
		st.GroupsByState[g.state.String()]++
		st.Members += len(g.members)
	}
}

// countInto adds the group to st unless it is closed. Called with g.mu
// held.
func (g *consumerGroup) countInto(st *Stats) {
	if !g.closed {
		st.GroupsByState[string(g.state())]++
		st.Members += len(g.members)
	}
}
