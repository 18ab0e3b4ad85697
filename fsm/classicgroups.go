package fsm

// classicGroups is a shard's classic groups by id. Most groups of a large
// cluster are the ones a commit made (an admin's, or a consumer's that
// manages its own partitions): Empty, with no protocol, generation,
// leader or members. Such a simple group is only a mark and its state
// timestamp in the group's record of the shard's groupTable, beside its
// offsets, with no pointer for the GC to follow (issue 36: a map of them
// held a pointer a group, and a whole Group in a map slot was 189 bytes);
// every other group keeps its whole Group in full. A group is simple,
// full or neither, and reads give back exactly the Group put. The
// ShardFSM's lock guards it.
type classicGroups struct {
	full  map[string]Group
	table *groupTable // shared with the shard's offsets
}

func newClassicGroups(table *groupTable) classicGroups {
	return classicGroups{full: make(map[string]Group), table: table}
}

// isSimple reports whether g is Group{ID, State: StateEmpty,
// StateTimestamp} and nothing else (a nil Members: an empty one that is
// not nil stays whole, so it reads back as put).
func isSimple(g Group) bool {
	return g.State == StateEmpty && g.ProtocolType == "" && g.Protocol == "" && g.Generation == 0 && g.Leader == "" && g.Members == nil
}

func (c *classicGroups) get(id string) (Group, bool) {
	if ts, ok := simpleGroup(c.table, id); ok {
		return Group{ID: id, State: StateEmpty, StateTimestamp: ts}, true
	}
	g, ok := c.full[id]
	return g, ok
}

func (c *classicGroups) has(id string) bool { return hasGroup(c, id) }

// hasGroup is has for an id held as a string or as bytes.
func hasGroup[ID string | []byte](c *classicGroups, id ID) bool {
	if _, ok := simpleGroup(c.table, id); ok {
		return true
	}
	_, ok := c.full[string(id)]
	return ok
}

// put stores g under g.ID, replacing what the id held.
func (c *classicGroups) put(g Group) {
	if isSimple(g) {
		delete(c.full, g.ID)
		markSimple(c.table, g.ID, simpleMark{simple: true, ts: g.StateTimestamp})
		return
	}
	markSimple(c.table, g.ID, simpleMark{})
	c.full[g.ID] = g
}

// putSimple stores the simple group id, Empty since ts, which is no
// classic group yet (it may hold offsets): a restore's.
func (c *classicGroups) putSimple(id []byte, ts int64) {
	markSimple(c.table, id, simpleMark{simple: true, ts: ts})
}

func (c *classicGroups) delete(id string) {
	markSimple(c.table, id, simpleMark{})
	delete(c.full, id)
}

func (c *classicGroups) len() int { return c.table.simpleGroupCount() + len(c.full) }

// each calls fn with every group, in no order.
func (c *classicGroups) each(fn func(Group)) {
	c.table.eachSimpleGroup(func(id []byte, ts int64) {
		fn(Group{ID: string(id), State: StateEmpty, StateTimestamp: ts})
	})
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
