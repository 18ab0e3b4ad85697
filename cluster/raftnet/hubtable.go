package raftnet

import (
	"net"
	"sync"

	"github.com/hashicorp/raft"
)

// hubTable is what the node-wide streams (beatHub, appendHub) share: the
// shards of this node they serve, one link per peer made on first use,
// and their closing. M is the hub's view of a shard, P its link to a peer.
// Its methods are safe for concurrent use.
type hubTable[M, P any] struct {
	mu      sync.RWMutex
	members map[int32]*M
	peers   map[raft.ServerAddress]*P
	closed  bool
	closeCh chan struct{} // closed by shut
	wg      sync.WaitGroup
}

func newHubTable[M, P any]() hubTable[M, P] {
	return hubTable[M, P]{
		members: make(map[int32]*M),
		peers:   make(map[raft.ServerAddress]*P),
		closeCh: make(chan struct{}),
	}
}

// setMember registers m as shard's and returns the member it replaced
// (nil if none), for the caller to retire.
func (t *hubTable[M, P]) setMember(shard int32, m *M) (old *M) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old = t.members[shard]
	t.members[shard] = m
	return old
}

// dropMember unregisters m, if it is still shard's member, and reports
// whether it was.
func (t *hubTable[M, P]) dropMember(shard int32, m *M) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.members[shard] != m {
		return false
	}
	delete(t.members, shard)
	return true
}

func (t *hubTable[M, P]) member(shard int32) *M {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.members[shard]
}

// peer returns the link to addr, made by newPeer (under the table's lock,
// so once) the first time; nil once the table is shut.
func (t *hubTable[M, P]) peer(addr raft.ServerAddress, newPeer func() *P) *P {
	t.mu.RLock()
	p := t.peers[addr]
	t.mu.RUnlock()
	if p != nil {
		return p
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	if p = t.peers[addr]; p == nil {
		p = newPeer()
		t.peers[addr] = p
	}
	return p
}

// shut marks the table closed and closes closeCh. It returns the links,
// and false if it was shut already.
func (t *hubTable[M, P]) shut() ([]*P, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false
	}
	t.closed = true
	close(t.closeCh)
	peers := make([]*P, 0, len(t.peers))
	for _, p := range t.peers {
		peers = append(peers, p)
	}
	return peers, true
}

// serve accepts layer's connections and runs each with fn on a goroutine
// of its own, counted in wg, until the layer closes. Start it counted in
// wg.
func (t *hubTable[M, P]) serve(layer *StreamLayer, fn func(net.Conn)) {
	defer t.wg.Done()
	for {
		c, err := layer.Accept()
		if err != nil {
			return
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			fn(c)
		}()
	}
}
