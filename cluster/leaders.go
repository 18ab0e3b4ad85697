package cluster

import (
	"encoding/json"
	"sync"
)

// leaderEntry is who leads a shard, as of a Raft term.
type leaderEntry struct {
	Node int32  `json:"n"`
	Term uint64 `json:"t"`
}

// leaderTable is the node's view of every shard's leader, merged from its
// own Raft instances and from gossip: the entry with the higher term wins,
// so a stale report never replaces a newer one. Any goroutine may use it.
type leaderTable struct {
	mu sync.RWMutex
	m  map[int32]leaderEntry
}

// update records that node leads shard as of term; it reports whether the
// table changed.
func (t *leaderTable) update(shard int32, e leaderEntry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[int32]leaderEntry)
	}
	old, ok := t.m[shard]
	if ok && (old.Term > e.Term || old == e) {
		return false
	}
	t.m[shard] = e
	return true
}

// get returns the last known leader of shard.
func (t *leaderTable) get(shard int32) (leaderEntry, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.m[shard]
	return e, ok
}

// forgetNode drops every entry naming node (it left the cluster).
func (t *leaderTable) forgetNode(node int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s, e := range t.m {
		if e.Node == node {
			delete(t.m, s)
		}
	}
}

// encode serializes the whole table for gossip push/pull.
func (t *leaderTable) encode() []byte {
	t.mu.RLock()
	defer t.mu.RUnlock()
	b, _ := json.Marshal(t.m)
	return b
}

// merge folds a gossiped table in, keeping only entries of live nodes.
func (t *leaderTable) merge(b []byte, live func(node int32) bool) {
	var m map[int32]leaderEntry
	if json.Unmarshal(b, &m) != nil {
		return
	}
	for s, e := range m {
		if live(e.Node) {
			t.update(s, e)
		}
	}
}
