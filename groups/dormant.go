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
// live map, and not being removed. Listing and retention add the dormant
// groups to the live ones (dormantLocked), stats their count
// (dormantCountLocked).
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
// or pending member, no commit in flight. A group of an id whose earlier
// group's removal is still being written stays live: dormant, it would be
// hidden with that one (wakeLocked). A request waiting for its lock finds
// it closed and looks the id up again, which wakes it from the FSM.
// Called with g.mu held.
func (g *classicGroup) evictIfIdle() {
	if g.closed || g.state != Empty || g.protocolType != "" || g.generation != 0 ||
		len(g.members) > 0 || len(g.pending) > 0 || g.inflight.pendingCommits != nil {
		return
	}
	if r, ok := g.c.state.Group(g.id); !ok || !r.Simple() {
		return // not stored yet, or stored with more than a simple group holds
	}
	c := g.c
	c.mu.Lock()
	if c.removing[g.id] > 0 || c.classics[g.id] != g {
		c.mu.Unlock()
		return
	}
	delete(c.classics, g.id)
	c.mu.Unlock()
	g.close()
	g.evicted = true
}

// dormantLocked lists the dormant groups. Called with c.mu held (either
// way), so that they and the live maps are one view.
func (c *Coordinator) dormantLocked() []fsm.SimpleGroup {
	out := c.state.SimpleGroups()
	n := 0
	for _, sg := range out {
		if c.liveOrRemovingLocked(sg.ID) {
			continue
		}
		out[n] = sg
		n++
	}
	return out[:n]
}

// dormantCountLocked counts the dormant groups without listing them: the
// FSM's simple groups less those whose id is live or being removed.
// Called with c.mu held (either way).
func (c *Coordinator) dormantCountLocked() int {
	ids := make([]string, 0, len(c.classics)+len(c.consumers)+len(c.removing))
	for id := range c.classics {
		ids = append(ids, id)
	}
	for id := range c.consumers {
		ids = append(ids, id) // an id is in one live map, never both
	}
	for id := range c.removing {
		_, classic := c.classics[id]
		if _, consumer := c.consumers[id]; !classic && !consumer {
			ids = append(ids, id) // each id once: CountSimpleGroups counts them
		}
	}
	total, among := c.state.CountSimpleGroups(ids)
	return total - among
}

// liveOrRemovingLocked reports whether id is a live group of either kind
// or one whose removal is being written. Called with c.mu held.
func (c *Coordinator) liveOrRemovingLocked(id string) bool {
	if _, ok := c.classics[id]; ok {
		return true
	}
	if _, ok := c.consumers[id]; ok {
		return true
	}
	return c.removing[id] > 0
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
