package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// Placement: the metadata group holds the registered nodes and every
// shard's desired voters (fsm's placement commands). Two roles drive the
// shards towards them, both from placementLoop:
//
//   - The metadata leader plans (planPlacement): it registers every member
//     of the cluster, and sets the desired voters of a shard to rendezvous
//     placement over the active nodes, for at most MaxConcurrentMoves
//     shards whose configuration is not yet what they desire.
//   - Each shard's leader moves (moveShard), one configuration change per
//     round: a desired node that holds no replica joins as a non-voter; a
//     non-voter that has caught up is promoted; once every desired node
//     votes, a surplus voter is removed, after leadership moved off it
//     when the surplus is the leader itself. A voter is never removed
//     before its replacement votes, so a shard keeps at least as many
//     healthy voters as it desires throughout.
//
// Every node also replicates the metadata group: nodes beyond its desired
// voters are non-voters of it, so every shard leader reads the desired
// voters from its own copy.

// placementFSM is what placement reads of the metadata group's FSM
// (fsm.MetaFSM). A node whose metadata FSM lacks it does no placement.
type placementFSM interface {
	Nodes() []fsm.Node
	ShardVoters(shard int32) ([]int32, bool)
}

// placementApplyTimeout bounds one placement command's Raft apply.
const placementApplyTimeout = 5 * time.Second

// placementLoop runs a placement round every PlacementInterval until
// shutdown. Runs on its own goroutine.
func (n *Node) placementLoop() { n.every(n.cfg.PlacementInterval, n.placementRound) }

// placementRound reports the configuration of every shard this node
// leads, plans on the metadata leader and moves the shards this node
// leads.
func (n *Node) placementRound() {
	p, ok := n.meta.FSM.(placementFSM)
	if !ok || n.ClusterID() == "" {
		return
	}
	for _, s := range n.all {
		if s.IsLeader() {
			n.reportConfiguration(s)
		}
	}
	if n.meta.IsLeader() {
		if err := n.planPlacement(p); err != nil {
			n.logger.Warn("placement plan failed", "error", err)
		}
	}
	var round *moveRound
	for _, s := range n.all {
		if !s.IsLeader() {
			continue
		}
		if round == nil {
			round = n.newMoveRound(p)
		}
		if err := n.moveShard(s, p, round); err != nil {
			n.logger.Warn("replica move step failed", "shard", s.ID, "error", err)
		}
	}
}

// reportConfiguration puts the configuration of a shard this node leads in
// the leader table, and gossips it when it changed.
func (n *Node) reportConfiguration(s *Shard) {
	m, ok := s.members()
	if !ok {
		return
	}
	e := leaderEntry{Node: n.cfg.NodeID, Term: s.Raft.CurrentTerm(), Voters: m.voters, Nonvoters: m.nonvoters}
	if !s.IsLeader() || s.Raft.CurrentTerm() != e.Term {
		return // stepped down meanwhile: the entry would name this node in another leader's term
	}
	e.Conf = s.reported.number(e.Term, m)
	if n.leaders.update(s.ID, e) && n.gossip != nil {
		n.gossip.broadcastLeader(s.ID, e)
	}
}

// configReport numbers the configurations a shard's leader reports: within
// a term only that leader reports, so a count of the changes it saw orders
// them for every node that merges the leader table. The placement loop's
// goroutine uses it.
type configReport struct {
	mu   sync.Mutex
	term uint64
	last shardMembers
	seq  uint64
}

// number returns the number of m in term: the previous one when m is what
// was reported last in term, the next one otherwise.
func (r *configReport) number(term uint64, m shardMembers) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.term != term || r.seq == 0 || !slices.Equal(r.last.voters, m.voters) || !slices.Equal(r.last.nonvoters, m.nonvoters) {
		r.term, r.last = term, m
		r.seq++
	}
	return r.seq
}

// configuration returns the shard's latest configuration as this replica
// knows it.
func (s *Shard) configuration() (raft.Configuration, bool) {
	f := s.Raft.GetConfiguration()
	if f.Error() != nil {
		return raft.Configuration{}, false
	}
	return f.Configuration(), true
}

// members returns the shard's latest configuration as sorted node ids.
func (s *Shard) members() (shardMembers, bool) {
	conf, ok := s.configuration()
	if !ok {
		return shardMembers{}, false
	}
	return membersOf(conf), true
}

// membersOf is conf as sorted node ids.
func membersOf(conf raft.Configuration) shardMembers {
	var m shardMembers
	for _, srv := range conf.Servers {
		if srv.Suffrage == raft.Voter {
			m.voters = append(m.voters, voterID(srv))
		} else {
			m.nonvoters = append(m.nonvoters, voterID(srv))
		}
	}
	slices.Sort(m.voters)
	slices.Sort(m.nonvoters)
	return m
}

// drainingNodes are the nodes the metadata group marks draining (none
// without placement).
func (n *Node) drainingNodes() map[int32]bool {
	p, ok := n.meta.FSM.(placementFSM)
	if !ok {
		return nil
	}
	out := map[int32]bool{}
	for _, nd := range p.Nodes() {
		if nd.State == fsm.NodeDraining {
			out[nd.ID] = true
		}
	}
	return out
}

// moving reports whether shard s, which this node leads, is being moved:
// its configuration has a non-voter or is not its desired voters. Leadership
// balance leaves such a shard alone: the move's own hand-off and
// configuration changes would otherwise race its transfers (Raft refuses
// configuration changes while a transfer is under way).
func (n *Node) moving(s *Shard) bool {
	p, ok := n.meta.FSM.(placementFSM)
	if !ok {
		return false
	}
	want, placed := p.ShardVoters(s.ID)
	m, ok := s.members()
	return placed && ok && inFlight(s.ID, m, want)
}

// inFlight is the one rule of a shard that is moving, which placement's
// throttle, leadership balance and status share: its voters are not the
// desired ones, or a group shard has a non-voter (the metadata shard's
// non-voters are its read replicas).
func inFlight(shard int32, m shardMembers, desired []int32) bool {
	return !slices.Equal(m.voters, desired) || shard != MetaShard && len(m.nonvoters) > 0
}

// registry indexes registered nodes by id.
func registry(nodes []fsm.Node) map[int32]fsm.Node {
	m := make(map[int32]fsm.Node, len(nodes))
	for _, nd := range nodes {
		m[nd.ID] = nd
	}
	return m
}

// placementCandidates are the nodes the metadata leader registers: the
// live members of the cluster, and the voters of the configurations this
// node holds (with their Raft addresses).
func (n *Node) placementCandidates() map[int32]string {
	out := make(map[int32]string)
	for _, s := range n.all {
		conf, ok := s.configuration()
		if !ok {
			continue
		}
		for _, srv := range conf.Servers {
			if srv.Suffrage == raft.Voter {
				out[voterID(srv)] = string(srv.Address)
			}
		}
	}
	for id, addr := range n.members.raftAddrs(n.mux.Deaths()) {
		out[id] = addr
	}
	return out
}

// allRegistered reports whether every id is a registered node.
func allRegistered(ids []int32, nodes map[int32]fsm.Node) bool {
	for _, id := range ids {
		if _, ok := nodes[id]; !ok {
			return false
		}
	}
	return true
}

// shardMembers is a shard's configuration as node ids, sorted.
type shardMembers struct {
	voters, nonvoters []int32
}

// currentVoters is shard id's configuration as the leader table has it
// (what its leader last reported: placementRound reports this node's own
// shards before it plans).
func (n *Node) currentVoters(id int32) (shardMembers, bool) {
	e, ok := n.leaders.get(id)
	if !ok || e.Conf == 0 {
		return shardMembers{}, false
	}
	return shardMembers{voters: e.Voters, nonvoters: e.Nonvoters}, true
}

// RemoveNode marks node id draining in the metadata group: it takes no
// replica from now on, and every replica it holds moves to the other
// nodes (the same for a node that is dead for good). Status reports the
// node drained once nothing is placed on it. Any node takes it: one that
// does not lead the metadata group forwards it to the leader over the
// Raft port. fsm.ErrNodeNotFound means id is not registered.
func (n *Node) RemoveNode(ctx context.Context, id int32) error {
	if n.closed.Load() {
		return ErrShutdown
	}
	if n.meta.IsLeader() {
		return n.removeNodeHere(ctx, id)
	}
	b, ok := n.MetaLeader()
	if !ok {
		return fmt.Errorf("%w, and no leader is known", ErrNotMetaLeader)
	}
	addr, ok := n.members.raftAddrs(n.mux.Deaths())[b.NodeID]
	if !ok {
		return fmt.Errorf("%w: the leader, node %d, is not reachable", ErrNotMetaLeader, b.NodeID)
	}
	resp, err := n.adminCall(ctx, addr, adminRequest{Op: "remove-node", Node: id})
	if err != nil {
		return err
	}
	return adminError(resp)
}

// removeNodeHere applies RemoveNode on the metadata leader.
func (n *Node) removeNodeHere(ctx context.Context, id int32) error {
	if _, ok := n.meta.FSM.(placementFSM); !ok {
		return ErrPlacementUnavailable
	}
	if !n.meta.IsLeader() {
		return ErrNotMetaLeader
	}
	b, err := fsm.Encode(&fsm.NodeDrain{ID: id})
	if err != nil {
		return err
	}
	if _, err := n.meta.Apply(ctx, b, placementApplyTimeout); errors.Is(err, fsm.ErrLastActiveNode) {
		return fmt.Errorf("%w (node %d)", ErrLastActiveNode, id)
	} else if err != nil {
		return err
	}
	n.logger.Info("node marked draining: its replicas move to the other nodes", "target_node", id)
	return nil
}

// MetaLeader is the node that leads the metadata group, as far as this
// node knows.
func (n *Node) MetaLeader() (Broker, bool) { return n.LeaderOf(MetaShard) }
