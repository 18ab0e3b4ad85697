package cluster

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// bootstrapSettle is how long an agreement on a bootstrap must hold before
// a node acts on it, so that a node starting a moment later is seen (and
// makes the bootstrap an error) rather than left out.
const bootstrapSettle = 500 * time.Millisecond

// clusterLoopFast is the cluster loop's period while the node bootstraps or
// has no cluster id; otherwise it runs every GossipPushPullInterval.
const clusterLoopFast = 100 * time.Millisecond

// bootState is a node's part in a multi-node bootstrap while it takes
// part in one. Open sets proposal and active (begin) before gossip
// starts; afterwards only the cluster loop goroutine reads or writes it.
// What outlives the bootstrap (the proposal, and the view and digest of the
// agreement acted on) is in node.json: see identity.Proposal.
type bootState struct {
	// proposal is the cluster id this node proposes (gossiped as "prop"),
	// recorded in node.json before it is first gossiped.
	proposal string
	// active: the node takes part in a bootstrap, which it has neither
	// done nor given up (because a cluster exists).
	active bool
	// candidate is the agreement last seen (its digest), since
	// candidateSince.
	candidate      string
	candidateSince time.Time
}

// begin makes the node take part in a multi-node bootstrap with proposal,
// the one node.json records, or a fresh one when it records none.
func (b *bootState) begin(proposal string) error {
	if proposal == "" {
		id, err := newClusterID()
		if err != nil {
			return err
		}
		proposal = id
	}
	b.proposal, b.active = proposal, true
	return nil
}

// clusterLoop keeps this node's gossip meta current, takes part in the
// multi-node bootstrap (BootstrapExpect > 1 on a node without state or
// cluster id), and adopts the cluster id of the stateful peers while the
// node has none. It wakes on gossip changes and on a timer. Runs on its own
// goroutine, started by Start when gossip is on, until Shutdown.
func (n *Node) clusterLoop() {
	g := n.gossip
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-g.changed:
		case <-timer.C:
		case <-n.stop:
			return
		}
		if n.closed.Load() {
			return
		}
		n.refreshMeta()
		if n.boot.active {
			n.bootstrapStep()
		}
		if n.closed.Load() {
			return
		}
		if n.ClusterID() == "" {
			n.adoptFromPeers()
		}
		period := n.cfg.GossipPushPullInterval
		if n.boot.active || n.ClusterID() == "" {
			period = clusterLoopFast
		}
		timer.Reset(period)
	}
}

// bootKind is what a node does about a bootstrap after looking at gossip.
type bootKind int

const (
	// bootWait: no agreement (yet).
	bootWait bootKind = iota
	// bootGo: every expected node agrees: bootstrap.
	bootGo
	// bootStop: a cluster exists (a peer holds state outside this
	// bootstrap): give up bootstrapping and join it.
	bootStop
)

// bootDecision is the outcome of decideBootstrap.
type bootDecision struct {
	kind bootKind
	// ids (bootGo) are the nodes of the new cluster, sorted; clusterID is
	// the proposal of the lowest of them; digest identifies the agreement
	// (see agreementDigest).
	ids       []int32
	clusterID string
	digest    string
	// problem (bootWait) is an error in how the nodes were started, to be
	// logged once; empty while views merely converge.
	problem string
	// holder (bootStop) is a peer that holds state.
	holder int32
}

// decideBootstrap decides, from the gossip metas of the live nodes (this
// node's own current one included), whether a node expecting expect nodes
// bootstraps. Join-only nodes without state do not count. A bootstrap
// happens only on a view every expected node shares: exactly expect nodes,
// all expecting expect, all advertising that same sorted view and a
// proposal, and one shard count (a node that advertises none runs
// previousReleaseShards); its cluster id is the proposal of the lowest
// node id. A peer
// that already bootstrapped still agrees when it advertises the digest of
// this very agreement (the same nodes with the same proposals: a node that
// restarted on a wiped data dir has a new proposal, so it cannot pass for
// one that took part); any other peer holding state means the cluster
// exists. Every node applies the same rule to the same metas, so all that
// act write one configuration.
func decideBootstrap(expect int, metas []nodeMeta) bootDecision {
	var members []nodeMeta
	for _, p := range metas {
		if p.Expect > 0 || p.HasState {
			members = append(members, p)
		}
	}
	slices.SortFunc(members, func(a, b nodeMeta) int { return cmp.Compare(a.ID, b.ID) })
	members = slices.CompactFunc(members, func(a, b nodeMeta) bool { return a.ID == b.ID })
	if len(members) == 0 {
		return bootDecision{kind: bootWait}
	}
	view := nodeIDs(members)
	clusterID, digest := members[0].Proposal, agreementDigest(members)
	agrees := func(p nodeMeta) bool {
		return p.Version >= metaVersion && p.Expect == expect && p.Proposal != "" && slices.Equal(p.View, view)
	}
	for _, p := range members {
		if p.HasState && !(agrees(p) && clusterID != "" && p.ClusterID == clusterID && p.Agreement == digest) {
			return bootDecision{kind: bootStop, holder: p.ID}
		}
	}
	switch {
	case len(members) < expect:
		return bootDecision{kind: bootWait}
	case len(members) > expect:
		return bootDecision{kind: bootWait, problem: fmt.Sprintf(
			"refusing to bootstrap: %d nodes see each other, more than the %d of --bootstrap-expect; start exactly %d nodes for the first bootstrap (and add others with --join alone), or stop the extra ones",
			len(members), expect, expect)}
	}
	for _, p := range members {
		if p.Expect != expect {
			return bootDecision{kind: bootWait, problem: fmt.Sprintf(
				"refusing to bootstrap: node %d expects %d nodes, this node %d; give every node of the first bootstrap the same --bootstrap-expect",
				p.ID, p.Expect, expect)}
		}
	}
	for _, p := range members {
		if !agrees(p) {
			return bootDecision{kind: bootWait}
		}
	}
	if problem := bootstrapShardsProblem(members); problem != "" {
		return bootDecision{kind: bootWait, problem: problem}
	}
	return bootDecision{kind: bootGo, ids: view, clusterID: clusterID, digest: digest}
}

// agreementDigest identifies a bootstrap agreement: the sorted node ids of
// the view with each node's proposal (FNV-64a, hex).
func agreementDigest(members []nodeMeta) string {
	h := fnv.New64a()
	for _, p := range members {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(p.ID))
		_, _ = h.Write(b[:])
		_, _ = h.Write([]byte(p.Proposal))
		_, _ = h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// bootstrapStep runs decideBootstrap on the current gossip view and acts
// on it: a bootGo bootstraps once it held for bootstrapSettle, or at once
// when a peer already bootstrapped it. Cluster loop only.
func (n *Node) bootstrapStep() {
	peers := n.gossip.peers()
	d := decideBootstrap(n.cfg.BootstrapExpect, peers)
	if d.kind == bootWait && n.hasState.Load() {
		// This node's shards got Raft state from a peer while it
		// bootstrapped (refreshMeta does not advertise it yet), and no
		// agreement holds any more: the cluster exists.
		d = bootDecision{kind: bootStop, holder: n.cfg.NodeID}
	}
	switch d.kind {
	case bootStop:
		// node.json keeps the proposal: should the peers' configurations
		// name this node, it shows that it took part (participantSeat).
		n.boot.active, n.boot.proposal = false, ""
		n.dropCandidate()
		if d.holder == n.cfg.NodeID {
			n.logger.Info("this node's shards got Raft state from a peer while no bootstrap agreement holds: the cluster exists, so this node does not bootstrap; its shards come from their leaders")
			return
		}
		n.logger.Info("a peer holds Raft state: the cluster exists, so this node does not bootstrap; its shards come from their leaders",
			"peer", d.holder)
		return
	case bootWait:
		n.dropCandidate()
		if d.problem != "" {
			n.logOnce("bootstrap:"+d.problem, hclog.Error, d.problem, "expect", n.cfg.BootstrapExpect, "seen", nodeIDs(peers))
		}
		return
	}
	if n.cfg.stallBootstrap {
		<-n.stop // a test's node that crashed the moment its peers agreed
		return
	}
	if d.digest != n.boot.candidate {
		n.boot.candidate, n.boot.candidateSince = d.digest, time.Now()
		// The peers of this agreement may bootstrap (and dial) first:
		// their traffic names the cluster this node is about to join.
		n.mux.SetClusterID(d.clusterID)
	}
	// A peer that bootstrapped this agreement already settled it.
	settled := slices.ContainsFunc(peers, func(p nodeMeta) bool { return p.HasState })
	if !settled && time.Since(n.boot.candidateSince) < bootstrapSettle {
		return
	}
	addrs := make(map[int32]string, len(peers))
	for _, p := range peers {
		addrs[p.ID] = p.Raft
	}
	n.bootstrap(d, addrs)
}

// dropCandidate forgets an agreement that no longer holds: the mux again
// names no cluster (this node has none).
func (n *Node) dropCandidate() {
	if n.boot.candidate != "" {
		n.boot.candidate = ""
		n.mux.SetClusterID(n.ClusterID())
	}
}

// bootstrap records the agreement in node.json, writes the initial
// configuration of every shard this node is placed on, under the
// agreement's cluster id, then records the id in node.json and gossips that
// the node holds state. Cluster loop only.
//
// raft.ErrCantBootstrap on a shard means Raft state appeared there since
// the decision. When the shard holds this very configuration, or none yet
// (a vote alone is state), a peer of this agreement bootstrapped first and
// its candidate or leader reached this node: the shard is done, and the
// node goes on with its other shards, since a shard none of whose voters
// bootstrapped it would never elect a leader. Any other configuration is
// state of another origin: the node stops bootstrapping and logs it.
func (n *Node) bootstrap(d bootDecision, addrs map[int32]string) {
	ids, clusterID := d.ids, d.clusterID
	n.boot.active = false
	// The agreement first, without the cluster id: whatever happens next,
	// this node gossips it from now on (across restarts), so a peer of the
	// agreement that crashed before bootstrapping its own shards can show
	// that it took part. A failed write costs only that.
	if err := n.recordAgreement(ids, d.digest, true); err != nil {
		n.logger.Error("recording the bootstrap agreement in node.json failed; bootstrapping all the same", "error", err)
	}
	// The id in memory next, so Raft traffic carries it from the first
	// election on; node.json after the configurations, so a crash in
	// between leaves state without an id, which the node adopts again.
	if err := n.setClusterID(clusterID, false); err != nil {
		n.logger.Error("bootstrap abandoned", "cluster_id", clusterID, "error", err)
		return
	}
	rf := min(n.cfg.ReplicationFactor, len(ids))
	var here []*Shard
	for _, s := range n.all {
		if slices.Contains(placement(s.ID, ids, rf), n.cfg.NodeID) {
			here = append(here, s)
		}
	}
	n.placed.Store(&here)
	var errs []error
	placed, fromPeers := 0, 0
shards:
	for _, s := range here {
		voters := placement(s.ID, ids, rf)
		var conf raft.Configuration
		for _, v := range voters {
			conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: serverID(v), Address: raft.ServerAddress(addrs[v])})
		}
		err := s.Raft.BootstrapCluster(conf).Error()
		switch {
		case err == nil:
			n.logger.Debug("bootstrapped shard", "shard", s.ID, "voters", voters)
			placed++
		case errors.Is(err, raft.ErrCantBootstrap):
			got := s.Raft.GetConfiguration().Configuration()
			if len(got.Servers) == 0 || slices.Equal(shardVoters(s), voters) {
				n.logger.Debug("shard holds Raft state of this bootstrap already: a peer bootstrapped it first", "shard", s.ID)
				fromPeers++
				continue
			}
			n.logger.Error("a shard holds Raft state of another configuration: stopping the bootstrap", "shard", s.ID,
				"configuration", fmt.Sprint(got.Servers), "bootstrap_voters", voters)
			break shards
		default:
			errs = append(errs, fmt.Errorf("shard %d: %w", s.ID, err))
		}
	}
	n.hasState.Store(true)
	if err := n.persistIdentity(); err != nil {
		n.logger.Error("recording the cluster id failed", "cluster_id", clusterID, "error", err)
	}
	n.refreshMeta()
	if err := errors.Join(errs...); err != nil {
		n.logger.Error("bootstrap failed on some shards", "cluster_id", clusterID, "error", err)
	}
	n.logger.Info("bootstrapped the cluster", "cluster_id", clusterID, "nodes", ids, "replication_factor", rf,
		"shards_bootstrapped_here", placed, "shards_from_peers", fromPeers)
}

// replicated reports whether the shard's current configuration names
// this node (as a voter or a non-voter).
func (s *Shard) replicated() bool {
	_, ok := s.suffrage()
	return ok
}

// otherVoters returns the shard's voters other than this node.
func (s *Shard) otherVoters() []raft.Server {
	f := s.Raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []raft.Server
	for _, srv := range f.Configuration().Servers {
		if srv.ID != s.localID && srv.Suffrage == raft.Voter {
			out = append(out, srv)
		}
	}
	return out
}
