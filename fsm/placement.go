package fsm

import (
	"fmt"
	"slices"
)

// NodeState is a registered node's place in the cluster's placement.
type NodeState uint8

const (
	// NodeActive nodes receive replicas.
	NodeActive NodeState = 1
	// NodeDraining nodes receive none, and every replica they hold moves
	// away (kcoord cluster remove-node).
	NodeDraining NodeState = 2
)

// String names the state for status pages and logs.
func (s NodeState) String() string {
	switch s {
	case NodeActive:
		return "active"
	case NodeDraining:
		return "draining"
	}
	return fmt.Sprintf("NodeState(%d)", uint8(s))
}

// Node is a node registered in the metadata group: the nodes placement
// may put replicas on.
type Node struct {
	ID       int32     `codec:"id"`
	RaftAddr string    `codec:"raft"`
	State    NodeState `codec:"state"`
}

// ShardPlacement is the desired voter set of one shard (MetaShard
// included), as node ids sorted ascending.
type ShardPlacement struct {
	Shard  int32   `codec:"shard"`
	Voters []int32 `codec:"voters"`
}

// NodeRegister is the body of NodeRegisterType: it registers an active
// node, or updates the Raft address of a registered one (its state stays).
type NodeRegister struct {
	ID       int32  `codec:"id"`
	RaftAddr string `codec:"raft"`
}

// NodeDrain is the body of NodeDrainType: the node takes no replicas from
// now on and every replica it holds moves away. Apply answers
// ErrNodeNotFound for a node that is not registered and ErrLastActiveNode
// for the only active one; draining a draining node changes nothing.
type NodeDrain struct {
	ID int32 `codec:"id"`
}

// PlacementSet is the body of PlacementSetType: the desired voters of the
// shards it names; the others keep theirs. Apply answers ErrInvalidPlacement
// (and changes nothing) when a voter set is empty, unsorted or repeats a
// node, and ErrNodeNotFound when it names a node that is not registered.
type PlacementSet struct {
	Shards []ShardPlacement `codec:"shards"`
}

// CommandType implements Command.
func (NodeRegister) CommandType() CommandType { return NodeRegisterType }

// CommandType implements Command.
func (NodeDrain) CommandType() CommandType { return NodeDrainType }

// CommandType implements Command.
func (PlacementSet) CommandType() CommandType { return PlacementSetType }

// placementState is the part of MetaFSM that placement owns. Its methods
// run with MetaFSM's lock held.
type placementState struct {
	nodes     map[int32]Node
	placement map[int32][]int32
}

func newPlacementState() placementState {
	return placementState{nodes: make(map[int32]Node), placement: make(map[int32][]int32)}
}

// apply applies one placement command and returns Apply's response.
func (p *placementState) apply(cmd Command) any {
	switch c := cmd.(type) {
	case *NodeRegister:
		n, ok := p.nodes[c.ID]
		if !ok {
			n = Node{ID: c.ID, State: NodeActive}
		}
		n.RaftAddr = c.RaftAddr
		p.nodes[c.ID] = n
	case *NodeDrain:
		n, ok := p.nodes[c.ID]
		if !ok {
			return fmt.Errorf("%w: node %d", ErrNodeNotFound, c.ID)
		}
		if n.State == NodeActive && p.active() == 1 {
			return fmt.Errorf("%w: node %d", ErrLastActiveNode, c.ID)
		}
		n.State = NodeDraining
		p.nodes[c.ID] = n
	case *PlacementSet:
		for _, sp := range c.Shards {
			if err := p.check(sp); err != nil {
				return err
			}
		}
		for _, sp := range c.Shards {
			p.placement[sp.Shard] = slices.Clone(sp.Voters)
		}
	}
	return nil
}

// active counts the active nodes.
func (p *placementState) active() int {
	n := 0
	for _, nd := range p.nodes {
		if nd.State == NodeActive {
			n++
		}
	}
	return n
}

// check validates one shard's desired voters.
func (p *placementState) check(sp ShardPlacement) error {
	if len(sp.Voters) == 0 {
		return fmt.Errorf("%w: shard %d has no voters", ErrInvalidPlacement, sp.Shard)
	}
	for i, v := range sp.Voters {
		if i > 0 && sp.Voters[i-1] >= v {
			return fmt.Errorf("%w: shard %d voters %v are not sorted and distinct", ErrInvalidPlacement, sp.Shard, sp.Voters)
		}
		if _, ok := p.nodes[v]; !ok {
			return fmt.Errorf("%w: node %d (a voter of shard %d)", ErrNodeNotFound, v, sp.Shard)
		}
	}
	return nil
}

// snapshot returns copies sorted by node id and shard.
func (p *placementState) snapshot() ([]Node, []ShardPlacement) {
	return p.sortedNodes(), p.sortedPlacement()
}

// sortedNodes returns the registered nodes sorted by id.
func (p *placementState) sortedNodes() []Node {
	nodes := make([]Node, 0, len(p.nodes))
	for _, n := range p.nodes {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b Node) int { return int(a.ID) - int(b.ID) })
	return nodes
}

// sortedPlacement returns a copy of every shard's desired voters, sorted
// by shard.
func (p *placementState) sortedPlacement() []ShardPlacement {
	placement := make([]ShardPlacement, 0, len(p.placement))
	for s, v := range p.placement {
		placement = append(placement, ShardPlacement{Shard: s, Voters: slices.Clone(v)})
	}
	slices.SortFunc(placement, func(a, b ShardPlacement) int { return int(a.Shard) - int(b.Shard) })
	return placement
}

// restore replaces the state with a snapshot's.
func (p *placementState) restore(nodes []Node, placement []ShardPlacement) {
	*p = newPlacementState()
	for _, n := range nodes {
		p.nodes[n.ID] = n
	}
	for _, sp := range placement {
		p.placement[sp.Shard] = slices.Clone(sp.Voters)
	}
}

// Nodes returns the registered nodes sorted by id.
func (f *MetaFSM) Nodes() []Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.placement.sortedNodes()
}

// Placement returns the desired voters of every shard that has them,
// sorted by shard.
func (f *MetaFSM) Placement() []ShardPlacement {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.placement.sortedPlacement()
}

// ShardVoters returns the desired voters of one shard, if it has them.
func (f *MetaFSM) ShardVoters(shard int32) ([]int32, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v, ok := f.placement.placement[shard]
	return slices.Clone(v), ok
}
