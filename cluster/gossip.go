package cluster

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/kcoord/kcoord/release"
)

// metaVersion is the version of the gossip node meta this code advertises.
//
// The meta is a JSON object (memberlist node meta, at most 512 bytes):
//
//	{"v":2,"id":1,"kafka":"10.0.0.1:9092","raft":"10.0.0.1:9093","state":true,"expect":3,
//	 "cid":"<uuid>","prop":"<uuid>","view":[1,2,3],"agreed":"<hex>","voters":[1,2,3]}
//
// Version 1 (no "v", the first release) has id, kafka, raft, state and
// expect only. Each release ignores the fields it does not know, so mixed
// versions read each other; a version-1 peer simply has no cluster id,
// proposal, view, agreement or voters (it is never refused, and never takes part in
// a bootstrap with version-2 nodes). Fields added within version 2 (disk,
// sync, slow, rel, kv, shards) are optional: a peer of a release before
// them (0.1.0) omits them and skips them, so they need no new version.
const metaVersion = 2

// nodeMeta is what every node gossips about itself.
type nodeMeta struct {
	// Version is metaVersion; 0 from a version-1 node.
	Version int    `json:"v,omitempty"`
	ID      int32  `json:"id"`
	Kafka   string `json:"kafka"`
	Raft    string `json:"raft"`
	// HasState is set once the node's shards hold Raft state (bootstrapped,
	// added by a leader, or restarted with data): the cluster exists.
	HasState bool `json:"state"`
	// Expect is the node's BootstrapExpect (--bootstrap-expect; 0: join only).
	Expect int `json:"expect"`
	// ClusterID is the cluster id the node's data dir records; empty while
	// it has none. Nodes refuse peers whose non-empty id differs from theirs.
	ClusterID string `json:"cid,omitempty"`
	// Proposal is the cluster id this node proposes for a bootstrap it takes
	// part in (a fresh node with Expect > 1); the bootstrap uses the
	// proposal of the lowest node id of the agreed view.
	Proposal string `json:"prop,omitempty"`
	// View is, while the node takes part in a bootstrap, the sorted ids of
	// the nodes it sees (itself included; join-only nodes without state
	// left out); after it bootstrapped, the view it bootstrapped with
	// (with its Proposal and Agreement).
	View []int32 `json:"view,omitempty"`
	// Agreement is, after the node bootstrapped, the digest of the
	// agreement it acted on (see agreementDigest): a peer still deciding
	// on the same agreement bootstraps the same configuration, and one
	// that crashed before bootstrapping its shards can show it took part
	// (see Node.participantSeat). A node that acted on an agreement
	// gossips it, with its proposal and that view, for good (node.json
	// records them), restarts included.
	Agreement string `json:"agreed,omitempty"`
	// Voters is the sorted union of the node ids that are voters in this
	// node's shard configurations: a fresh node whose id is in a stateful
	// peer's Voters is a wiped voter (ErrEmptyDataDirVoter).
	Voters []int32 `json:"voters,omitempty"`
	// VotersTruncated says Voters was left out to fit memberlist's meta
	// limit: the wiped-voter check cannot clear a node against this peer.
	VotersTruncated bool `json:"vtrunc,omitempty"`
	// Applies is fsm.LatestCommandType: the highest command type the node
	// applies (0 from releases before it was gossiped). See
	// Node.checkReplicasApply.
	Applies int `json:"fsm,omitempty"`
	// Disk is "stalled" or "failed" while the node is fenced for its disk
	// (diskfence.go): other nodes route around it. Empty when healthy, and
	// from releases before it, which peers then route to as before.
	Disk string `json:"disk,omitempty"`
	// SyncMicros is the node's sustained group-commit time, rounded up to
	// a power of two microseconds (slowdisk.go); 0 before it has one.
	SyncMicros int64 `json:"sync,omitempty"`
	// SlowDisk says the node's syncs are much slower than its peers': it
	// hands its leaderships away, and the others give it none.
	SlowDisk bool `json:"slow,omitempty"`
	// Release is the node's release (release.Version), and Levels the
	// range of release.Feature levels it supports, [min, max]: both absent
	// from release 0.1.0, which supports level 1 only (features.go).
	Release string  `json:"rel,omitempty"`
	Levels  []int16 `json:"kv,omitempty"`
	// Shards is the node's shard count (Node.ShardCount): a fresh node
	// joining the cluster adopts the count its peers holding state
	// advertise, and a multi-node bootstrap needs every node to advertise
	// the same (shardcount.go). Absent from release 0.1.0, whose nodes run
	// previousReleaseShards as far as others can tell; 0 also while a
	// fresh node, in Open, has not decided its count yet.
	Shards int32 `json:"shards,omitempty"`
}

// decodeMeta parses a peer's gossip meta; ok is false when it is not a
// kcoord meta.
func decodeMeta(b []byte) (nodeMeta, bool) {
	var nm nodeMeta
	if json.Unmarshal(b, &nm) != nil || nm.Raft == "" {
		return nodeMeta{}, false
	}
	return nm, true
}

// leaderMsg is a gossip broadcast: node leads shard as of term.
type leaderMsg struct {
	Shard int32       `json:"s"`
	Entry leaderEntry `json:"e"`
}

// errRefusedPeer is what the memberlist delegates return for a peer they
// refuse; memberlist logs it (at debug, see memberlistLog) and drops the peer.
var errRefusedPeer = errors.New("cluster: peer refused")

// gossip runs memberlist for a Node: membership (Brokers, raft addresses),
// the leader table, and the metas that bootstrap and cluster ids are decided
// on. memberlist calls the delegate methods (NodeMeta, NotifyAlive,
// NotifyMerge, NotifyJoin, ...) on its own goroutines, some with its node
// lock held: they must not call back into memberlist.
type gossip struct {
	n    *Node
	ml   *memberlist.Memberlist
	name string // this node's memberlist name
	// advertised is this node's gossip address as others reach it, read
	// once after memberlist started (its LocalNode is not safe to read
	// while UpdateNode rewrites it).
	advertised string
	// announceMu serialises UpdateNode (announce).
	announceMu sync.Mutex
	queue      *memberlist.TransmitLimitedQueue
	logger     hclog.Logger
	changed    chan struct{} // poked on membership and meta changes (the cluster loop waits on it)
	// joined is closed when a Join first succeeds: the seeds' members and
	// their metas are known from then on.
	joined     chan struct{}
	joinedOnce sync.Once
	// keys is the keyring of encrypted gossip (gossipkey.go); nil:
	// plaintext.
	keys *gossipKeys

	metaMu sync.Mutex
	self   nodeMeta // what NodeMeta advertises
	big    bool     // the meta was too large once (logged)
	// metaLimit (tests only), when positive, lowers memberlist's meta
	// limit, to exercise what an oversized meta leaves out.
	metaLimit atomic.Int64

	// known holds the last meta of every live peer, from memberlist's
	// events (reading memberlist's own node list races with its updates).
	mu      sync.Mutex
	known   map[string]nodeMeta // by memberlist node name
	refused map[string]bool     // name + cluster id of refused peers, logged already
}

// startGossip creates the memberlist, encrypted with keys unless nil, and
// starts joining the seeds in the background (a node that finds no seed
// yet keeps retrying) and, with keys, watching their file. self is the meta
// to advertise from the start. Called by Start before any shard's Raft
// starts.
func (n *Node) startGossip(self nodeMeta, keys *gossipKeys) error {
	cfg := n.cfg
	host, portStr, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("cluster: gossip addr: %w", err)
	}
	port, _ := strconv.Atoi(portStr)
	self.Applies = n.ownApplyLevel()
	self.Release, self.Levels = n.ownSupport().gossiped()
	g := &gossip{
		n: n, logger: n.logger.Named("gossip"), changed: make(chan struct{}, 1), joined: make(chan struct{}),
		self: self, known: make(map[string]nodeMeta), refused: make(map[string]bool),
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = "kcoord-" + strconv.Itoa(int(cfg.NodeID))
	g.name = mc.Name
	mc.BindAddr, mc.BindPort = host, port
	if cfg.AdvertiseGossipAddr != "" {
		ah, ap, err := net.SplitHostPort(cfg.AdvertiseGossipAddr)
		if err != nil {
			return fmt.Errorf("cluster: advertise gossip addr: %w", err)
		}
		if ips, err := net.LookupIP(ah); err == nil && len(ips) > 0 {
			ah = ips[0].String()
		}
		mc.AdvertiseAddr = ah
		mc.AdvertisePort, _ = strconv.Atoi(ap)
	}
	mc.PushPullInterval = cfg.GossipPushPullInterval
	mc.GossipInterval = 100 * time.Millisecond
	// No LZW per packet: gossip here is small (the leader table, node
	// meta), and compressing each probe, ack and broadcast made memberlist
	// the largest allocator of an idle node. Peers still read compressed
	// packets (from a node of the previous release).
	mc.EnableCompression = false
	mc.ProbeInterval = cfg.GossipProbeInterval
	mc.Delegate, mc.Events, mc.Alive, mc.Merge = g, g, g, g
	mc.Logger = log.New(newMemberlistLog(g.logger), "", 0)
	if keys != nil {
		keys.logger = g.logger
		g.keys = keys
		mc.Keyring = keys.ring
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	var created atomic.Pointer[memberlist.Memberlist]
	g.queue = &memberlist.TransmitLimitedQueue{RetransmitMult: 3, NumNodes: func() int {
		if ml := created.Load(); ml != nil {
			return ml.NumMembers()
		}
		return 1
	}}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("cluster: gossip: %w", err)
	}
	g.ml = ml
	ln := ml.LocalNode()
	g.advertised = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	created.Store(ml)
	n.gossip = g
	if keys != nil {
		primary := keys.ring.GetPrimaryKey()
		g.logger.Info("gossip encryption on", "key_file", keys.path, "keys", len(keys.ring.GetKeys()), "primary_key_id", keyID(primary))
		go g.watchKeys()
	}
	if len(cfg.Join) > 0 {
		go g.joinLoop(cfg.Join)
	}
	return nil
}

// joinLoop joins the seeds, retrying until one answers or the node stops.
// A seed that refuses this node's gossip encryption (another key, or a key
// on one side only) is logged once at warn. Runs on its own goroutine.
func (g *gossip) joinLoop(seeds []string) {
	warned := false
	for delay := 100 * time.Millisecond; !g.n.closed.Load(); delay = min(2*delay, 2*time.Second) {
		if _, err := g.ml.Join(seeds); err == nil {
			g.joinedOnce.Do(func() { close(g.joined) })
			g.poke()
			return
		} else if means := keyMismatch(err.Error()); means != "" && !warned {
			warned = true
			g.logger.Warn("gossip join refused: the seeds' gossip encryption does not match this node's gossip keys; retrying",
				"seeds", seeds, "meaning", means, "error", err)
		} else {
			g.logger.Debug("join failed; retrying", "seeds", seeds, "error", err)
		}
		select {
		case <-time.After(delay):
		case <-g.n.stop:
			return
		}
	}
}

// addr is this node's gossip address as others reach it.
func (g *gossip) addr() string { return g.advertised }

// selfMeta is the meta this node advertises.
func (g *gossip) selfMeta() nodeMeta {
	g.metaMu.Lock()
	defer g.metaMu.Unlock()
	return g.self
}

// updateSelf changes the advertised meta and reports whether it changed;
// the caller announces it.
func (g *gossip) updateSelf(f func(*nodeMeta)) bool {
	g.metaMu.Lock()
	defer g.metaMu.Unlock()
	next := g.self
	next.View, next.Voters = slices.Clone(next.View), slices.Clone(next.Voters)
	f(&next)
	if metaEqual(next, g.self) {
		return false
	}
	g.self = next
	return true
}

func metaEqual(a, b nodeMeta) bool {
	return a.Version == b.Version && a.ID == b.ID && a.Kafka == b.Kafka && a.Raft == b.Raft &&
		a.HasState == b.HasState && a.Expect == b.Expect && a.ClusterID == b.ClusterID &&
		a.Proposal == b.Proposal && a.Agreement == b.Agreement && slices.Equal(a.View, b.View) && slices.Equal(a.Voters, b.Voters) &&
		a.Applies == b.Applies && a.Disk == b.Disk && a.SyncMicros == b.SyncMicros && a.SlowDisk == b.SlowDisk &&
		a.Release == b.Release && slices.Equal(a.Levels, b.Levels) && a.Shards == b.Shards
}

// announceWait is how long announce waits for memberlist to send the new
// meta; the broadcast stays queued after that (memberlist confirms only once
// it has been retransmitted to enough peers, which takes several gossip
// intervals).
const announceWait = 20 * time.Millisecond

// announce re-gossips this node's meta after it changed. The cluster
// loop, Start and the disk watch call it, never a memberlist delegate
// (memberlist's node lock); announceMu makes them take turns, since
// memberlist's UpdateNode reads and rewrites the local node without a
// lock of its own.
func (g *gossip) announce() {
	g.announceMu.Lock()
	defer g.announceMu.Unlock()
	if err := g.ml.UpdateNode(announceWait); err != nil && !g.n.closed.Load() {
		g.logger.Trace("gossip meta update queued, not yet confirmed", "error", err)
	}
}

// broadcastLeader tells the cluster this node leads shard as of term.
func (g *gossip) broadcastLeader(shard int32, e leaderEntry) {
	b, _ := json.Marshal(leaderMsg{Shard: shard, Entry: e})
	g.queue.QueueBroadcast(simpleBroadcast(b))
}

// peers returns the live nodes' metas, this node's current one first.
func (g *gossip) peers() []nodeMeta {
	self := g.selfMeta()
	return append([]nodeMeta{self}, g.others()...)
}

// others returns the live peers' metas (not this node's), by node id.
func (g *gossip) others() []nodeMeta {
	g.mu.Lock()
	out := make([]nodeMeta, 0, len(g.known))
	for _, nm := range g.known {
		if nm.ID != g.n.cfg.NodeID {
			out = append(out, nm)
		}
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b nodeMeta) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// view is the sorted ids of the nodes this node sees, itself included, that
// count for a bootstrap: join-only nodes without state are left out.
func (g *gossip) view() []int32 {
	ids := []int32{g.n.cfg.NodeID}
	for _, p := range g.others() {
		if p.Expect > 0 || p.HasState {
			ids = append(ids, p.ID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func (g *gossip) poke() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// leave announces the departure and stops gossip.
func (g *gossip) leave(timeout time.Duration) {
	if err := g.ml.Leave(timeout); err != nil {
		g.logger.Warn("gossip leave failed", "error", err)
	}
	_ = g.ml.Shutdown()
}

// NodeMeta implements memberlist.Delegate. A meta over the limit (very long
// addresses, or very many voters) leaves out its disk's sync time, then,
// with state, its bootstrap record and then its voters (saying so in
// vtrunc), without, its voters and then its view; it logs that once.
func (g *gossip) NodeMeta(limit int) []byte {
	g.metaMu.Lock()
	defer g.metaMu.Unlock()
	if l := int(g.metaLimit.Load()); l > 0 {
		limit = min(limit, l)
	}
	m := g.self
	m.Version = metaVersion
	b, _ := json.Marshal(m)
	full := len(b)
	// What to leave out when the meta does not fit: first its disk's sync
	// time (a hint for where leaders go that grows with the load, so a
	// meta just under the limit may grow past it at any time; peers take
	// a node without one as unmeasured, and still see whether it is slow);
	// then, once the node holds state, its bootstrap record (view,
	// proposal and agreement, which only let a crashed peer of its
	// bootstrap take its seat), which matters less than its voters (the
	// wiped-voter check reads them); before, it has no voters to tell.
	dropSpeed := func() { m.SyncMicros = 0 }
	dropVoters := func() { m.Voters, m.VotersTruncated = nil, len(m.Voters) > 0 }
	dropView := func() { m.View = nil }
	dropRecord := func() { m.View, m.Proposal, m.Agreement = nil, "", "" }
	drops := []func(){dropSpeed, dropVoters, dropView}
	if m.HasState {
		drops = []func(){dropSpeed, dropRecord, dropVoters}
	}
	for _, drop := range drops {
		if len(b) <= limit {
			break
		}
		drop()
		b, _ = json.Marshal(m)
	}
	if full > limit && !g.big {
		g.big = true
		g.logger.Error("gossip meta too large: advertising less", "bytes", full, "limit", limit,
			"voters_dropped", m.VotersTruncated, "view_dropped", m.View == nil, "still_too_large", len(b) > limit)
	}
	if len(b) > limit {
		return nil
	}
	return b
}

// foreign reports whether a peer's meta names a cluster other than this
// node's (both non-empty). A node without a cluster id refuses nobody.
func (g *gossip) foreign(nm nodeMeta) bool {
	local := g.n.ClusterID()
	return local != "" && nm.ClusterID != "" && nm.ClusterID != local
}

// hidden reports whether a test hides the peer from this node.
func (g *gossip) hidden(nm nodeMeta) bool { return slices.Contains(g.n.cfg.hiddenPeers, nm.ID) }

// refuse logs, once per peer and cluster id, that a peer of another cluster
// is refused.
func (g *gossip) refuse(name string, nm nodeMeta) {
	key := name + "\x00" + nm.ClusterID
	g.mu.Lock()
	first := !g.refused[key]
	g.refused[key] = true
	g.mu.Unlock()
	if first {
		g.logger.Error("refusing gossip peer of another cluster", "peer", nm.ID, "peer_name", name, "peer_raft", nm.Raft,
			"peer_cluster_id", nm.ClusterID, "cluster_id", g.n.ClusterID())
	}
}

// tooOld reports (and logs, once per peer and level) whether a peer's
// binary does not support the level this node's replica says the cluster
// finalized: a node of an older release, started after the upgrade, is
// kept out of the cluster (no gossip, so no placement and no replica to
// panic on entries it cannot apply). Called with memberlist's node lock
// held: it reads atomics only (knownFinalized).
func (g *gossip) tooOld(name string, nm nodeMeta) bool {
	fin := g.n.knownFinalized()
	if supportOf(nm).Max >= fin {
		return false
	}
	key := name + "\x00level" + strconv.Itoa(int(fin))
	g.mu.Lock()
	first := !g.refused[key]
	g.refused[key] = true
	g.mu.Unlock()
	if first {
		g.logger.Error("refusing gossip peer too old for the cluster's finalized feature level: run this release or a later one there",
			"peer", nm.ID, "peer_name", name, "peer_release", cmp.Or(nm.Release, "0.1.0"), "peer_supports", supportOf(nm).Max,
			"feature", release.Feature, "finalized", fin)
	}
	return true
}

// NotifyAlive implements memberlist.AliveDelegate: a peer of another
// cluster (or one a test hides), or one too old for the finalized feature
// level, never becomes a member. Called by
// memberlist with its node lock held.
func (g *gossip) NotifyAlive(peer *memberlist.Node) error {
	if peer.Name == g.name {
		return nil
	}
	nm, ok := decodeMeta(peer.Meta)
	switch {
	case !ok:
		return nil
	case g.hidden(nm):
		return errRefusedPeer
	case g.foreign(nm):
		g.refuse(peer.Name, nm)
		return fmt.Errorf("%w: cluster id %s, this node's is %s", errRefusedPeer, nm.ClusterID, g.n.ClusterID())
	case g.tooOld(peer.Name, nm):
		return fmt.Errorf("%w: %s supports %s up to %d, the cluster finalized %d", errRefusedPeer, peer.Name, release.Feature, supportOf(nm).Max, g.n.knownFinalized())
	}
	return nil
}

// NotifyMerge implements memberlist.MergeDelegate: a join (push/pull with a
// seed, either side) that would bring in a node of another cluster is
// cancelled, so the joining node's Join fails.
func (g *gossip) NotifyMerge(peers []*memberlist.Node) error {
	for _, p := range peers {
		nm, ok := decodeMeta(p.Meta)
		if !ok || p.Name == g.name {
			continue
		}
		if g.foreign(nm) {
			g.refuse(p.Name, nm)
			return fmt.Errorf("%w: %s is of cluster %s, this node's is %s", errRefusedPeer, p.Name, nm.ClusterID, g.n.ClusterID())
		}
		// Only a live peer: memberlist keeps dead and departed members
		// in push/pull state for a while, and one of them, too old,
		// must not fail every join meanwhile.
		if p.State == memberlist.StateAlive && g.tooOld(p.Name, nm) {
			return fmt.Errorf("%w: %s supports %s up to %d, the cluster finalized %d", errRefusedPeer, p.Name, release.Feature, supportOf(nm).Max, g.n.knownFinalized())
		}
	}
	return nil
}

// purgeForeign forgets the peers of another cluster: called when this node
// adopts a cluster id, since peers it accepted while it had none may now
// be foreign.
func (g *gossip) purgeForeign() {
	var gone []nodeMeta
	g.mu.Lock()
	for name, nm := range g.known {
		if g.foreign(nm) {
			delete(g.known, name)
			gone = append(gone, nm)
		}
	}
	g.mu.Unlock()
	for _, nm := range gone {
		g.logger.Error("forgetting gossip peer of another cluster", "peer", nm.ID, "peer_cluster_id", nm.ClusterID, "cluster_id", g.n.ClusterID())
		g.n.members.remove(nm.ID)
		g.n.leaders.forgetNode(nm.ID)
	}
}

// deathMsgPrefix starts a death broadcast: the prefix, then the dead
// peer's Raft address. (Leader broadcasts are JSON objects; a release that
// knows no death broadcast fails to decode one and ignores it.)
const deathMsgPrefix = 'd'

// broadcastDeath tells the cluster that the Raft peer at addr refused a
// connection: each receiver probes it before believing it (peerDeaths).
func (g *gossip) broadcastDeath(addr string) {
	g.queue.QueueBroadcast(simpleBroadcast(append([]byte{deathMsgPrefix}, addr...)))
}

// NotifyMsg implements memberlist.Delegate: a leader or death broadcast.
// It must not block (memberlist's packet handler calls it).
func (g *gossip) NotifyMsg(b []byte) {
	if len(b) > 1 && b[0] == deathMsgPrefix {
		// Only a member's Raft address is probed: a garbled or foreign
		// message must not make the cluster dial anything else.
		if addr := string(b[1:]); addr != g.n.mux.Advertise() && g.n.members.hasRaftAddr(addr) {
			g.n.mux.Deaths().Suspect(addr)
		}
		return
	}
	var m leaderMsg
	if json.Unmarshal(b, &m) == nil && g.live(m.Entry.Node) && g.n.plausibleLeader(m.Shard, m.Entry) {
		g.n.leaders.update(m.Shard, m.Entry)
	}
}

// live reports whether a node is in the membership view; gossip about
// nodes that left is stale and must not bring their entries back.
func (g *gossip) live(node int32) bool {
	_, ok := g.n.members.broker(node)
	return ok
}

// GetBroadcasts implements memberlist.Delegate.
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte {
	return g.queue.GetBroadcasts(overhead, limit)
}

// LocalState implements memberlist.Delegate: the whole leader table.
func (g *gossip) LocalState(bool) []byte { return g.n.leaders.encode() }

// MergeRemoteState implements memberlist.Delegate.
func (g *gossip) MergeRemoteState(b []byte, _ bool) {
	g.n.leaders.merge(b, func(shard int32, e leaderEntry) bool {
		return g.live(e.Node) && g.n.plausibleLeader(shard, e)
	})
}

// NotifyJoin implements memberlist.EventDelegate.
func (g *gossip) NotifyJoin(node *memberlist.Node) { g.upsert(node) }

// NotifyUpdate implements memberlist.EventDelegate.
func (g *gossip) NotifyUpdate(node *memberlist.Node) { g.upsert(node) }

// NotifyLeave implements memberlist.EventDelegate.
func (g *gossip) NotifyLeave(node *memberlist.Node) {
	g.mu.Lock()
	nm, known := g.known[node.Name]
	delete(g.known, node.Name)
	g.mu.Unlock()
	if !known || nm.ID == g.n.cfg.NodeID {
		return
	}
	g.logger.Info("node left", "node_id", nm.ID)
	g.n.members.remove(nm.ID)
	g.n.mux.Deaths().Forget(nm.Raft)
	g.n.leaders.forgetNode(nm.ID)
	g.poke()
}

// upsert records a live peer's meta (not a foreign or hidden one).
func (g *gossip) upsert(node *memberlist.Node) {
	if node.Name == g.name {
		return
	}
	nm, ok := decodeMeta(node.Meta)
	if !ok || g.hidden(nm) {
		return
	}
	if g.foreign(nm) {
		g.refuse(node.Name, nm)
		return
	}
	g.mu.Lock()
	g.known[node.Name] = nm
	g.mu.Unlock()
	if _, known := g.n.members.broker(nm.ID); !known {
		g.logger.Info("node joined", "node_id", nm.ID, "kafka", nm.Kafka, "raft", nm.Raft)
	}
	if g.n.members.setMeta(Broker{NodeID: nm.ID, KafkaAddr: nm.Kafka}, nm.Raft, DiskState(nm.Disk), nm.SyncMicros, nm.SlowDisk) {
		if nm.Disk != "" {
			g.logger.Warn("node fenced itself for its disk: routing around it", "node_id", nm.ID, "disk", nm.Disk)
		} else {
			g.logger.Info("node unfenced: its disk answers again", "node_id", nm.ID)
		}
		g.n.routing.fire()
	}
	g.n.applies.record(nm.ID, nm.Applies)
	g.n.support.record(nm.ID, supportOf(nm))
	g.poke()
}

// simpleBroadcast is a memberlist.Broadcast of fixed bytes.
type simpleBroadcast []byte

func (b simpleBroadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b simpleBroadcast) Message() []byte                       { return b }
func (b simpleBroadcast) Finished()                             {}

// peerDied is told by the mux's PeerDeaths of a newly proven death: it
// gossips it, so that nodes with no connection to the dead peer (which
// would notice nothing until memberlist's failure detection, seconds
// later) check it now. Runs on the goroutine that proved the death.
func (n *Node) peerDied(addr string) {
	if n.gossip != nil && !n.closed.Load() {
		n.gossip.broadcastDeath(addr)
	}
}
