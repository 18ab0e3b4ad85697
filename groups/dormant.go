package groups

import (
	"github.com/kcoord/kcoord/fsm"
)

// Dormant groups. Most groups of a large cluster are the ones a commit
// made (an admin's, or a consumer's that assigns its own partitions):
// Empty, with no protocol, generation or member, holding offsets only.
// The FSM keeps each as a simple group, its id and state timestamp
// (fsm.SimpleGroup). A live classicGroup for each as well was 288 bytes
// on the leader, 98 MB of a node's heap at a million groups (issue 36).
//
// So the coordinator does not keep such a group in memory while it is
// idle: it is dormant. Activate loads only the other groups; a commit,
// describe or retention sweep that leaves a group idle evicts it
// (evictIfIdle); and a request naming a dormant group finds it in the FSM
// and makes it live again (wakeLocked), as a new leader would load it. A
// dormant group is thus a simple group of the FSM whose id is in neither
// live map, and not being removed. Listing, stats and retention add the
// dormant groups to the live ones (eachDormantLocked).
//
// Nothing a client sees changes: a live simple group and one woken from
// the FSM answer every request alike, the difference in state timestamp
// between the two (the lookup's clock against the commit's) being the one
// a failover makes.

// wakeLocked makes the dormant group id live again from the FSM and
// returns it, or returns nil when id is not dormant. Called with c.mu held
// for writing, by a lookup that found no live group of id; the caller puts
// the group in c.classics.
func (c *Coordinator) wakeLocked(id string) *classicGroup {
	if c.removing[id] > 0 {
		return nil // its removal is being written: it no longer exists
	}
	r, ok := c.state.Group(id)
	if !ok || !r.Simple() {
		return nil
	}
	return classicGroupFromRecord(c, r)
}

// evictIfIdle lets a live group go dormant when it is idle and the FSM
// holds it as a simple group: Empty, no protocol type, generation, member
// or pending member, no commit in flight. A request waiting for its lock
// finds it closed and looks the id up again, which wakes it from the FSM.
// Called with g.mu held.
func (g *classicGroup) evictIfIdle() {
	if g.closed || g.state != Empty || g.protocolType != "" || g.generation != 0 ||
		len(g.members) > 0 || len(g.pending) > 0 || g.inflight.pendingCommits != nil {
		return
	}
	if r, ok := g.c.state.Group(g.id); !ok || !r.Simple() {
		return // not stored yet, or stored with more than a simple group holds
	}
	g.close()
	g.evicted = true
	g.c.forgetClassic(g)
}

// eachDormantLocked calls fn with every dormant group. Called with c.mu
// held (either way), so the dormant groups it finds and the live maps are
// one view; fn must not call the FSM or take c.mu.
func (c *Coordinator) eachDormantLocked(fn func(fsm.SimpleGroup)) {
	c.state.EachSimpleGroup(func(sg fsm.SimpleGroup) {
		if _, live := c.classics[sg.ID]; live {
			return
		}
		if _, live := c.consumers[sg.ID]; live || c.removing[sg.ID] > 0 {
			return
		}
		fn(sg)
	})
}

// dormantLocked lists the dormant groups (eachDormantLocked). Called with
// c.mu held.
func (c *Coordinator) dormantLocked() []fsm.SimpleGroup {
	var out []fsm.SimpleGroup
	c.eachDormantLocked(func(sg fsm.SimpleGroup) { out = append(out, sg) })
	return out
}

// dormantGroup is the group a dormant one would be once woken, for
// reading only (listing, expiry's test): it is never put in c.classics.
func dormantGroup(c *Coordinator, sg fsm.SimpleGroup) *classicGroup {
	return classicGroupFromRecord(c, fsm.Group{ID: sg.ID, State: fsm.StateEmpty, StateTimestamp: sg.StateTimestamp})
}

// markRemoving and unmarkRemoving bracket the write removing group id
// that a retention sweep enqueued without waiting (removeIfEmpty): while
// it is in flight the FSM still holds the group, which must not be woken.
// Each takes c.mu.
func (c *Coordinator) markRemoving(id string) {
	c.mu.Lock()
	c.removing[id]++
	c.mu.Unlock()
}

func (c *Coordinator) unmarkRemoving(id string) {
	c.mu.Lock()
	if c.removing[id]--; c.removing[id] <= 0 {
		delete(c.removing, id)
	}
	c.mu.Unlock()
}
