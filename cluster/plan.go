package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/kcoord/kcoord/fsm"
)

// shardState is one shard as the metadata leader plans it: its current
// configuration as its leader last reported it (known false when no report
// came yet) and its desired voters (placed false when it has none yet).
type shardState struct {
	shard   int32
	current shardMembers
	known   bool
	desired []int32
	placed  bool
}

// planShards decides which shards get new desired voters. It is a pure
// function of its arguments:
//
//   - a shard without desired voters desires the voters it has, when its
//     leader reported them and every one is registered (a shard from before
//     placement);
//   - a shard whose configuration is not yet what it desires is in flight
//     and holds one of maxMoves slots; one moving towards a node that is no
//     longer active is retargeted at once (it holds its slot already: a move
//     waiting on a dead node would never end otherwise);
//   - a shard whose leader has not reported its configuration holds a slot
//     too, and is left alone until it reports: retargeting it would start
//     a move beyond the limit when it was not moving (a new leader after
//     its predecessor died, with a removed node among its desired voters);
//   - every other shard whose desired voters are not rendezvous placement
//     over the active nodes is revised, while slots are free: shards with a
//     voter that is no longer active first (a removal is what an operator
//     waits on), then by shard id.
//
// MetaShard's non-voters are its read replicas, so they do not make it in
// flight.
func planShards(shards []shardState, nodes map[int32]fsm.Node, rf, maxMoves int) []fsm.ShardPlacement {
	active := activeNodes(nodes)
	if len(active) == 0 {
		return nil
	}
	rf = min(rf, len(active))
	inactive := func(v int32) bool { return nodes[v].State != fsm.NodeActive }

	var out []fsm.ShardPlacement
	moves := 0
	type revision struct {
		shard    int32
		ideal    []int32
		draining bool
	}
	var revisions []revision
	for _, sh := range shards {
		if !sh.placed {
			if sh.known && len(sh.current.voters) > 0 && allRegistered(sh.current.voters, nodes) {
				out = append(out, fsm.ShardPlacement{Shard: sh.shard, Voters: sh.current.voters})
			}
			continue
		}
		if !sh.known {
			// Unreported (a new leader reports within a round): it may be
			// moving, so it holds a slot, and it is left as it is.
			moves++
			continue
		}
		ideal := placement(sh.shard, active, rf)
		stale := slices.ContainsFunc(sh.desired, inactive)
		if inFlight(sh.shard, sh.current, sh.desired) {
			moves++
			if stale && !slices.Equal(ideal, sh.desired) {
				out = append(out, fsm.ShardPlacement{Shard: sh.shard, Voters: ideal})
			}
			continue
		}
		if !slices.Equal(ideal, sh.desired) {
			revisions = append(revisions, revision{sh.shard, ideal, stale})
		}
	}
	slices.SortStableFunc(revisions, func(a, b revision) int {
		switch {
		case a.draining && !b.draining:
			return -1
		case !a.draining && b.draining:
			return 1
		}
		return 0
	})
	for _, r := range revisions {
		if moves >= maxMoves {
			break
		}
		out = append(out, fsm.ShardPlacement{Shard: r.shard, Voters: r.ideal})
		moves++
	}
	return out
}

// activeNodes are the registered nodes placement may place replicas on,
// sorted.
func activeNodes(nodes map[int32]fsm.Node) []int32 {
	var active []int32
	for id, nd := range nodes {
		if nd.State == fsm.NodeActive {
			active = append(active, id)
		}
	}
	slices.Sort(active)
	return active
}

// planPlacement runs on the metadata leader's placement loop: it registers
// members not yet registered (and voters of this node's shards, for a
// cluster from before placement), then applies planShards' revisions.
func (n *Node) planPlacement(p placementFSM) error {
	// A new leader's FSM may not have applied what its predecessor
	// committed (the desired voters it set last): planning on that would
	// start moves beyond MaxConcurrentMoves.
	ctx, cancel := context.WithTimeout(context.Background(), placementApplyTimeout)
	err := n.metaTermApplied(ctx)
	cancel()
	if err != nil {
		return fmt.Errorf("before planning: %w", err)
	}
	nodes := registry(p.Nodes())
	for id, addr := range n.placementCandidates() {
		if nd, ok := nodes[id]; ok && (nd.RaftAddr == addr || addr == "") {
			continue
		}
		if s, ok := n.supportOfNode(id); ok && s.Max < n.FinalizedLevel() {
			// Too old for the finalized level: a replica there would
			// panic on what the cluster writes (features.go).
			n.logger.Debug("not registering a node too old for the finalized feature level", "target_node", id, "supports", s.Max)
			continue
		}
		if err := n.applyMeta(&fsm.NodeRegister{ID: id, RaftAddr: addr}); err != nil {
			return fmt.Errorf("register node %d: %w", id, err)
		}
		n.logger.Info("registered a node for placement", "target_node", id, "raft_addr", addr)
	}
	var shards []shardState
	for _, sh := range n.all { // MetaShard, then the group shards
		id := sh.ID
		sh := shardState{shard: id}
		sh.current, sh.known = n.currentVoters(id)
		sh.desired, sh.placed = p.ShardVoters(id)
		shards = append(shards, sh)
	}
	set := fsm.PlacementSet{Shards: planShards(shards, registry(p.Nodes()), n.cfg.ReplicationFactor, n.cfg.MaxConcurrentMoves)}
	if len(set.Shards) == 0 {
		return nil
	}
	if err := n.applyMeta(&set); err != nil {
		return fmt.Errorf("set desired voters: %w", err)
	}
	// One line per voter set, not per shard: a first round sets every
	// shard's.
	byVoters := map[string][]int32{}
	var order []string
	for _, sp := range set.Shards {
		n.logger.Debug("desired voters set", "shard", sp.Shard, "voters", sp.Voters)
		key := fmt.Sprint(sp.Voters)
		if _, ok := byVoters[key]; !ok {
			order = append(order, key)
		}
		byVoters[key] = append(byVoters[key], sp.Shard)
	}
	for _, key := range order {
		n.logger.Info("desired voters set", "voters", key, "shards", shardList(byVoters[key]), "count", len(byVoters[key]))
	}
	return nil
}

// applyMeta applies a placement command through the metadata group, which
// this node leads.
func (n *Node) applyMeta(cmd fsm.Command) error {
	b, err := fsm.Encode(cmd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), placementApplyTimeout)
	defer cancel()
	_, err = n.meta.Apply(ctx, b, placementApplyTimeout)
	return err
}
