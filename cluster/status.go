package cluster

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// ReplicaStatus is one replica of a shard as the node holding it reports
// it.
type ReplicaStatus struct {
	Shard        int32  `json:"shard"`
	Node         int32  `json:"node"`
	State        string `json:"state"` // Raft's: Leader, Follower, Candidate
	Voter        bool   `json:"voter"`
	Term         uint64 `json:"term"`
	AppliedIndex uint64 `json:"applied_index"`
	LastIndex    uint64 `json:"last_index"`
	// Voters and Nonvoters are the configuration this replica holds.
	Voters    []int32 `json:"voters"`
	Nonvoters []int32 `json:"nonvoters,omitempty"`
}

// NodeStatus is one node of the cluster.
type NodeStatus struct {
	ID        int32  `json:"id"`
	KafkaAddr string `json:"kafka_addr,omitempty"`
	RaftAddr  string `json:"raft_addr,omitempty"`
	// State is gossip's view: alive, suspect or dead; draining (still
	// holding replicas) and drained (none left) for a removed node.
	State string `json:"state"`
	// Placement is the node's registration: active, draining, or "" when
	// the metadata group has not registered it yet.
	Placement string `json:"placement,omitempty"`
	// Replicas counts the group shards it votes in; Leads those it leads.
	Replicas int `json:"replicas"`
	Leads    int `json:"leads"`
	// Reported says whether the node answered this status call.
	Reported bool `json:"reported"`
	// Disk is "stalled" or "failed" while the node is fenced for its disk
	// (it leads and serves nothing, and answers no Raft traffic, so it
	// does not report); empty when healthy. DiskReason says why, as the
	// node itself judged it (only when the answering node is that node).
	Disk       DiskState `json:"disk,omitempty"`
	DiskReason string    `json:"disk_reason,omitempty"`
	// SlowDisk: its syncs are much slower than its peers', so it hands
	// its leaderships away and is given none (slowdisk.go).
	SlowDisk bool `json:"slow_disk,omitempty"`
}

// ShardStatus is one shard: its configuration (from its leader), the
// voters placement desires, and its leader's term and applied index.
type ShardStatus struct {
	Shard           int32   `json:"shard"`
	Leader          int32   `json:"leader"` // -1 when unknown
	Term            uint64  `json:"term"`
	AppliedIndex    uint64  `json:"applied_index"`
	Voters          []int32 `json:"voters"`
	Nonvoters       []int32 `json:"nonvoters,omitempty"`
	Desired         []int32 `json:"desired,omitempty"`
	UnderReplicated bool    `json:"under_replicated"`
	Moving          bool    `json:"moving"`
}

// ClusterStatus is the cluster as one node sees it, with every reachable
// node's own report of its replicas.
type ClusterStatus struct {
	Node            int32         `json:"node"` // the node that answered
	ClusterID       string        `json:"cluster_id"`
	MetaLeader      int32         `json:"meta_leader"` // -1 when unknown
	Nodes           []NodeStatus  `json:"nodes"`
	Shards          []ShardStatus `json:"shards"`
	UnderReplicated int           `json:"under_replicated"`
	Moving          int           `json:"moving"`
}

// localReplicas reports every shard whose configuration names this node.
func (n *Node) localReplicas() []ReplicaStatus {
	var out []ReplicaStatus
	for _, s := range n.all {
		m, ok := s.members()
		if !ok {
			continue
		}
		voter := slices.Contains(m.voters, n.cfg.NodeID)
		if !voter && !slices.Contains(m.nonvoters, n.cfg.NodeID) {
			continue
		}
		out = append(out, ReplicaStatus{
			Shard: s.ID, Node: n.cfg.NodeID, State: s.Raft.State().String(),
			Voter: voter, Term: s.Raft.CurrentTerm(),
			AppliedIndex: s.Raft.AppliedIndex(), LastIndex: s.Raft.LastIndex(),
			Voters: m.voters, Nonvoters: m.nonvoters,
		})
	}
	return out
}

// Status gathers the cluster's status: the nodes gossip and the metadata
// group know, every live node's report of its replicas (asked at once,
// each within adminTimeout or ctx), and each shard's configuration and
// desired voters. Safe from any goroutine; it blocks on the calls.
func (n *Node) Status(ctx context.Context) ClusterStatus {
	st := ClusterStatus{Node: n.cfg.NodeID, ClusterID: n.ClusterID(), MetaLeader: -1}
	if b, ok := n.MetaLeader(); ok {
		st.MetaLeader = b.NodeID
	}
	var registered map[int32]fsm.Node
	p, hasPlacement := n.meta.FSM.(placementFSM)
	if hasPlacement {
		registered = registry(p.Nodes())
	}
	live := n.members.raftAddrs(n.mux.Deaths())

	nodes := map[int32]*NodeStatus{}
	node := func(id int32) *NodeStatus {
		if ns, ok := nodes[id]; ok {
			return ns
		}
		ns := &NodeStatus{ID: id, State: "dead"}
		if b, ok := n.members.broker(id); ok {
			ns.KafkaAddr = b.KafkaAddr
		}
		nodes[id] = ns
		return ns
	}
	for id, nd := range registered {
		ns := node(id)
		ns.RaftAddr, ns.Placement = nd.RaftAddr, nd.State.String()
	}
	for id, addr := range live {
		ns := node(id)
		ns.RaftAddr, ns.State = addr, "alive"
	}
	for id, state := range n.gossipStates() {
		if ns, ok := nodes[id]; ok && state == memberlist.StateSuspect {
			ns.State = "suspect"
		}
	}

	// Every live node reports its replicas.
	var mu sync.Mutex
	var wg sync.WaitGroup
	replicas := map[int32][]ReplicaStatus{}
	for id, addr := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rs []ReplicaStatus
			if id == n.cfg.NodeID {
				rs = n.localReplicas()
			} else {
				resp, err := n.adminCall(ctx, addr, adminRequest{Op: "replicas"})
				if err != nil || resp.Code != "" {
					return
				}
				rs = resp.Replicas
			}
			mu.Lock()
			replicas[id] = rs
			mu.Unlock()
		}()
	}
	wg.Wait()
	leaders := map[int32]ReplicaStatus{}
	for id, rs := range replicas {
		node(id).Reported = true
		for _, r := range rs {
			if r.State == raft.Leader.String() && r.Term >= leaders[r.Shard].Term {
				leaders[r.Shard] = r
			}
		}
	}

	for _, sh := range n.all { // MetaShard, then the group shards
		id := sh.ID
		ss := ShardStatus{Shard: id, Leader: -1}
		if l, ok := leaders[id]; ok {
			ss.Leader, ss.Term, ss.AppliedIndex = l.Node, l.Term, l.AppliedIndex
			ss.Voters, ss.Nonvoters = l.Voters, l.Nonvoters
		} else {
			// The leader did not report: what it last gossiped.
			if e, ok := n.leaders.get(id); ok {
				ss.Voters, ss.Nonvoters = slices.Clone(e.Voters), slices.Clone(e.Nonvoters)
			}
			if b, ok := n.LeaderOf(id); ok {
				ss.Leader = b.NodeID
			}
		}
		if hasPlacement {
			ss.Desired, _ = p.ShardVoters(id)
		}
		ss.UnderReplicated, ss.Moving = shardHealth(id, shardMembers{ss.Voters, ss.Nonvoters}, ss.Desired, live)
		ss.UnderReplicated = ss.UnderReplicated || ss.Leader < 0
		if ss.UnderReplicated {
			st.UnderReplicated++
		}
		if ss.Moving {
			st.Moving++
		}
		if id != MetaShard {
			for _, v := range ss.Voters {
				node(v).Replicas++
			}
			if ss.Leader >= 0 {
				node(ss.Leader).Leads++
			}
		}
		st.Shards = append(st.Shards, ss)
	}
	for _, ns := range nodes {
		ns.Disk, ns.SlowDisk = n.members.diskOf(ns.ID), n.members.slowNode(ns.ID)
		if ns.ID == n.cfg.NodeID {
			if h := n.disk.health(); h.Fenced() {
				ns.Disk, ns.DiskReason = h.State, h.Reason
			}
			ns.SlowDisk = n.slowDisk.Load()
		}
		if ns.Placement == fsm.NodeDraining.String() && ns.State != "dead" {
			ns.State = "draining"
			if ns.Replicas == 0 {
				ns.State = "drained"
			}
		}
		st.Nodes = append(st.Nodes, *ns)
	}
	slices.SortFunc(st.Nodes, func(a, b NodeStatus) int { return int(a.ID) - int(b.ID) })
	return st
}

// gossipStates returns memberlist's state of every node it knows, by node
// id (nil without gossip).
func (n *Node) gossipStates() map[int32]memberlist.NodeStateType {
	if n.gossip == nil {
		return nil
	}
	out := map[int32]memberlist.NodeStateType{}
	for _, m := range n.gossip.ml.Members() {
		name, ok := strings.CutPrefix(m.Name, "kcoord-")
		if id, err := strconv.ParseInt(name, 10, 32); ok && err == nil {
			out[int32(id)] = m.State
		}
	}
	return out
}

// PlacementStats are placement's metrics as this node knows them, cheap
// enough for every scrape (no calls to other nodes).
type PlacementStats struct {
	// Replicas counts the group shards whose configuration has this node
	// as a voter (kcoord_shards).
	Replicas int
	// MovesDone counts replicas this node promoted to voter as a shard's
	// leader (kcoord_replica_moves_total).
	MovesDone int64
	// UnderReplicated, MovesInFlight and MovesQueued count, on the
	// metadata leader (0 elsewhere), the shards (the metadata shard among
	// them) with fewer live voters than desired or no known leader, those
	// whose configuration is not their desired voters yet, and those whose
	// desired voters are not yet placement over the active nodes (waiting
	// behind the move limit) (kcoord_shards_under_replicated,
	// kcoord_replica_moves_in_flight; placement has settled when all three
	// are 0).
	UnderReplicated int
	MovesInFlight   int
	MovesQueued     int
	MetaLeader      bool
}

// PlacementStats reads the stats from this node's replicas, the leader
// table and the metadata FSM. Any goroutine may call it.
func (n *Node) PlacementStats() PlacementStats {
	st := PlacementStats{MovesDone: n.movesDone.Load()}
	for _, s := range n.shards {
		if s.votes() {
			st.Replicas++
		}
	}
	p, ok := n.meta.FSM.(placementFSM)
	if !ok || !n.meta.IsLeader() {
		return st
	}
	st.MetaLeader = true
	live := n.members.raftAddrs(n.mux.Deaths())
	active := activeNodes(registry(p.Nodes()))
	rf := min(n.cfg.ReplicationFactor, len(active))
	for _, s := range n.all {
		desired, placed := p.ShardVoters(s.ID)
		if len(active) > 0 && (!placed || !slices.Equal(desired, placement(s.ID, active, rf))) {
			st.MovesQueued++
		}
		e, known := n.leaders.get(s.ID)
		_, leaderKnown := n.LeaderOf(s.ID)
		under, moving := shardHealth(s.ID, shardMembers{e.Voters, e.Nonvoters}, desired, live)
		if !leaderKnown || !known || under {
			st.UnderReplicated++
		}
		if placed && (!known || moving) {
			st.MovesInFlight++
		}
	}
	return st
}

// shardHealth applies the one rule Status and PlacementStats share to a
// shard's configuration m and desired voters (nil when it has none):
// under-replicated when fewer of its voters are live than it desires (or
// has, without desired voters); moving when its voters are not the desired
// ones, or a group shard has a non-voter.
func shardHealth(shard int32, m shardMembers, desired []int32, live map[int32]string) (under, moving bool) {
	want := len(desired)
	if want == 0 {
		want = len(m.voters)
	}
	healthy := 0
	for _, v := range m.voters {
		if _, ok := live[v]; ok {
			healthy++
		}
	}
	moving = len(desired) > 0 && inFlight(shard, m, desired) || shard != MetaShard && len(m.nonvoters) > 0
	return healthy < want, moving
}
