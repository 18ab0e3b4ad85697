package raftnet

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Direction selects the connections a Fault affects, as seen from the node
// whose Mux holds the fault.
type Direction uint8

const (
	// DirBoth affects connections in both directions.
	DirBoth Direction = iota
	// DirOutbound affects connections this node dials: its RPCs to peers
	// (AppendEntries and votes it sends) and their responses.
	DirOutbound
	// DirInbound affects connections this node accepts: peers' RPCs to it.
	DirInbound
)

func (d Direction) String() string {
	switch d {
	case DirBoth:
		return "both"
	case DirOutbound:
		return "outbound"
	case DirInbound:
		return "inbound"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// Fault describes a disruption of one node's Raft traffic, for in-process
// cluster tests. Zero-valued selectors match everything.
type Fault struct {
	// Peer is the remote node's advertised Raft address; "" matches every
	// peer. Outbound connections are attributed to the address dialed,
	// inbound ones to the address in the dialer's stream header.
	Peer string
	// Shards limits the fault to these shards; empty matches every shard.
	Shards []int32
	// Dir limits the fault to one direction.
	Dir Direction

	// Drop refuses matching dials and accepted connections, and closes the
	// matching connections already open.
	Drop bool
	// Delay is slept before every write and dial on matching connections.
	// With several matching faults the longest delay applies.
	Delay time.Duration
}

func (f *Fault) matches(shard int32, peer string, dir Direction) bool {
	if f.Peer != "" && f.Peer != peer {
		return false
	}
	if f.Dir != DirBoth && f.Dir != dir {
		return false
	}
	return len(f.Shards) == 0 || slices.Contains(f.Shards, shard)
}

// Faults injects faults into the Raft connections of one Mux (one node),
// like the partition helpers of hashicorp/raft's testing.go but over real
// TCP. A symmetric partition needs a fault on one side only: a node with
// Isolate neither dials nor accepts. Safe for concurrent use; rules take
// effect at once, on open connections too.
type Faults struct {
	mux     *Mux
	mu      sync.RWMutex
	rules   map[uint64]Fault
	next    uint64
	n       atomic.Int64 // len(rules), for a lock-free fast path
	dropped atomic.Uint64
}

// Add installs fault and returns a function removing it (idempotent).
func (f *Faults) Add(fault Fault) (remove func()) {
	fault.Shards = slices.Clone(fault.Shards)
	f.mu.Lock()
	id := f.next
	f.next++
	f.rules[id] = fault
	f.n.Store(int64(len(f.rules)))
	f.mu.Unlock()
	f.mux.logger.Info("raft fault added", "peer", fault.Peer, "shards", fault.Shards,
		"dir", fault.Dir.String(), "drop", fault.Drop, "delay", fault.Delay)
	if fault.Drop {
		for _, c := range f.mux.connsMatching(&fault) {
			f.dropped.Add(1)
			c.closeWith(ErrFaultInjected)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.rules, id)
			f.n.Store(int64(len(f.rules)))
			f.mu.Unlock()
			f.mux.logger.Info("raft fault removed", "peer", fault.Peer, "shards", fault.Shards)
		})
	}
}

// Isolate partitions this node from every peer, in both directions, on every
// shard. The returned function heals it.
func (f *Faults) Isolate() (heal func()) { return f.Add(Fault{Drop: true}) }

// DropPeer cuts the traffic between this node and the peer at the given
// advertised Raft address, in both directions, on every shard.
func (f *Faults) DropPeer(addr string) (heal func()) { return f.Add(Fault{Peer: addr, Drop: true}) }

// DropShard cuts every connection of one shard of this node.
func (f *Faults) DropShard(shard int32) (heal func()) {
	return f.Add(Fault{Shards: []int32{shard}, Drop: true})
}

// Delay delays every write of this node's Raft connections by d.
func (f *Faults) Delay(d time.Duration) (remove func()) { return f.Add(Fault{Delay: d}) }

// Heal removes every fault.
func (f *Faults) Heal() {
	f.mu.Lock()
	clear(f.rules)
	f.n.Store(0)
	f.mu.Unlock()
	f.mux.logger.Info("raft faults healed")
}

// Dropped counts the connections closed, and the dials, accepts, reads and
// writes refused, because of Drop faults.
func (f *Faults) Dropped() uint64 { return f.dropped.Load() }

func (f *Faults) active() bool { return f.n.Load() > 0 }

// applies reports whether any rule matches traffic of (shard, peer, dir),
// without counting a drop.
func (f *Faults) applies(shard int32, peer string, dir Direction) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, r := range f.rules {
		if r.matches(shard, peer, dir) {
			return true
		}
	}
	return false
}

// differs reports whether any rule matches traffic of (shard, peer, dir)
// and not that of (other, peer, dir), or the other way round: whether
// sending shard's traffic on other's stream would change the faults it
// meets. Counts no drop.
func (f *Faults) differs(shard, other int32, peer string, dir Direction) bool {
	if !f.active() {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, r := range f.rules {
		if r.matches(shard, peer, dir) != r.matches(other, peer, dir) {
			return true
		}
	}
	return false
}

// eval returns the delay for traffic of (shard, peer, dir), or an error
// wrapping ErrFaultInjected when it must be dropped.
func (f *Faults) eval(shard int32, peer string, dir Direction) (time.Duration, error) {
	if !f.active() {
		return 0, nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	var delay time.Duration
	for _, r := range f.rules {
		if !r.matches(shard, peer, dir) {
			continue
		}
		if r.Drop {
			f.dropped.Add(1)
			return 0, ErrFaultInjected
		}
		delay = max(delay, r.Delay)
	}
	return delay, nil
}
