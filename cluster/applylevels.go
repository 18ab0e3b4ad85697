package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// gossipedBy is what each node last gossiped of one fact (nodeMeta). A
// node that leaves keeps its entry: a replica that is down still holds the
// log and applies it when it comes back. Any goroutine may use it.
type gossipedBy[T any] struct {
	mu sync.Mutex
	m  map[int32]T
}

func (g *gossipedBy[T]) record(node int32, v T) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = make(map[int32]T)
	}
	g.m[node] = v
}

func (g *gossipedBy[T]) get(node int32) (T, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.m[node]
	return v, ok
}

// applyLevels is what each node last gossiped of the command types it
// applies (nodeMeta.Applies).
type applyLevels struct {
	// own is this build's level; 0 means fsm.LatestCommandType (tests
	// lower it to play an older release).
	own int
	gossipedBy[int]
}

func (a *applyLevels) level(node int32) (int, bool) { return a.get(node) }

// firstGossipedType is the first command type added after the release
// that gossiped no Applies: every release applies the types before it,
// so those need no check.
const firstGossipedType = fsm.ScramCredentialSetType

// checkReplicasApply is nil when every server of the metadata group's
// configuration (voters and nonvoters) applies command type typ: this
// node by its build, the others by their gossip. A node without gossip
// (an in-process test cluster of one build) has nothing to check. Called
// on the metadata leader before it applies a metadata change.
func (n *Node) checkReplicasApply(typ fsm.CommandType) error {
	if typ < firstGossipedType || n.gossip == nil {
		return nil
	}
	meta := n.startedShard(MetaShard)
	if meta == nil {
		return nil
	}
	conf, ok := meta.configuration()
	if !ok {
		return fmt.Errorf("%w: the metadata group's configuration is unknown", ErrReplicaTooOld)
	}
	if behind := n.replicasBehind(conf, typ); len(behind) > 0 {
		return fmt.Errorf("%w: node %v does not advertise that it applies %s; upgrade every node first", ErrReplicaTooOld, behind, typ)
	}
	return nil
}

// replicasBehind lists the servers of conf, by node id, that are not
// known to apply typ.
func (n *Node) replicasBehind(conf raft.Configuration, typ fsm.CommandType) []int32 {
	var behind []int32
	for _, s := range conf.Servers {
		id, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil {
			behind = append(behind, -1)
			continue
		}
		if int32(id) == n.cfg.NodeID {
			if n.ownApplyLevel() < int(typ) {
				behind = append(behind, int32(id))
			}
			continue
		}
		if l, ok := n.applies.level(int32(id)); !ok || l < int(typ) {
			behind = append(behind, int32(id))
		}
	}
	slices.Sort(behind)
	return behind
}

// ownApplyLevel is the level this node gossips.
func (n *Node) ownApplyLevel() int {
	if n.applies.own > 0 {
		return n.applies.own
	}
	return int(fsm.LatestCommandType)
}
