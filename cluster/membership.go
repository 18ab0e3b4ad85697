package cluster

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// How a node comes to belong to one cluster, and never to another:
//
//   - Before any shard's Raft runs on an empty data dir, Start asks the
//     seeds (prepare): a node whose id is a voter of their live cluster
//     refuses to start (ErrEmptyDataDirVoter); one that finds a live
//     cluster adopts its id and joins it instead of bootstrapping.
//   - Later, the cluster loop adopts the id of the stateful peers a node
//     without one sees (adoptFromPeers), or mints one for a cluster
//     bootstrapped before ids existed (mintIfLowestVoter).
//   - Gossip and the Raft mux refuse peers whose id differs.

// initialMeta is the gossip meta memberlist starts with, before any
// shard's Raft runs (in Start, or in Open for a fresh node with Join: its
// shard count is then still the configured one, 0 when unset, until Open
// decides it). It has no bootstrap proposal: a fresh node records
// its proposal in node.json only after checking its seeds, and gossips it
// from its first refreshMeta on (a proposal without a view agrees to
// nothing anyway).
func (n *Node) initialMeta() nodeMeta {
	return nodeMeta{
		Version:   metaVersion,
		ID:        n.cfg.NodeID,
		Kafka:     n.cfg.KafkaAddr,
		Raft:      n.mux.Advertise(),
		HasState:  n.hasState.Load(),
		Expect:    n.cfg.BootstrapExpect,
		ClusterID: n.ClusterID(),
		Shards:    n.cfg.Shards,
	}
}

// prepare decides, in Start and before any shard's Raft runs, what this
// node is to its cluster. On an initialised data dir there is nothing to
// decide. On a fresh one with Join set, Open waited for the seeds (at most
// JoinTimeout), and prepare checks their views: see checkSeeds. It reports whether
// Start must bootstrap every shard alone (BootstrapExpect 1 and no live
// cluster found), and records in ident whether the data dir still awaits
// its check against peers.
func (n *Node) prepare(fresh bool) (bootstrapAlone bool, err error) {
	if !fresh {
		return false, nil
	}
	cfg := &n.cfg
	verified, found := false, false
	if n.gossip != nil && len(cfg.Join) > 0 {
		if n.seedsAnswered {
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
		// it; Start writes node.json after the bootstrap.
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

// waitForSeeds waits until a Join succeeded, at least one peer is known
// and enough holds for the known peers' metas, or JoinTimeout passes. It
// reports whether a seed answered (a Join succeeded and a peer is known),
// enough or not. A successful Join has merged the seed's whole member
// list, metas included. Open calls it (joiningShards).
func (n *Node) waitForSeeds(enough func(others []nodeMeta) bool) (answered bool) {
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
			return joined == nil && len(g.others()) > 0
		case <-n.stop:
			return false
		}
		if others := g.others(); joined == nil && len(others) > 0 && enough(others) {
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
// adopts their id, if any (Start persists it). It fails with
// ErrShardCountMismatch when they run another shard count than this node
// opened (they appeared after Open's wait).
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
	if err := n.shardsMismatch(stateful); err != nil {
		return true, false, err
	}
	verified = allAdvertiseVoters(stateful)
	ids := clusterIDsOf(stateful)
	switch len(ids) {
	case 0:
	case 1:
		if !verified {
			// Fail closed: without every stateful peer's voters nothing
			// shows this node holds no seat, and adopting the id would let
			// the cluster's Raft traffic in (adoptFromPeers decides later).
			n.logger.Warn("not joining the seeds' cluster yet: peers holding state do not advertise their voters in full",
				"cluster_id", ids[0], "peers", nodeIDs(stateful))
			break
		}
		if err := n.setClusterID(ids[0], false); err != nil {
			return true, false, err
		}
		n.logger.Info("joining the seeds' cluster", "cluster_id", ids[0], "peers", nodeIDs(stateful))
	default:
		return true, false, fmt.Errorf("%w: peers holding state advertise cluster ids %s; give --join seeds of one cluster",
			ErrAmbiguousJoin, strings.Join(ids, ", "))
	}
	return true, verified, nil
}

// adoptFromPeers runs in the cluster loop while this node has no cluster
// id. A node without Raft state refuses a cluster that runs another shard
// count than it opened (logged once: shardsMismatch), and stops (Fatal). A node whose data
// dir awaits its check refuses any cluster that lists
// it as a voter (logged once, with the advice of ErrEmptyDataDirVoter)
// unless it took part in the bootstrap that placed it (participantSeat),
// and records the check as done when stateful peers that advertise their
// voters do not list it. Then, when every stateful peer with an id names the same
// one, the node adopts and persists it; when none has an id and this node
// holds state, the lowest voter of the metadata shard mints one.
func (n *Node) adoptFromPeers() {
	others := n.gossip.others()
	stateful := statefulPeers(others)
	hasState := n.hasState.Load() || n.holdsShards()
	if len(stateful) == 0 && !hasState {
		return
	}
	if !hasState {
		if err := n.shardsMismatch(stateful); err != nil {
			// Still up, it would be a broker that hashes groups over
			// another count than the cluster's leaders: stop (Fatal).
			n.logOnce("shards-mismatch", hclog.Error, "stopping: the peers' cluster runs another shard count", "error", err)
			n.fatal.set(err)
			return
		}
	}
	if !hasState && n.awaitingPeers() {
		if listing := listingAsVoter(stateful, n.cfg.NodeID); len(listing) > 0 {
			if n.participantSeat(others, stateful) {
				return
			}
			n.logOnce("wiped-voter", hclog.Error, n.emptyDataDirVoterError(listing).Error())
			return
		}
		if len(stateful) == 0 {
			return
		}
		if !allAdvertiseVoters(stateful) {
			// Fail closed: a peer that cannot list its voters (a release
			// before voters were gossiped, or a meta that had to leave
			// them out) cannot confirm that this node holds no seat.
			n.logOnce("unverified-seat", hclog.Warn, "not joining: peers holding state do not advertise their voters in full, so nothing confirms this node holds no seat; it accepts no Raft traffic until they do",
				"peers", nodeIDs(stateful))
			return
		}
		if err := n.setAwaitingPeers(false); err != nil {
			n.logger.Error("recording the peers' confirmation failed", "error", err)
			return
		}
		n.logger.Info("peers confirm this node holds no seat in their cluster", "peers", nodeIDs(stateful))
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

// participantSeat runs in the cluster loop when stateful peers list this
// node, which awaits its check and holds no Raft state, as a voter. That is
// a wiped voter, unless the node took part in the bootstrap agreement that
// placed it and crashed before its own shards took the configuration: its
// node.json then still records the proposal it agreed with, and it never
// voted nor stored a term. Such a node takes its seat: it records the
// agreement, adopts its cluster id (which ends the wait and lets the
// leaders' Raft traffic in), and is ready once every shard the agreement
// placed on it has its configuration from its leader.
//
// It reports whether it dealt with the listing: took the seat, or waits
// (logged once) because it cannot tell yet, some member's proposal not
// being in gossip or the peers not naming one cluster id. False: the node
// is to be refused as a wiped voter (no proposal recorded, Raft state
// after all, or no advertised agreement that its proposal reproduces).
// A node that holds Raft state is not this case; adoptFromPeers does not
// call it then.
func (n *Node) participantSeat(others, stateful []nodeMeta) bool {
	proposal, _, _ := n.bootRecord()
	if proposal == "" || !n.noRaftState() {
		return false
	}
	d, missing := agreementWith(n.cfg.NodeID, proposal, others)
	if d.kind != bootGo {
		if len(missing) == 0 {
			return false
		}
		n.logOnce(fmt.Sprint("seat-missing:", missing), hclog.Warn,
			"peers list this node as a voter; whether it took part in the bootstrap that placed them (or is a wiped voter) is known once nodes of that bootstrap gossip their proposals: waiting, and accepting no cluster's Raft traffic meanwhile",
			"waiting_for", missing, "listed_by", nodeIDs(listingAsVoter(stateful, n.cfg.NodeID)))
		return true
	}
	if ids := clusterIDsOf(stateful); len(ids) != 1 || ids[0] != d.clusterID {
		n.logOnce(fmt.Sprint("seat-ids:", ids), hclog.Warn,
			"this node took part in the bootstrap that placed it, but not every peer holding state names that cluster id yet: waiting",
			"cluster_id", d.clusterID, "peer_cluster_ids", ids)
		return true
	}
	rf := min(n.cfg.ReplicationFactor, len(d.ids))
	var here []*Shard
	for _, s := range n.all {
		if slices.Contains(placement(s.ID, d.ids, rf), n.cfg.NodeID) {
			here = append(here, s)
		}
	}
	// Ready waits for these before the cluster id can make it true.
	n.placed.Store(&here)
	n.boot.active, n.boot.proposal = false, ""
	n.boot.candidate = ""
	_ = n.recordAgreement(d.ids, d.digest, false) // written with the cluster id
	if err := n.setClusterID(d.clusterID, true); err != nil {
		n.logOnce("seat:"+err.Error(), hclog.Error, "taking this node's seat failed: recording the cluster id in node.json", "cluster_id", d.clusterID, "error", err)
		return true
	}
	n.logger.Info("this node took part in the bootstrap that placed it and holds no Raft state (it crashed before its shards took their configuration): taking its seat; its shards get their configuration from their leaders",
		"cluster_id", d.clusterID, "nodes", d.ids, "shards_placed_here", len(here))
	return true
}

// agreementWith finds, among the peers' metas, the bootstrap agreement
// that placed node self, if self took part in it with proposal: one that a
// stateful peer advertises (view and digest), whose view includes self, and
// whose digest proposal reproduces together with the proposals the view's
// other members advertise. A node whose data dir was wiped has lost the
// proposal it agreed with and reproduces no digest. d.kind is bootGo when
// found (with ids, clusterID and digest, as decideBootstrap gives them);
// else, unless some advertised agreement was checked in full and differs,
// missing are the members whose proposals it lacked to tell.
func agreementWith(self int32, proposal string, peers []nodeMeta) (d bootDecision, missing []int32) {
	props := map[int32]string{self: proposal}
	mismatch := false
	for _, p := range peers {
		if p.ID != self && p.Proposal != "" {
			props[p.ID] = p.Proposal
		}
	}
	for _, p := range peers {
		if !p.HasState || p.Agreement == "" || !slices.Contains(p.View, self) || !slices.IsSorted(p.View) {
			continue
		}
		members := make([]nodeMeta, 0, len(p.View))
		var lack []int32
		for _, id := range p.View {
			if props[id] == "" {
				lack = append(lack, id)
			}
			members = append(members, nodeMeta{ID: id, Proposal: props[id]})
		}
		if len(lack) > 0 {
			missing = append(missing, lack...)
			continue
		}
		if agreementDigest(members) == p.Agreement {
			return bootDecision{kind: bootGo, ids: slices.Clone(p.View), clusterID: members[0].Proposal, digest: p.Agreement}, nil
		}
		mismatch = true
	}
	if mismatch {
		return bootDecision{kind: bootWait}, nil // not a member with this proposal: no need to wait
	}
	slices.Sort(missing)
	return bootDecision{kind: bootWait}, slices.Compact(missing)
}

// noRaftState reports whether no shard of this node holds Raft state: none
// had any when it started (raft.HasExistingState), and none has a term or
// an entry (or snapshot) since.
func (n *Node) noRaftState() bool {
	for _, s := range n.all {
		if s.hadState || s.Raft.CurrentTerm() != 0 || s.Raft.LastIndex() != 0 {
			return false
		}
	}
	return true
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
// changed. Called by Start once its shards run, then by the cluster loop.
func (n *Node) refreshMeta() {
	g := n.gossip
	state := n.hasState.Load() || n.holdsShards()
	if state {
		n.hasState.Store(true)
	}
	// While it takes part in a bootstrap, the node does not advertise the
	// state its shards got (from a peer of the agreement it is about to act
	// on: its mux names that agreement's cluster): that would read as a
	// cluster existing outside the agreement, and make this node and its
	// peers give the bootstrap up (bootStop) and leave no record of the
	// agreement. It advertises it once it acted on the agreement.
	if n.boot.active {
		state = false
	}
	var voters []int32
	if state {
		voters = n.voterIDs()
	}
	// While bootstrapping: the proposal and the live view. Once the node
	// acted on an agreement, for good: its proposal, view and digest, as
	// node.json records them (participantSeat reads them).
	var proposal, agreement string
	var view []int32
	if n.boot.active {
		proposal, view = n.boot.proposal, g.view()
	} else if p, v, a := n.bootRecord(); a != "" {
		proposal, view, agreement = p, v, a
	}
	changed := g.updateSelf(func(m *nodeMeta) {
		m.Version, m.HasState, m.Voters, m.ClusterID, m.Shards = metaVersion, state, voters, n.ClusterID(), n.cfg.Shards
		m.Proposal, m.View, m.Agreement = proposal, view, agreement
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
	m, _ := s.members()
	return m.voters
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
