package cluster

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// How a node comes to belong to one cluster, and never to another:
//
//   - Before any shard's Raft runs on an empty data dir, NewNode asks the
//     seeds (prepare): a node whose id is a voter of their live cluster
//     refuses to start (ErrEmptyDataDirVoter); one that finds a live
//     cluster adopts its id and joins it instead of bootstrapping.
//   - Later, the cluster loop adopts the id of the stateful peers a node
//     without one sees (adoptFromPeers), or mints one for a cluster
//     bootstrapped before ids existed (mintIfLowestVoter).
//   - Gossip and the Raft mux refuse peers whose id differs.

// initialMeta is the gossip meta NewNode starts memberlist with, before any
// shard's Raft runs.
func (n *Node) initialMeta() nodeMeta {
	return nodeMeta{
		Version:   metaVersion,
		ID:        n.cfg.NodeID,
		Kafka:     n.cfg.KafkaAddr,
		Raft:      n.mux.advertise,
		HasState:  n.hasState.Load(),
		Expect:    n.cfg.BootstrapExpect,
		ClusterID: n.ClusterID(),
		Proposal:  n.boot.proposal,
	}
}

// prepare decides, in NewNode and before any shard's Raft runs, what this
// node is to its cluster. On an initialised data dir there is nothing to
// decide. On a fresh one with Join set, it waits for the seeds (at most
// JoinTimeout) and checks their views: see checkSeeds. It reports whether
// NewNode must bootstrap every shard alone (BootstrapExpect 1 and no live
// cluster found), and records in ident whether the data dir still awaits
// its check against peers.
func (n *Node) prepare(fresh bool) (bootstrapAlone bool, err error) {
	if !fresh {
		return false, nil
	}
	cfg := &n.cfg
	verified, found := false, false
	if n.gossip != nil && len(cfg.Join) > 0 {
		if n.waitForSeeds() {
			if found, verified, err = n.checkSeeds(); err != nil {
				return false, err
			}
		} else {
			n.logger.Warn("no seed answered: starting Raft without knowing the seeds' cluster; until gossip confirms this node holds no seat there, it adopts no cluster id and its Raft accepts no cluster's traffic",
				"seeds", cfg.Join, "waited", cfg.JoinTimeout)
		}
	}
	if cfg.BootstrapExpect == 1 && !found {
		id := n.ClusterID()
		if id == "" {
			if id, err = newClusterID(); err != nil {
				return false, err
			}
		}
		// In memory first: leadership callbacks during the bootstrap see
		// it; NewNode writes node.json after the bootstrap.
		if err := n.setClusterID(id, false); err != nil {
			return false, err
		}
		return true, nil
	}
	if found && cfg.BootstrapExpect == 1 {
		n.logger.Info("the seeds' cluster exists: joining it instead of bootstrapping alone", "cluster_id", cmp.Or(n.ClusterID(), "none yet"))
	}
	return false, n.setAwaitingPeers(!verified)
}

// waitForSeeds waits until a Join succeeded and at least one peer is
// known, or JoinTimeout passes (false). A successful Join has merged the
// seed's whole member list, metas included.
func (n *Node) waitForSeeds() bool {
	g := n.gossip
	timer := time.NewTimer(n.cfg.JoinTimeout)
	defer timer.Stop()
	joined := g.joined
	for {
		select {
		case <-joined:
			joined = nil
		case <-g.changed:
		case <-timer.C:
			return false
		case <-n.stop:
			return false
		}
		if joined == nil && len(g.others()) > 0 {
			return true
		}
	}
}

// checkSeeds checks the peers a fresh node learned from its seeds, before
// its Raft runs. found: some peer holds Raft state (a live cluster exists).
// verified: there are such peers and every one advertises its voters in
// full (allAdvertiseVoters), so the wiped-voter check was done. It fails with ErrEmptyDataDirVoter
// when a stateful peer lists this node id as a voter, and with
// ErrAmbiguousJoin when stateful peers name different cluster ids; else it
// adopts their id, if any (NewNode persists it).
func (n *Node) checkSeeds() (found, verified bool, err error) {
	stateful := statefulPeers(n.gossip.others())
	if len(stateful) == 0 {
		// No live cluster answered: nothing to check against yet (the
		// seeds may know only fresh nodes while the cluster is down).
		return false, false, nil
	}
	if listing := listingAsVoter(stateful, n.cfg.NodeID); len(listing) > 0 {
		return true, false, n.emptyDataDirVoterError(listing)
	}
	ids := clusterIDsOf(stateful)
	switch len(ids) {
	case 0:
	case 1:
		if err := n.setClusterID(ids[0], false); err != nil {
			return true, false, err
		}
		n.logger.Info("joining the seeds' cluster", "cluster_id", ids[0], "peers", nodeIDs(stateful))
	default:
		return true, false, fmt.Errorf("%w: peers holding state advertise cluster ids %s; give --join seeds of one cluster",
			ErrAmbiguousJoin, strings.Join(ids, ", "))
	}
	return true, allAdvertiseVoters(stateful), nil
}

// adoptFromPeers runs in the cluster loop while this node has no cluster
// id. A node whose data dir awaits its check refuses any cluster that lists
// it as a voter (logged once, with the advice of ErrEmptyDataDirVoter), and
// records the check as done when stateful peers that advertise their voters
// do not list it. Then, when every stateful peer with an id names the same
// one, the node adopts and persists it; when none has an id and this node
// holds state, the lowest voter of the metadata shard mints one.
func (n *Node) adoptFromPeers() {
	others := n.gossip.others()
	stateful := statefulPeers(others)
	hasState := n.hasState.Load() || n.holdsShards()
	if len(stateful) == 0 && !hasState {
		return
	}
	if !hasState && n.awaitingPeers() {
		if listing := listingAsVoter(stateful, n.cfg.NodeID); len(listing) > 0 {
			n.logOnce("wiped-voter", hclog.Error, n.emptyDataDirVoterError(listing).Error())
			return
		}
		if len(stateful) > 0 && allAdvertiseVoters(stateful) {
			if err := n.setAwaitingPeers(false); err != nil {
				n.logger.Error("recording the peers' confirmation failed", "error", err)
				return
			}
			n.logger.Info("peers confirm this node holds no seat in their cluster", "peers", nodeIDs(stateful))
		}
	}
	ids := clusterIDsOf(stateful)
	switch len(ids) {
	case 0:
		if hasState {
			n.mintIfLowestVoter(others)
		}
	case 1:
		if err := n.setClusterID(ids[0], true); err != nil {
			n.logOnce("adopt:"+ids[0], hclog.Error, "adopting the peers' cluster id failed", "cluster_id", ids[0], "error", err)
			return
		}
		n.logger.Info("joined cluster", "cluster_id", ids[0], "peers", nodeIDs(stateful))
	default:
		n.logOnce("ambiguous:"+strings.Join(ids, ","), hclog.Error,
			"peers holding state advertise different cluster ids: adopting none", "cluster_ids", ids)
	}
}

// mintIfLowestVoter gives a cluster bootstrapped before cluster ids existed
// its id: the lowest voter of the metadata shard mints it once every other
// voter of it is live in gossip, holds state and has no id either (so it
// will adopt this one). others is the live peers' metas (nil without
// gossip: then only a single-voter cluster mints).
func (n *Node) mintIfLowestVoter(others []nodeMeta) {
	voters := shardVoters(n.meta)
	if len(voters) == 0 || voters[0] != n.cfg.NodeID {
		return
	}
	for _, v := range voters[1:] {
		i := slices.IndexFunc(others, func(p nodeMeta) bool { return p.ID == v })
		if i < 0 || others[i].Version < metaVersion || !others[i].HasState || others[i].ClusterID != "" {
			return
		}
	}
	id, err := newClusterID()
	if err == nil {
		err = n.setClusterID(id, true)
	}
	if err != nil {
		n.logOnce("mint", hclog.Error, "minting a cluster id failed", "error", err)
		return
	}
	n.logger.Info("minted a cluster id for a cluster bootstrapped before cluster ids existed", "cluster_id", id, "meta_voters", voters)
}

// emptyDataDirVoterError is ErrEmptyDataDirVoter with the advice: listing
// are the stateful peers whose configurations name this node as a voter.
func (n *Node) emptyDataDirVoterError(listing []nodeMeta) error {
	cid := cmp.Or(listing[0].ClusterID, "(no id yet)")
	return fmt.Errorf("%w: node %d's data dir %s is empty, but nodes %v of cluster %s list node id %d as a voter of their shards; "+
		"with an empty log it could vote twice in one term and forget commits it acknowledged. "+
		"Either restore this node's data dir, or start it as a fresh node with a new --node-id; "+
		"the old id's seats must then be removed from the shards' configurations first, "+
		"which kcoord cannot do yet (replica removal is a later issue)",
		ErrEmptyDataDirVoter, n.cfg.NodeID, n.cfg.DataDir, nodeIDs(listing), cid, n.cfg.NodeID)
}

// refreshMeta brings this node's gossip meta up to date (state, voters,
// cluster id, bootstrap proposal and view) and re-gossips it when it
// changed. Called by NewNode once its shards run, then by the cluster loop.
func (n *Node) refreshMeta() {
	g := n.gossip
	state := n.hasState.Load() || n.holdsShards()
	if state {
		n.hasState.Store(true)
	}
	var voters []int32
	if state {
		voters = n.voterIDs()
	}
	view := n.boot.view
	if n.boot.active {
		view = g.view()
	}
	changed := g.updateSelf(func(m *nodeMeta) {
		m.Version, m.HasState, m.Voters, m.ClusterID = metaVersion, state, voters, n.ClusterID()
		m.Proposal, m.View, m.Agreement = n.boot.proposal, view, n.boot.digest
	})
	if changed {
		g.announce()
	}
}

// voterIDs is the sorted union of the node ids that are voters in this
// node's shard configurations.
func (n *Node) voterIDs() []int32 {
	var ids []int32
	for _, s := range n.all {
		ids = append(ids, shardVoters(s)...)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// shardVoters is the sorted node ids of a shard's voters.
func shardVoters(s *Shard) []int32 {
	if s == nil {
		return nil
	}
	f := s.Raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var ids []int32
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			if id, err := strconv.ParseInt(string(srv.ID), 10, 32); err == nil {
				ids = append(ids, int32(id))
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// logOnce logs msg at level the first time key is seen by this node.
func (n *Node) logOnce(key string, level hclog.Level, msg string, args ...any) {
	if _, seen := n.once.LoadOrStore(key, true); !seen {
		n.logger.Log(level, msg, args...)
	}
}

func statefulPeers(peers []nodeMeta) []nodeMeta {
	return slices.DeleteFunc(slices.Clone(peers), func(p nodeMeta) bool { return !p.HasState })
}

func listingAsVoter(peers []nodeMeta, id int32) []nodeMeta {
	return slices.DeleteFunc(slices.Clone(peers), func(p nodeMeta) bool { return !slices.Contains(p.Voters, id) })
}

// clusterIDsOf is the sorted distinct non-empty cluster ids of peers.
func clusterIDsOf(peers []nodeMeta) []string {
	var ids []string
	for _, p := range peers {
		if p.ClusterID != "" {
			ids = append(ids, p.ClusterID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// allAdvertiseVoters reports whether every peer advertises its voters in
// full (a version-2 meta that did not leave them out to fit), so that a
// node none of them lists holds no seat.
func allAdvertiseVoters(peers []nodeMeta) bool {
	return !slices.ContainsFunc(peers, func(p nodeMeta) bool { return p.Version < metaVersion || p.VotersTruncated })
}

func nodeIDs(peers []nodeMeta) []int32 {
	ids := make([]int32, len(peers))
	for i, p := range peers {
		ids[i] = p.ID
	}
	return ids
}
