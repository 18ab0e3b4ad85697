package cluster

import (
	"encoding/json"
	"slices"
	"sync"
)

// leaderEntry is who leads a shard, as of a Raft term, and, once the
// leader's placement loop reported it, the shard's configuration as of its
// index (Conf): placement on the metadata leader and cluster status read
// every shard's voters from it.
type leaderEntry struct {
	Node      int32   `json:"n"`
	Term      uint64  `json:"t"`
	Conf      uint64  `json:"c,omitempty"`
	Voters    []int32 `json:"v,omitempty"`
	Nonvoters []int32 `json:"nv,omitempty"`
}

// newer reports whether e replaces old: a higher term, or the same term's
// leader reporting a later configuration.
func (e leaderEntry) newer(old leaderEntry) bool {
	return e.Term > old.Term || (e.Term == old.Term && e.Conf > old.Conf)
}

func (e leaderEntry) equal(o leaderEntry) bool {
	return e.Node == o.Node && e.Term == o.Term && e.Conf == o.Conf &&
		slices.Equal(e.Voters, o.Voters) && slices.Equal(e.Nonvoters, o.Nonvoters)
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
	if ok && (old.equal(e) || old.newer(e)) { // a different entry of the same term and number replaces it
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

// topGroupShard is the highest group shard the table names, when it
// names every group shard from 0 to it: a cluster of a release that does
// not gossip its shard count runs that many plus one, or more only if the
// leaders of the shards above are not known yet (a joiner checks the
// count it assumes for such a cluster against it: joiningShards).
func (t *leaderTable) topGroupShard() (int32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	top := int32(-1)
	for s := range t.m {
		top = max(top, s)
	}
	if top < 0 {
		return 0, false
	}
	for s := range top {
		if _, ok := t.m[s]; !ok {
			return 0, false
		}
	}
	return top, true
}

// encode serializes the whole table for gossip push/pull.
func (t *leaderTable) encode() []byte {
	t.mu.RLock()
	defer t.mu.RUnlock()
	b, _ := json.Marshal(t.m)
	return b
}

// merge folds a gossiped table in, keeping only the entries accept takes.
func (t *leaderTable) merge(b []byte, accept func(shard int32, e leaderEntry) bool) {
	var m map[int32]leaderEntry
	if json.Unmarshal(b, &m) != nil {
		return
	}
	for s, e := range m {
		if accept(s, e) {
			t.update(s, e)
		}
	}
}

// plausibleLeader reports whether a leader announcement heard through
// gossip (from any peer: broadcasts are relayed) can be true as far as
// this node knows: an announcement naming this node is refused, since
// only its own Raft instances say what it leads; and for a shard this
// node is a voter of, the named node must be a voter of the shard's
// configuration as this replica has it. (A non-voter's configuration may
// be stale: one removed without hearing of it routes by gossip alone.) A node that joined gossip (with
// --gossip-key-file, a holder of the key) can still name another voter
// with a made-up term to the nodes that do not replicate that shard;
// without the key it cannot gossip at all. Called
// from memberlist's delegate goroutines; it must not block.
func (n *Node) plausibleLeader(shard int32, e leaderEntry) bool {
	if e.Node == n.cfg.NodeID {
		return false
	}
	if !n.shardsStarted.Load() {
		return true // no Raft to check against yet
	}
	s := n.startedShard(shard)
	if s == nil || !s.replicated() || !s.votes() {
		return true
	}
	conf, ok := s.configuration()
	if !ok {
		return true
	}
	// The term is not checked: a voter that restarted holds an older
	// term than its leader's until that leader, which backs off its
	// heartbeats to a restarted peer, reaches it, and meanwhile routes by
	// the gossiped leader of a later term (Node.LeaderOf).
	return slices.Contains(membersOf(conf).voters, e.Node)
}
