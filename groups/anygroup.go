package groups

// anyGroup is a live group of either kind, classicGroup or consumerGroup,
// as the coordinator's loops over every group of the shard see it
// (Activate, Deactivate, List, Stats, ExpireOffsets). Requests for one
// group id go through dispatch instead.
type anyGroup interface {
	// lock and unlock take and release the group's lock.
	lock()
	unlock()
	// startSessions gives every member a fresh session timeout, on
	// Activate. Called with the lock held.
	startSessions()
	// close stops serving the group: its timers stop and its waiting
	// requests fail with ErrNotCoordinator. Called with the lock held.
	close()
	// listing is the group as ListGroups and the status page show it; ok
	// is false for a group not to list (closed, Dead or reloading). Called
	// with the lock held.
	listing() (l GroupListing, ok bool)
	// countInto adds the group's state and members to st unless it is
	// closed. Called with the lock held.
	countInto(st *Stats)
	// absent reports that the group is nil (none was found); closed that
	// the coordinator no longer serves it. closed is called with the lock
	// held.
	absent() bool
	closedNow() bool
	// expire runs offset retention (KIP-211) for the group; removed
	// reports that the group itself was deleted. It takes the lock.
	expire(now, retention int64) (n int, removed bool)
}

var (
	_ anyGroup = (*classicGroup)(nil)
	_ anyGroup = (*consumerGroup)(nil)
)

func (g *classicGroup) lock()    { g.mu.Lock() }
func (g *classicGroup) unlock()  { g.mu.Unlock() }
func (g *consumerGroup) lock()   { g.mu.Lock() }
func (g *consumerGroup) unlock() { g.mu.Unlock() }

// groupList lists the groups of both maps, classic ones first. Called with
// c.mu held, or with maps no longer installed.
func groupList(classics map[string]*classicGroup, consumers map[string]*consumerGroup) []anyGroup {
	out := make([]anyGroup, 0, len(classics)+len(consumers))
	for _, g := range classics {
		out = append(out, g)
	}
	for _, g := range consumers {
		out = append(out, g)
	}
	return out
}

// loadLocked builds a group from each stored record and locks it, for
// Activate: the groups are private until installed, so that no request
// reaches one before its members' sessions have started.
func loadLocked[R any, G interface {
	anyGroup
	groupID() string
}](records []R, build func(R) G) (map[string]G, []anyGroup) {
	byID := make(map[string]G, len(records))
	loaded := make([]anyGroup, 0, len(records))
	for _, r := range records {
		g := build(r)
		g.lock()
		byID[g.groupID()] = g
		loaded = append(loaded, g)
	}
	return byID, loaded
}

func (g *classicGroup) groupID() string  { return g.id }
func (g *consumerGroup) groupID() string { return g.id }
func (g *classicGroup) absent() bool     { return g == nil }
func (g *consumerGroup) absent() bool    { return g == nil }
func (g *classicGroup) closedNow() bool  { return g.closed }
func (g *consumerGroup) closedNow() bool { return g.closed }

// lockFound locks the group lookup finds, for the lookups of both kinds:
// a group closed after the lookup (by Deactivate, replaced by a reload or
// removed by a delete) is looked up again, which answers from the current
// state; check (if set) may refuse an open group under its lock, which is
// then released. On success the caller must unlock the group; a nil group
// with a nil error means none exists. Called without c.mu.
func lockFound[G anyGroup](c *Coordinator, lookup func() (G, error), check func(G) error) (G, error) {
	var none G
	for {
		g, err := lookup()
		if err != nil || g.absent() {
			return none, err
		}
		g.lock()
		if !g.closedNow() {
			if check == nil {
				return g, nil
			}
			if err := check(g); err != nil {
				g.unlock()
				return none, err
			}
			return g, nil
		}
		g.unlock()
		if !c.Active() {
			return none, ErrNotCoordinator
		}
	}
}
