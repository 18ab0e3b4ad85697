package fsm

// classicGroups is a shard's classic groups by id, in two maps. Most
// groups of a large cluster are the ones a commit made (an admin's, or a
// consumer's that manages its own partitions): Empty, with no protocol,
// generation, leader or members. Such a simple group keeps only its state
// timestamp, 8 bytes beside the id in its map slot; every other group
// keeps its whole 120-byte Group in a slot of the other map (issue 36:
// those slots were 189 bytes a group, the largest cost after the offsets
// themselves). A group is in one map or neither, and reads give back
// exactly the Group put. The ShardFSM's lock guards it.
type classicGroups struct {
	full   map[string]Group
	simple map[string]int64 // id → StateTimestamp
}

func newClassicGroups(n int) classicGroups {
	return classicGroups{full: make(map[string]Group), simple: make(map[string]int64, n)}
}

// isSimple reports whether g is Group{ID, State: StateEmpty,
// StateTimestamp} and nothing else (a nil Members: an empty one that is
// not nil stays whole, so it reads back as put).
func isSimple(g Group) bool {
	return g.State == StateEmpty && g.ProtocolType == "" && g.Protocol == "" && g.Generation == 0 && g.Leader == "" && g.Members == nil
}

func (c *classicGroups) get(id string) (Group, bool) {
	if ts, ok := c.simple[id]; ok {
		return Group{ID: id, State: StateEmpty, StateTimestamp: ts}, true
	}
	g, ok := c.full[id]
	return g, ok
}

func (c *classicGroups) has(id string) bool {
	if _, ok := c.simple[id]; ok {
		return true
	}
	_, ok := c.full[id]
	return ok
}

// put stores g under g.ID, replacing what the id held.
func (c *classicGroups) put(g Group) {
	if isSimple(g) {
		delete(c.full, g.ID)
		c.simple[g.ID] = g.StateTimestamp
		return
	}
	delete(c.simple, g.ID)
	c.full[g.ID] = g
}

func (c *classicGroups) delete(id string) {
	delete(c.simple, id)
	delete(c.full, id)
}

func (c *classicGroups) len() int { return len(c.simple) + len(c.full) }

// each calls fn with every group, in no order.
func (c *classicGroups) each(fn func(Group)) {
	for id, ts := range c.simple {
		fn(Group{ID: id, State: StateEmpty, StateTimestamp: ts})
	}
	for _, g := range c.full {
		fn(g)
	}
}

// SimpleGroup is a simple group as the coordinator needs it: its id and
// when it became Empty.
type SimpleGroup struct {
	ID             string
	StateTimestamp int64
}

// Simple reports whether g is a simple group: one a commit made, Empty,
// with no protocol, generation, leader or members.
func (g Group) Simple() bool { return isSimple(g) }
