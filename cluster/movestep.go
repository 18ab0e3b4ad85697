package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// moveKind is one configuration change a shard's leader makes towards the
// shard's desired voters.
type moveKind int

const (
	moveNone           moveKind = iota
	moveAddNonvoter             // a desired node without a replica joins as a non-voter
	movePromote                 // a desired non-voter that caught up becomes a voter
	moveHandOff                 // leadership moves to the node, before this (surplus) leader is demoted
	moveDemote                  // a surplus voter becomes a non-voter
	moveRemove                  // a non-voter nobody wants leaves
	moveAddReadReplica          // a registered node joins MetaShard as a non-voter
)

func (k moveKind) String() string {
	return [...]string{"none", "add-nonvoter", "promote", "hand-off", "demote", "remove", "add-read-replica"}[k]
}

// moveStep is the next change of a shard: kind, applied to node.
type moveStep struct {
	kind moveKind
	node int32
}

// moveView is what a shard's leader knows when it takes a step: its own
// id, the shard's desired voters and configuration (sorted ids), which
// nodes gossip says are alive, which replicas have caught up with its log
// and the registered nodes.
type moveView struct {
	shard             int32
	self              int32
	want              []int32
	voters, nonvoters []int32
	live              map[int32]bool
	caughtUp          func(id int32) bool // of replicas other than self
	leads             map[int32]int
	nodes             map[int32]fsm.Node
}

// nextMove decides the next configuration change of a shard, one per
// placement round, in this order:
//
//  1. a live desired node without a replica joins as a non-voter (a dead
//     one gets nothing; the others go on);
//  2. a desired non-voter that caught up is promoted;
//  3. once every desired node votes, is alive and caught up, a surplus
//     voter is demoted (a demotion reaches it through replication, with
//     retries; a removal may not, and a removed voter that never learns it
//     keeps campaigning), after leadership moved to a caught-up desired
//     voter when the surplus is the leader itself: the one that leads
//     fewest shards, as leadership balance would pick it, so the shard's
//     groups see their coordinator move once and not twice. A desired
//     voter that is
//     dead or behind holds this back: the shard keeps every healthy voter
//     until its replacements are healthy too;
//  4. a non-voter nobody wants (a demoted voter among them) is removed;
//  5. on MetaShard, once every desired node votes, each other registered
//     node that is alive joins as a read replica (a non-voter): every shard
//     leader reads the desired voters from its own copy.
//
// It is a pure function of v.
func nextMove(v moveView) moveStep {
	in := func(ids []int32, id int32) bool { return slices.Contains(ids, id) }
	caughtUp := func(id int32) bool { return id == v.self || v.caughtUp(id) } // the leader has its own log
	for _, id := range v.want {
		if !in(v.voters, id) && !in(v.nonvoters, id) && v.live[id] {
			return moveStep{moveAddNonvoter, id}
		}
	}
	for _, id := range v.nonvoters {
		if in(v.want, id) && caughtUp(id) {
			return moveStep{movePromote, id}
		}
	}
	allVote := !slices.ContainsFunc(v.want, func(id int32) bool {
		return !in(v.voters, id) || !v.live[id] || !caughtUp(id)
	})
	if allVote {
		for _, id := range v.voters {
			if in(v.want, id) {
				continue
			}
			if id != v.self {
				return moveStep{moveDemote, id}
			}
			// Desired voters are caught up (allVote); a node drained since
			// placement desired it would only hand the shard on again.
			to := int32(-1)
			for _, c := range v.voters { // sorted: ties go to the lowest id
				if in(v.want, c) && c != v.self && v.nodes[c].State == fsm.NodeActive && (to < 0 || v.leads[c] < v.leads[to]) {
					to = c
				}
			}
			if to < 0 {
				return moveStep{} // no active desired voter: nothing to hand off to yet
			}
			return moveStep{moveHandOff, to}
		}
	}
	// A draining node stays a metadata read replica while it lives: it
	// leads shards it must hand off, and reads their desired voters there.
	readReplica := func(id int32) bool {
		nd, registered := v.nodes[id]
		return v.shard == MetaShard && registered && (nd.State == fsm.NodeActive || v.live[id]) && !in(v.want, id)
	}
	for _, id := range v.nonvoters {
		if !in(v.want, id) && !readReplica(id) {
			return moveStep{moveRemove, id}
		}
	}
	if v.shard == MetaShard && allVote {
		ids := make([]int32, 0, len(v.nodes))
		for id := range v.nodes {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			if !in(v.voters, id) && !in(v.nonvoters, id) && v.live[id] && readReplica(id) {
				return moveStep{moveAddReadReplica, id}
			}
		}
	}
	return moveStep{}
}

// moveShard takes the next step (nextMove) of shard s, which this node
// leads, towards its desired voters. Runs on the placement loop's
// goroutine; each change waits for Raft up to placementApplyTimeout.
//
// A step is taken only on desired voters read after a metadata read
// barrier, once a round (round.synced): this node's metadata replica may
// be behind the planner's, as on a leader just elected, and acting on it
// would move a shard the planner counts as done back towards voters it
// replaced, beyond MaxConcurrentMoves. A round whose barrier fails moves
// nothing.
func (n *Node) moveShard(s *Shard, p placementFSM, round *moveRound) error {
	step, conf := n.nextStep(s, p, round)
	if step.kind == moveNone {
		return nil
	}
	if !round.synced {
		if round.syncErr != nil {
			return nil // the round's barrier failed, and was logged once
		}
		ctx, cancel := context.WithTimeout(context.Background(), placementApplyTimeout)
		err := n.SyncMetadata(ctx)
		cancel()
		if err != nil {
			round.syncErr = fmt.Errorf("no move this round: reading the desired voters: %w", err)
			return round.syncErr
		}
		*round = *n.newMoveRound(p)
		round.synced = true
		if step, conf = n.nextStep(s, p, round); step.kind == moveNone {
			return nil
		}
	}
	n.logger.Info("replica move step", "shard", s.ID, "step", step.kind, "target_node", step.node)
	id := serverID(step.node)
	switch step.kind {
	case moveAddNonvoter, moveAddReadReplica:
		s.trans.ForgetPeer(id)
		return s.Raft.AddNonvoter(id, raft.ServerAddress(round.addrs[step.node]), 0, placementApplyTimeout).Error()
	case movePromote:
		if err := s.Raft.AddVoter(id, addressOf(conf, id), 0, placementApplyTimeout).Error(); err != nil {
			return err
		}
		n.movesDone.Add(1)
		return nil
	case moveHandOff:
		if err := s.transferLeadership(id, addressOf(conf, id)); err != nil {
			return err
		}
		if s.ID != MetaShard { // leads counts group shards
			round.leads[step.node]++ // the next hand-off of this round counts it
			round.leads[n.cfg.NodeID]--
		}
		return nil
	case moveDemote:
		return s.Raft.DemoteVoter(id, 0, placementApplyTimeout).Error()
	case moveRemove:
		return s.Raft.RemoveServer(id, 0, placementApplyTimeout).Error()
	}
	return fmt.Errorf("unknown move step %v", step.kind)
}

// nextStep is nextMove for shard s as this node sees it now, with the
// configuration it read; moveNone when the shard has no desired voters
// or no configuration yet.
func (n *Node) nextStep(s *Shard, p placementFSM, round *moveRound) (moveStep, raft.Configuration) {
	want, ok := p.ShardVoters(s.ID)
	if !ok {
		return moveStep{}, raft.Configuration{}
	}
	conf, ok := s.configuration()
	if !ok {
		return moveStep{}, raft.Configuration{}
	}
	m := membersOf(conf)
	return nextMove(moveView{
		shard: s.ID, self: n.cfg.NodeID, want: want,
		voters: m.voters, nonvoters: m.nonvoters,
		live:     round.live,
		caughtUp: func(id int32) bool { return s.caughtUp(serverID(id)) },
		leads:    round.leads,
		nodes:    round.nodes,
	}), conf
}

// moveRound is what every move step of one placement round reads: the
// registered nodes, the live members' Raft addresses (and the set of their
// ids), and how many group shards each node leads. The placement loop's
// goroutine builds it once a round, when this node leads a shard.
type moveRound struct {
	nodes map[int32]fsm.Node
	addrs map[int32]string
	live  map[int32]bool
	leads map[int32]int
	// synced is set once the round's metadata read barrier succeeded
	// (moveShard): the metadata read from then on holds every change
	// acknowledged before it, the planner's desired voters included.
	// syncErr is the barrier's failure, which ends the round's moves.
	synced  bool
	syncErr error
}

func (n *Node) newMoveRound(p placementFSM) *moveRound {
	r := &moveRound{nodes: registry(p.Nodes()), addrs: n.members.raftAddrs(n.mux.Deaths()), leads: n.leadCounts()}
	r.live = make(map[int32]bool, len(r.addrs))
	for id := range r.addrs {
		r.live[id] = true
	}
	return r
}

// leadCounts is how many group shards each node leads, as this node
// routes them.
func (n *Node) leadCounts() map[int32]int {
	counts := map[int32]int{}
	for _, s := range n.shards {
		if b, ok := n.LeaderOf(s.ID); ok {
			counts[b.NodeID]++
		}
	}
	return counts
}

// addressOf is server id's address in conf ("" when it is not there).
func addressOf(conf raft.Configuration, id raft.ServerID) raft.ServerAddress {
	for _, srv := range conf.Servers {
		if srv.ID == id {
			return srv.Address
		}
	}
	return ""
}

// catchUpEntries is how far, in log entries, a new replica may trail the
// leader's last index and count as caught up (promoted to voter).
const catchUpEntries = 16

// caughtUp reports whether the replica id of this shard, which this node
// leads, acknowledged the log to within catchUpEntries of the leader's
// last index (a heartbeat acknowledges none: an empty replica must have
// taken real entries or a snapshot) and answered within a heartbeat
// timeout.
func (s *Shard) caughtUp(id raft.ServerID) bool {
	index, at := s.trans.Acked(id, s.Raft.CurrentTerm())
	if index == 0 || time.Since(at) > s.heartbeat {
		return false
	}
	return index+catchUpEntries >= s.Raft.LastIndex()
}
