package fsm

import "fmt"

// topicNames gives each topic name a groupTable's records hold a small
// id, the name held once however many groups commit to the topic, and
// counts the records that refer to it so that a name no record holds is
// let go and its id reused. The ShardFSM's lock guards it: names and
// byName may be read concurrently, acquire and release are Apply's (or a
// restore's).
type topicNames struct {
	names  []string // by id; "" for an id free
	refs   []uint32 // by id: the records that hold it
	byName map[string]uint32
	free   []uint32
}

func newTopicNames() topicNames { return topicNames{byName: make(map[string]uint32)} }

// acquire returns name's id, counting one more record that holds it.
func (n *topicNames) acquire(name string) uint32 {
	id, ok := n.byName[name]
	switch {
	case ok:
	case len(n.free) > 0:
		id, n.free = n.free[len(n.free)-1], n.free[:len(n.free)-1]
		n.names[id], n.byName[name] = name, id
	default:
		id = uint32(len(n.names))
		n.names, n.refs = append(n.names, name), append(n.refs, 0)
		n.byName[name] = id
	}
	n.refs[id]++
	return id
}

// release counts one record fewer holding id, and lets the name go when
// none does.
func (n *topicNames) release(id uint32) {
	if n.refs[id] == 0 {
		panic(fmt.Sprintf("fsm: topic id %d released more often than acquired", id))
	}
	if n.refs[id]--; n.refs[id] > 0 {
		return
	}
	delete(n.byName, n.names[id])
	n.names[id] = ""
	n.free = append(n.free, id)
}
