package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/nodestore"
	"github.com/kcoord/kcoord/release"
)

const (
	// logCacheSize is the number of recent log entries cached in memory per
	// shard, in front of the bolt store.
	logCacheSize = 512
	// notifyBuffer is the leadership notification buffer per shard, so Raft
	// rarely waits for OnLeadership.
	notifyBuffer = 64
	// boltOpenTimeout bounds waiting for another process's lock on a shard's
	// bolt file (a second node on the same DataDir).
	boltOpenTimeout = time.Second
	// startParallelism bounds how many shards start at once.
	startParallelism = 16
)

// Broker is a node as Kafka clients see it.
type Broker struct {
	NodeID    int32
	KafkaAddr string // host:port
}

// Node is one kcoord node: a Raft instance per group shard plus the metadata
// shard, all sharing one TCP port through a Mux, and (with GossipAddr) the
// memberlist gossip that finds peers, bootstraps the cluster and carries
// the leader table.
type Node struct {
	cfg    Config
	logger hclog.Logger
	// leaderLog writes this node's leadership changes, one line per burst.
	leaderLog *leaderChangeLog
	mux       *raftnet.Mux
	admin     *raftnet.StreamLayer // node-to-node admin calls (admin.go)
	// hubs coalesce the shards' heartbeats (unless HeartbeatReuse is
	// off) and carry every shard's AppendEntries to a peer on one stream
	// (unless Config.SeparateAppendStreams).
	hubs *raftnet.Hubs
	// snapshots throttles the snapshots every shard of the node sends
	// (nil: unthrottled).
	snapshots *raftnet.SnapshotThrottle
	// made are every shard Open made, meta first, then the group shards
	// by id; Node.Shard hands them out before they run.
	made []*Shard
	// meta, shards and all are the shards once startShards started
	// them (nil before): what the node's own loops and routing use.
	meta   *Shard
	shards []*Shard // group shards by id
	all    []*Shard // meta first, then group shards

	members memberTable
	// shardsStarted is set once startShards published n.meta and
	// n.shards: gossip, which runs before, reads them only after.
	shardsStarted atomic.Bool
	applies       applyLevels
	// support is what each node gossiped of the feature levels it
	// supports; writeLevel is the level this node writes (features.go);
	// fatal is closed when the node cannot go on (Fatal).
	support    gossipedBy[Support]
	finalized  atomic.Int32 // the finalized level node.json recorded at start (knownFinalized)
	writeLevel atomic.Int32
	fatal      fatalState
	// featureWake fires when the metadata replica's finalized level
	// changes (featureLoop).
	featureWake *signal
	// featureLoopDone is done once the feature loop Start began has
	// returned: Shutdown waits for it, so no node.json write outlives
	// the node.
	featureLoopDone sync.WaitGroup
	// diskWatchDone is done once the disk watch Start began has returned:
	// Shutdown waits for it before it stops the shards, whose
	// notification channels a fence sends on.
	diskWatchDone sync.WaitGroup
	// fenceHook, when set (tests only), runs in every fence for the disk
	// once every shard is fenced (its election timers parked), before the
	// hand-offs, on the disk watch's goroutine. Placed earlier, a hook that
	// holds the fence lets a follower cut off from its leader stand for
	// election, and hashicorp/raft panics when it cannot store the term.
	fenceHook atomic.Pointer[func()]
	leaders   leaderTable
	// routing fires whenever a shard's routing may have changed (see
	// Shard.RoutingChanges).
	routing *signal
	// disk is whether the node is fenced for its disk (diskfence.go).
	disk *diskFence
	// diskWake makes the disk watch look now (the node store failed).
	diskWake *signal
	// syncs are the node store's group-commit times since the disk
	// watch's last look; slowDisk says the watch judged them much slower
	// than the peers' (slowdisk.go), and handingOff that its hand-off
	// runs.
	syncs      syncStats
	slowDisk   atomic.Bool
	handingOff atomic.Bool
	gossip     *gossip // nil without GossipAddr; set before any shard starts
	// hasState is set once this node's shards hold Raft state
	// (bootstrapped, replicated to, or restarted with data).
	hasState atomic.Bool
	stop     chan struct{} // closed by Shutdown: background loops end
	// lastLeaderGain is when this node last won a shard's leadership (Unix
	// nanoseconds); balancing waits for quiet after elections.
	lastLeaderGain atomic.Int64
	// movesDone counts replicas this node promoted to voter as a shard's
	// leader (kcoord_replica_moves_total).
	movesDone atomic.Int64
	// metaAppliedTerm is the metadata group's last term in which this
	// node, leading it, applied a barrier (metaTermApplied): its FSM holds
	// every entry of earlier terms.
	metaAppliedTerm atomic.Uint64
	// metaSync coalesces the metadata read barrier (metasync.go).
	metaSync metaSync
	// oldReleaseWarned holds the ids of nodes found to be of a release
	// that cannot confirm metadata changes (logged once each).
	oldReleaseWarned sync.Map

	// logStore is LogStoreNode (nodeStore holds every shard's log) or
	// LogStoreShard (one raft-boltdb file per shard).
	logStore  string
	nodeStore *nodestore.Store
	// opened are the shard stores Open opened and has not yet handed to
	// a running shard; abort closes them.
	opened []*shardStores

	// idMu serialises changes of ident and its writes to node.json.
	idMu sync.Mutex
	// ident is node.json as this node knows it; onDisk is what the file
	// holds (the zero value before the first write of a fresh data dir).
	ident, onDisk identity
	// clusterID mirrors ident.ClusterID for lock-free readers (gossip
	// delegates, ClusterID).
	clusterID atomic.Value // string
	// boot is the multi-node bootstrap state; the cluster loop owns it.
	boot bootState
	// placed are the shards a multi-node bootstrap placed on this node
	// (nil without one): Ready waits until each one's configuration has
	// arrived, including those a peer bootstrapped first.
	placed atomic.Pointer[[]*Shard]
	// once holds the keys of once-only log lines (refusals, bootstrap
	// problems).
	once sync.Map

	// initialised is whether node.json existed when Open read it;
	// shardsSet whether Config.Shards was set (not left to the data dir,
	// the cluster or DefaultShards); seedsAnswered whether a seed
	// answered Open's wait for them (joiningShards), which only a fresh
	// node with Join runs; gossipKeys are the gossip key file's keys
	// (nil: no encryption); raftTLS is whether the Raft port speaks
	// mutual TLS. Open sets them for Start.
	initialised   bool
	shardsSet     bool
	seedsAnswered bool
	gossipKeys    *gossipKeys
	raftTLS       bool
	starting      atomic.Bool // Start was called

	closed       atomic.Bool
	leaving      atomic.Bool // Leave ran: Brokers leaves this node out
	shutdownOnce sync.Once
	shutdownErr  error
}

// NewNode is Open followed by Start: a node that runs at once, for
// callers that build nothing on its shards before they may lead.
func NewNode(cfg Config) (*Node, error) {
	n, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.Start(); err != nil {
		return nil, err
	}
	return n, nil
}

// Open prepares a node without starting it: it loads the gossip key and
// Raft TLS files, checks and (on an initialised data dir) upgrades
// node.json, binds cfg.RaftAddr (no shard has a stream on it yet, so
// Raft traffic for a shard is refused until Start registers it; the
// admin stream already answers what needs no Raft, such as inspect and
// replica queries), decides the shard count (ShardCount: the recorded
// one, or for a fresh node the configured one, DefaultShards, or its
// seeds' cluster's; see shardcount.go), opens every shard's stores and
// makes every Shard, MetaShard included, with its FSM. A fresh node with
// Join joins gossip here, to learn the count before it writes anything
// (waiting for its seeds at most JoinTimeout, as Start otherwise would);
// any other node joins gossip in Start. Nothing runs that can deliver
// leadership: no Raft. Until Start has
// started a Shard's Raft, the shard answers as one this node does not
// lead (see Shard), so a caller can build on Node.Shard before Start,
// and must call Start or Shutdown after (not both at once: Shutdown
// during Start is not supported; the server holds one lock across
// both). Open runs on the caller's goroutine.
func Open(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger.Named("cluster")
	// The key file and the TLS files load before anything binds or
	// changes on disk: a node does not start with keys or certificates
	// it cannot read.
	gossipKeys, err := loadGossipKeys(cfg.GossipKeyFile)
	if err != nil {
		return nil, err
	}
	muxLogger := cfg.Logger.Named("raft-mux")
	raftTLS, err := raftnet.LoadTLS(cfg.RaftTLSCertFile, cfg.RaftTLSKeyFile, cfg.RaftTLSCAFile, muxLogger)
	if err != nil {
		return nil, err
	}
	id, initialised, err := readIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := checkStartLevel(cfg.DataDir, id); err != nil {
		return nil, err
	}
	// The shard count: the recorded one, or (a fresh node) decided below,
	// before anything is written (shardcount.go).
	shardsSet := cfg.Shards != 0
	if initialised {
		if cfg.Shards, err = recordedShards(&cfg, id); err != nil {
			return nil, err
		}
	}
	logStore := cfg.LogStore
	if initialised {
		// A data dir keeps the log store it was created with; node.json
		// from before the choice existed means per-shard files.
		logStore = cmp.Or(id.LogStore, LogStoreShard)
		if id.Version < identityVersion {
			// Before anything of the data dir changes (the node store's
			// import removes raft.db): see identityVersion.
			id.Version = identityVersion
			if err := writeIdentity(cfg.DataDir, id); err != nil {
				return nil, err
			}
		}
	}

	mux, err := raftnet.ListenMuxTLS(cfg.RaftAddr, cfg.AdvertiseRaftAddr, raftTLS, muxLogger)
	if err != nil {
		return nil, err
	}
	// Until the shards are open and show whether this node holds Raft
	// state, a node without a cluster id admits no cluster's Raft
	// traffic: a connection admitted now would stay open (raft pools its
	// streams; the beat stream is one connection) after the check below
	// closes the door.
	mux.SetClusterPending(id.ClusterID == "")
	n := &Node{cfg: cfg, logger: logger, initialised: initialised, shardsSet: shardsSet, gossipKeys: gossipKeys, raftTLS: raftTLS != nil, leaderLog: &leaderChangeLog{logger: logger}, mux: mux, stop: make(chan struct{}), logStore: logStore, ident: id, routing: newSignal(), disk: newDiskFence(), diskWake: newSignal()}
	n.applies.own = cfg.PlayApplyLevel
	n.fatal.done = make(chan struct{})
	n.featureWake = newSignal()
	n.writeLevel.Store(int32(release.Level1))
	n.finalized.Store(int32(release.Level(id.Features[release.Feature])))
	mux.Deaths().Watch(n.peerDied, n.routing.fire)
	if n.admin, err = mux.Listen(raftnet.AdminStream); err != nil {
		_ = mux.Close()
		return nil, err
	}
	go n.serveAdmin(n.admin)
	if n.snapshots, err = raftnet.NewSnapshotThrottle(cfg.SnapshotThrottleRate); err != nil {
		_ = mux.Close()
		return nil, err
	}
	if n.hubs, err = raftnet.StartHubs(mux, raftnet.HubConfig{
		LocalID:                serverID(cfg.NodeID),
		HeartbeatTimeout:       cfg.HeartbeatTimeout,
		LeaderHeartbeatTimeout: cfg.LeaderHeartbeatTimeout,
		TransportTimeout:       cfg.TransportTimeout,
		HeartbeatReuse:         cfg.HeartbeatReuse,
		SeparateAppendStreams:  cfg.SeparateAppendStreams,
		Logger:                 logger,
	}); err != nil {
		_ = mux.Close()
		return nil, err
	}
	if initialised {
		n.onDisk = id
	}
	n.clusterID.Store(id.ClusterID)
	mux.SetClusterID(id.ClusterID)
	if !initialised {
		shards := cmp.Or(cfg.Shards, DefaultShards)
		if cfg.GossipAddr != "" && len(cfg.Join) > 0 {
			if shards, err = n.joiningShards(); err != nil {
				n.abort()
				return nil, err
			}
		}
		n.cfg.Shards = shards
		id = identity{Version: identityVersion, NodeID: cfg.NodeID, Shards: shards, LogStore: logStore}
		n.idMu.Lock()
		n.ident = id
		n.idMu.Unlock()
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
			n.abort()
			return nil, fmt.Errorf("cluster: data dir: %w", err)
		}
	}
	if logStore == LogStoreNode {
		if n.nodeStore, err = nodestore.Open(filepath.Join(cfg.DataDir, "wal"), nodestore.Options{
			Timeout: boltOpenTimeout,
			Import:  filepath.Join(cfg.DataDir, "raft.db"),
			Logger:  logger.Named("nodestore"),
			ObserveSync: func(d time.Duration) {
				n.syncs.observe(d)
				if cfg.ObserveLogSync != nil {
					cfg.ObserveLogSync(d)
				}
			},
			UnsafeSkipSync: cfg.UnsafeSkipSync,
			OnFail:         func(error) { n.diskWake.fire() },
		}); err != nil {
			n.abort()
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	if err := n.openShards(); err != nil {
		n.abort()
		return nil, err
	}
	if g := n.gossip; g != nil && g.updateSelf(func(m *nodeMeta) { m.Shards, m.HasState = n.cfg.Shards, n.hasState.Load() }) {
		g.announce() // gossip started before the count was decided and the stores showed state (joiningShards)
	}
	n.makeShards()
	// Until it knows its cluster, a node without Raft state lets no
	// cluster's Raft traffic reach its (empty) logs.
	mux.SetClusterPending(id.ClusterID == "" && !n.hasState.Load())
	n.members.set(Broker{NodeID: cfg.NodeID, KafkaAddr: cfg.KafkaAddr}, mux.Advertise())
	if cfg.BootstrapExpect > 1 && !n.hasState.Load() && id.ClusterID == "" {
		// No shard holds Raft state (raft.HasExistingState): the node has
		// not bootstrapped, and takes part with the proposal node.json
		// records, if any, so that after a crash it is still the node its
		// peers may have agreed on. A new one is recorded before the
		// node gossips it: here on an initialised data dir, below (with
		// the rest of node.json) on a fresh one.
		if err := n.boot.begin(id.Proposal); err != nil {
			n.abort()
			return nil, err
		}
		n.setProposal(n.boot.proposal)
		if initialised {
			if err := n.persistIdentity(); err != nil {
				n.abort()
				return nil, err
			}
		}
	}
	return n, nil
}

// Start runs what Open prepared: it joins gossip, decides what the node
// is to its cluster, and starts a Raft instance per shard plus MetaShard.
// It does not wait for leaders: see WaitReady.
//
// On an empty DataDir (no node.json) with Join set, Open has waited (at
// most JoinTimeout) for a seed to answer, and Start checks what the seeds
// gossip before it starts Raft: it refuses to start (ErrEmptyDataDirVoter)
// when its node id is a voter of the seeds' live cluster, returns
// ErrAmbiguousJoin when the seeds belong to more than one cluster and
// ErrShardCountMismatch when their cluster runs another shard count than
// the node opened, and adopts the cluster id of the seeds' cluster. With
// BootstrapExpect 1 and no live cluster found, every shard is bootstrapped
// as a single-voter cluster under a new cluster id. Once node.json records
// the node, Start never bootstraps again; a multi-node bootstrap happens
// later, in the cluster loop (see BootstrapExpect).
//
// Start runs on the caller's goroutine, once; leadership is delivered
// (Config.OnLeadership) from the moment a shard's Raft starts, before
// Start returns. When it fails, the node is shut down.
func (n *Node) Start() error {
	if n.closed.Load() {
		return ErrShutdown
	}
	if !n.starting.CompareAndSwap(false, true) {
		return ErrStarted
	}
	cfg, logger, initialised := &n.cfg, n.logger, n.initialised
	if cfg.GossipAddr != "" && n.gossip == nil { // a fresh node with Join started it in Open
		if err := n.startGossip(n.initialMeta(), n.gossipKeys); err != nil {
			n.abort()
			return err
		}
	}

	bootstrapAlone, err := n.prepare(!initialised)
	if err != nil {
		n.abort()
		return err
	}
	if n.ClusterID() != "" && n.boot.active {
		// It joined the seeds' cluster: no bootstrap to take part in, and
		// no proposal to record (none was gossiped).
		n.boot = bootState{}
		n.setProposal("")
	}
	if !initialised && !bootstrapAlone {
		// Written before any Raft runs: from now on the data dir is not
		// empty, and AwaitingPeers says whether its check against the
		// seeds is still to be done.
		if err := n.persistIdentity(); err != nil {
			n.abort()
			return err
		}
	}
	start := time.Now()
	if err := n.startShards(bootstrapAlone); err != nil {
		n.abort()
		return err
	}
	if !initialised && bootstrapAlone {
		// Written after the bootstrap: a crash in between leaves no
		// node.json, and the next start bootstraps again (shards that
		// hold state already are skipped).
		if err := n.persistIdentity(); err != nil {
			n.abort()
			return err
		}
	}
	bootstrapped := 0
	for _, s := range n.all {
		if s.bootstrapped {
			bootstrapped++
		}
		if s.bootstrapped || s.hadState {
			n.hasState.Store(true)
		}
	}
	if n.gossip == nil && n.hasState.Load() && n.ClusterID() == "" {
		n.mintIfLowestVoter(nil) // a single node from before cluster ids
	}
	if n.nodeStore != nil && cfg.MaxSyncDuration > 0 {
		w := &diskWatch{store: n.nodeStore, max: cfg.MaxSyncDuration, hold: max(time.Second, 2*cfg.HeartbeatTimeout),
			speed: slowJudge{floor: cmp.Or(cfg.slowSyncFloor, defaultSlowSyncFloor)}}
		n.diskWatchDone.Go(func() { n.diskWatchLoop(w) })
	}
	if g := n.gossip; g != nil {
		n.refreshMeta()
		go n.clusterLoop()
		go n.balanceLoop()
		go n.placementLoop()
	}
	n.writeLevel.Store(int32(n.writeLevelFor(n.FinalizedLevel())))
	n.featureLoopDone.Go(n.featureLoop)
	logger.Info("node started", "node_id", cfg.NodeID, "cluster_id", cmp.Or(n.ClusterID(), "none yet"),
		"raft_addr", n.mux.Advertise(), "raft_tls", n.raftTLS, "gossip_encrypted", n.gossipKeys != nil, "kafka_addr", cfg.KafkaAddr, "shards", cfg.Shards,
		"bootstrapped", bootstrapped, "elapsed", time.Since(start))
	return nil
}

// shardStores are a shard's opened stores, before its Raft starts.
type shardStores struct {
	id       int32
	dir      string
	store    shardLogStore
	logs     *raft.LogCache
	snaps    *raft.FileSnapshotStore
	existing bool // raft.HasExistingState
}

// openShards opens the stores of every shard (MetaShard first) and records
// whether any holds Raft state. Called by Open before gossip starts, so
// the node's first gossip meta says whether it holds state.
func (n *Node) openShards() error {
	ids := []int32{MetaShard}
	for i := range n.cfg.Shards {
		ids = append(ids, i)
	}
	for _, id := range ids {
		st, err := n.openShard(id)
		if err != nil {
			return fmt.Errorf("cluster: open shard %d: %w", id, err)
		}
		n.opened = append(n.opened, st)
		if st.existing {
			n.hasState.Store(true)
		}
	}
	return nil
}

func (n *Node) openShard(id int32) (*shardStores, error) {
	cfg := &n.cfg
	dir := shardDir(cfg.DataDir, id)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	store, err := n.openShardStore(id, dir)
	if err != nil {
		return nil, err
	}
	st := &shardStores{id: id, dir: dir, store: store}
	if st.logs, err = raft.NewLogCache(logCacheSize, store); err == nil {
		st.snaps, err = raft.NewFileSnapshotStoreWithLogger(dir, cfg.SnapshotRetain, cfg.RaftLogger.Named("snapshots").With("shard", id))
	}
	if err == nil {
		st.existing, err = raft.HasExistingState(st.logs, store, st.snaps)
	}
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	return st, nil
}

// makeShards makes a Shard for each shard Open opened, with its FSM, in
// n.made: not running until startShard. Called by Open.
func (n *Node) makeShards() {
	cfg := &n.cfg
	n.made = make([]*Shard, len(n.opened))
	for i, st := range n.opened {
		var fsm raft.FSM
		if st.id == MetaShard {
			fsm = cfg.NewMetaFSM()
			if fn, ok := fsm.(finalizedNotifier); ok {
				fn.OnFinalized(n.featureWake.fire)
			}
		} else {
			fsm = cfg.NewShardFSM(st.id)
		}
		rc := cfg.raftConfig(st.id)
		n.made[i] = &Shard{
			ID:              st.id,
			FSM:             fsm,
			logger:          n.logger,
			localID:         rc.LocalID,
			leaseTimeout:    rc.LeaderLeaseTimeout,
			heartbeat:       rc.HeartbeatTimeout,
			election:        rc.ElectionTimeout,
			leaderHeartbeat: cfg.LeaderHeartbeatTimeout,
			deaths:          n.mux.Deaths(),
			disk:            n.disk,
			writeLevel:      &n.writeLevel,
			peers:           &n.members,
			routing:         n.routing,
			leaders:         &n.leaders,
			notifyCh:        make(chan bool, notifyBuffer),
			leaderDone:      make(chan struct{}),
			hadState:        st.existing,
		}
	}
}

// startShards starts the Raft of every opened shard, bootstrapping each
// one without state as a single-voter cluster when bootstrapAlone.
func (n *Node) startShards(bootstrapAlone bool) error {
	stores := n.opened
	started := make([]*Shard, len(stores))
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	sem := make(chan struct{}, startParallelism)
	for i := range stores {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = n.startShard(n.made[i], stores[i], bootstrapAlone)
			if errs[i] == nil {
				started[i] = n.made[i]
				stores[i] = nil // the shard owns its store now
			}
		}()
	}
	wg.Wait()
	n.all = slices.DeleteFunc(started, func(s *Shard) bool { return s == nil })
	n.opened = slices.DeleteFunc(stores, func(st *shardStores) bool { return st == nil })
	if err := errors.Join(errs...); err != nil {
		return err
	}
	n.meta, n.shards = n.all[0], n.all[1:]
	n.shardsStarted.Store(true)
	return nil
}

// startShard bootstraps shard s if allowed and it has no state, and
// starts its Raft. On success s owns st's store and runs.
func (n *Node) startShard(s *Shard, st *shardStores, bootstrap bool) (err error) {
	cfg := &n.cfg
	id := st.id
	defer func() {
		if err != nil {
			err = fmt.Errorf("cluster: start shard %d: %w", id, err)
		}
	}()
	trans, err := raftnet.NewTransport(n.mux, n.hubs, id, raftnet.TransportConfig{
		MaxPool:          cfg.TransportMaxPool,
		Timeout:          cfg.TransportTimeout,
		Logger:           cfg.RaftLogger.Named("net").With("shard", id),
		HeartbeatReuse:   cfg.HeartbeatReuse,
		HeartbeatTimeout: cfg.HeartbeatTimeout,
		PipelineAppends:  cfg.PipelineAppends,
		SnapshotThrottle: n.snapshots,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = trans.Close()
		}
	}()

	rc := cfg.raftConfig(id)
	rc.NotifyCh = s.notifyCh

	bootstrapped := false
	switch {
	case !st.existing && bootstrap:
		conf := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter,
			ID:       rc.LocalID,
			Address:  raft.ServerAddress(n.mux.Advertise()),
		}}}
		if err := raft.BootstrapCluster(rc, st.logs, st.store, st.snaps, trans, conf); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		bootstrapped = true
	case !st.existing:
		n.logger.Debug("shard has no raft state; waiting for a bootstrap or a leader", "shard", id)
	}

	r, err := raft.NewRaft(rc, s.FSM, st.logs, st.store, st.snaps, trans)
	if err != nil {
		return err
	}
	trans.SetRaft(r)
	s.Raft, s.store, s.trans, s.bootstrapped = r, st.store, trans, bootstrapped
	s.stopObserver = s.registerLeaderObserver()
	// From here on the shard's methods use its Raft (Shard.running).
	s.running.Store(true)
	go s.leadershipLoop(func(id int32, leader bool) {
		n.leaderLog.note(id, leader, !leader && s.handedOffRecently())
		n.localLeadership(s, leader)
		if cfg.OnLeadership != nil {
			cfg.OnLeadership(id, leader)
		}
	})
	if !cfg.DisableElectionNudge {
		s.nudgeElection()
	}
	return nil
}

// shardLogStore is what a shard's Raft keeps its log and term in.
type shardLogStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// openShardStore opens a shard's log and stable store: a view of the node
// store, or its own raft-boltdb file.
func (n *Node) openShardStore(id int32, dir string) (shardLogStore, error) {
	if n.nodeStore != nil {
		ss, err := n.nodeStore.Shard(id)
		if err != nil {
			return nil, err
		}
		return nopCloser{ss}, nil
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("open raft.db (is another node using this data dir?): %w", err)
	}
	return store, nil
}

// nopCloser is a node-store view: the node closes the shared file.
type nopCloser struct{ *nodestore.ShardStore }

func (nopCloser) Close() error { return nil }

// abort stops whatever Open and Start started: gossip, running shards, stores not
// handed to a shard yet, the mux. It is a shutdown, under shutdownOnce: a
// Shutdown after a failed Start does nothing more.
func (n *Node) abort() {
	n.shutdownOnce.Do(func() {
		n.closed.Store(true)
		close(n.stop)
		// A fence under way finishes first: it sends on the shards'
		// notification channels, which their shutdown closes.
		n.diskWatchDone.Wait()
		if n.gossip != nil {
			n.gossip.leave(200 * time.Millisecond) // peers need not wait for a failure probe
		}
		var wg sync.WaitGroup
		for _, s := range n.all {
			if s != nil {
				wg.Add(1)
				go func() { defer wg.Done(); _ = s.shutdown() }()
			}
		}
		wg.Wait()
		for _, st := range n.opened {
			_ = st.store.Close()
		}
		n.hubs.Close()
		_ = n.mux.Close()
		if n.nodeStore != nil {
			_ = n.nodeStore.Close()
		}
	})
}

// ID is this node's id.
func (n *Node) ID() int32 { return n.cfg.NodeID }

// Self is this node as a Broker.
func (n *Node) Self() Broker { return Broker{NodeID: n.cfg.NodeID, KafkaAddr: n.cfg.KafkaAddr} }

// RaftAddr is the advertised address of this node's Raft listener, the
// raft.ServerAddress of this node in every shard.
func (n *Node) RaftAddr() string { return n.mux.Advertise() }

// Faults is the fault injector of this node's Raft connections (tests).
func (n *Node) Faults() *raftnet.Faults { return n.mux.Faults() }

// Shard returns group shard id, or the metadata shard for MetaShard; nil if
// there is no such shard. It is there from Open on: before Start has
// started its Raft, the shard leads nothing (see Shard). Any goroutine.
func (n *Node) Shard(id int32) *Shard {
	switch {
	case id == MetaShard && len(n.made) > 0:
		return n.made[0]
	case id >= 0 && int(id)+1 < len(n.made):
		return n.made[id+1]
	}
	return nil
}

// startedShard is Shard once startShards started the shards, nil
// before: what routing and the node's loops look at.
func (n *Node) startedShard(id int32) *Shard {
	switch {
	case id == MetaShard:
		return n.meta
	case id >= 0 && int(id) < len(n.shards):
		return n.shards[id]
	}
	return nil
}

// Shards returns the group shards in id order (not MetaShard).
func (n *Node) Shards() []*Shard { return slices.Clone(n.shards) }

// Brokers returns the live nodes this node knows of, ordered by node id,
// leaving out those whose death is proven (peerDeaths) while gossip still
// lists them, so that Metadata does not hand clients a dead broker to dial,
// and this node itself once it is leaving (Leave). A single node knows only
// itself.
func (n *Node) Brokers() []Broker {
	out := n.members.brokers(n.mux.Deaths())
	if (n.leaving.Load() || n.disk.fenced()) && len(out) > 1 {
		out = slices.DeleteFunc(out, func(b Broker) bool { return b.NodeID == n.cfg.NodeID })
	}
	return out
}

// LeaderOf returns the broker to send shard's group requests to: from this
// node's own Raft instance when it replicates the shard, else from the
// leader table gossip maintains. While a replicated shard settles
// (Shard.Settling: the leader this node followed is gone or going, or this
// node leads) it is this node, a live replica whose coordinator holds the
// requests until the election ends, rather than a leader that may refuse
// the client's dial (franz-go ends a member's session when its heartbeat
// cannot dial the coordinator). A leader whose death is proven, or that
// this follower has been cut off from for longer than an election takes,
// is not named at all. A replica that has heard from no leader since it
// started (its leader not yet back to it) names the leader gossip reports.
func (n *Node) LeaderOf(shard int32) (Broker, bool) {
	s := n.startedShard(shard)
	if s == nil || n.closed.Load() {
		return Broker{}, false
	}
	if n.disk.fenced() {
		// Its own Raft may still say it leads; the leaders elected
		// meanwhile gossip their claims.
		return n.gossipedLeader(shard, 0)
	}
	if s.replicated() {
		// The metadata shard's requests (CreateTopics, ...) are not held:
		// naming this node as its controller would only earn the client
		// NOT_CONTROLLER. A leaving node names the real leaders only.
		if s.ID != MetaShard && !n.leaving.Load() && s.Settling() {
			return n.Self(), true
		}
		addr, id := s.Raft.LeaderWithID()
		if id == "" {
			// Raft knows no leader, and nothing settles here. Two replicas
			// name the leader gossip reports for their current term or a
			// later one, which beats no answer:
			//   - one that has heard from no leader since it started (its
			//     leader still backs off its heartbeats to it after a
			//     restart);
			//   - a non-voter, which never leads: one removed without
			//     hearing of it (Raft sends the removing entry once, best
			//     effort) is left with no leader for good.
			// A voter after an election timeout names no one, as before:
			// the gossiped leader may be the dead one.
			if s.Raft.LastContact().IsZero() || !s.votes() {
				return n.gossipedLeader(shard, s.Raft.CurrentTerm())
			}
			return Broker{}, false
		}
		if s.leaderDead(addr, s.Raft.LastContact()) {
			return Broker{}, false
		}
		if id != s.localID && time.Since(s.Raft.LastContact()) > n.cfg.HeartbeatTimeout/2 {
			return Broker{}, false // cut off for longer than an election takes
		}
		nodeID, err := strconv.ParseInt(string(id), 10, 32)
		if err != nil {
			return Broker{}, false
		}
		return n.members.routable(int32(nodeID))
	}
	return n.gossipedLeader(shard, 0)
}

// gossipedLeader is the leader table's leader of shard as of minTerm or
// later, unless that node is proven dead or not a live member, or is this
// node (whose own Raft says it does not lead: the entry is from before a
// restart).
func (n *Node) gossipedLeader(shard int32, minTerm uint64) (Broker, bool) {
	e, ok := n.leaders.get(shard)
	if !ok || e.Term < minTerm || e.Node == n.cfg.NodeID || n.members.dead(e.Node, n.mux.Deaths()) {
		return Broker{}, false
	}
	return n.members.routable(e.Node)
}

// localLeadership records a leadership change of one of this node's shards
// in the leader table and gossips it. Runs on the shard's leadership
// goroutine.
func (n *Node) localLeadership(s *Shard, leader bool) {
	if !leader {
		return
	}
	n.lastLeaderGain.Store(time.Now().UnixNano())
	e := leaderEntry{Node: n.cfg.NodeID, Term: s.Raft.CurrentTerm()}
	if n.leaders.update(s.ID, e) && n.gossip != nil {
		n.gossip.broadcastLeader(s.ID, e)
	}
}

// Ready reports whether this node can serve. A node holding replicas is
// ready when every shard it replicates, MetaShard included, has a known
// leader (and, right after a multi-node bootstrap, every shard placed on it
// has its configuration). A member without replicas (joined with Join after the cluster
// formed) is ready once it has the cluster's id and knows a live leader of
// every shard from the leader table: it answers Metadata and
// FindCoordinator and redirects group requests.
func (n *Node) Ready() bool {
	if n.closed.Load() || n.disk.fenced() || !n.shardsStarted.Load() {
		return false
	}
	if p := n.placed.Load(); p != nil {
		for _, s := range *p {
			if !s.replicated() {
				return false
			}
		}
	}
	if n.holdsShards() {
		return n.leaderless() == 0
	}
	return n.gossip != nil && n.ClusterID() != "" && n.unknownLeaders() == 0
}

// unknownLeaders counts the shards, MetaShard included, whose leader this
// node does not know.
func (n *Node) unknownLeaders() int {
	count := 0
	for _, s := range n.all {
		if _, ok := n.LeaderOf(s.ID); !ok {
			count++
		}
	}
	return count
}

// holdsShards reports whether any shard of this node has a configuration
// naming it (bootstrapped, added by a leader, or restarted with state).
func (n *Node) holdsShards() bool {
	for _, s := range n.all {
		if s.replicated() {
			return true
		}
	}
	return false
}

// leaderless counts the shards this node replicates that have no known
// leader.
func (n *Node) leaderless() int {
	count := 0
	for _, s := range n.all {
		if !s.replicated() {
			continue
		}
		if _, id := s.Raft.LeaderWithID(); id == "" {
			count++
		}
	}
	return count
}

// WaitReady waits until Ready, ctx is done (its error is wrapped), or the node
// shuts down (ErrShutdown).
func (n *Node) WaitReady(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if n.closed.Load() {
			return ErrShutdown
		}
		if n.Ready() {
			return nil
		}
		select {
		case <-ctx.Done():
			switch {
			case n.holdsShards():
				return fmt.Errorf("cluster: %d of %d shards have no leader: %w", n.leaderless(), len(n.all), ctx.Err())
			case n.ClusterID() == "":
				return fmt.Errorf("cluster: this node holds no shard and has joined no cluster yet (not bootstrapped, no seed's cluster adopted): %w", ctx.Err())
			}
			return fmt.Errorf("cluster: this node holds no shard, and %d of %d shards have no known leader: %w", n.unknownLeaders(), len(n.all), ctx.Err())
		case <-t.C:
		}
	}
}

// Shutdown stops every Raft instance (waiting for each), delivers their last
// leadership changes, closes the stores and the Raft listener and its
// connections. It is idempotent: later calls return the first call's result.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		n.closed.Store(true)
		close(n.stop)
		// A fence under way finishes first: it sends on the shards'
		// notification channels, which their shutdown closes.
		n.diskWatchDone.Wait()
		if n.gossip != nil {
			_ = n.gossip.ml.Shutdown()
		}
		n.hubs.StopHeartbeats() // heartbeats go one by one while the shards stop
		start := time.Now()
		errs := make([]error, len(n.all)+1)
		var wg sync.WaitGroup
		for i, s := range n.all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.shutdown(); err != nil {
					errs[i] = fmt.Errorf("cluster: shut down shard %d: %w", s.ID, err)
				}
			}()
		}
		wg.Wait()
		n.featureLoopDone.Wait() // its applies fail now that the shards are down
		n.hubs.Close()
		for _, st := range n.opened {
			_ = st.store.Close() // opened, never started: Start was not called
		}
		errs[len(n.all)] = n.mux.Close()
		if n.nodeStore != nil {
			errs = append(errs, n.nodeStore.Close())
		}
		n.shutdownErr = errors.Join(errs...)
		n.logger.Info("node shut down", "node_id", n.cfg.NodeID, "elapsed", time.Since(start), "error", n.shutdownErr)
	})
	return n.shutdownErr
}

// Leave is a planned departure (SIGTERM): this node hands the leadership of
// every shard it leads to another voter (waiting at most timeout), then
// tells the cluster through gossip that it is leaving, and from then on
// leaves itself out of Brokers (Metadata), so clients stop choosing it. It
// returns how many leaderships moved. Call Shutdown after.
func (n *Node) Leave(timeout time.Duration) (moved int) {
	if n.closed.Load() {
		return 0
	}
	moved = n.TransferLeadership(timeout)
	n.leaving.Store(true)
	if n.gossip != nil {
		n.gossip.leave(time.Second)
	}
	return moved
}

// GossipAddr is the address other nodes reach this node's gossip at (empty
// without gossip).
func (n *Node) GossipAddr() string {
	if n.gossip == nil {
		return ""
	}
	return n.gossip.addr()
}

// member is a node as the membership view knows it.
type member struct {
	broker   Broker
	raftAddr string
	// disk is the DiskState its gossip says it fenced itself for
	// (diskfence.go); "" while it is not fenced.
	disk DiskState
	// syncMicros and slow are its gossiped sync time and whether its disk
	// is slow (slowdisk.go).
	syncMicros int64
	slow       bool
}

// memberTable is the node's view of live nodes: itself, plus the peers of
// its cluster that gossip reports alive (NotifyJoin/NotifyLeave). Any
// goroutine may use it.
type memberTable struct {
	mu sync.RWMutex
	m  map[int32]member
}

func (t *memberTable) set(b Broker, raftAddr string) { t.setMeta(b, raftAddr, "", 0, false) }

// setMeta records a member with what its gossip says of its disk: the
// state it is fenced for ("" when it is not), its sync time and whether
// it is slow. It reports whether the fence changed.
func (t *memberTable) setMeta(b Broker, raftAddr string, disk DiskState, syncMicros int64, slow bool) (fenceChanged bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[int32]member)
	}
	fenceChanged = t.m[b.NodeID].disk != disk
	t.m[b.NodeID] = member{broker: b, raftAddr: raftAddr, disk: disk, syncMicros: syncMicros, slow: slow}
	return fenceChanged
}

func (t *memberTable) remove(id int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
}

// provenDead reports whether member id's process is proven gone (its
// Raft port refused a dial: peerdeath.go).
func (t *memberTable) provenDead(id int32, deaths *raftnet.PeerDeaths) bool {
	t.mu.RLock()
	m, ok := t.m[id]
	t.mu.RUnlock()
	return ok && deaths.IsDead(m.raftAddr)
}

// ids lists every member's node id, fenced and suspected ones included.
func (t *memberTable) ids() []int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]int32, 0, len(t.m))
	for id := range t.m {
		out = append(out, id)
	}
	return out
}

func (t *memberTable) broker(id int32) (Broker, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m, ok := t.m[id]
	return m.broker, ok
}

// routable returns the member id, unless it is fenced for its disk: the
// broker routing may name as a shard's leader.
func (t *memberTable) routable(id int32) (Broker, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m, ok := t.m[id]
	return m.broker, ok && m.disk == ""
}

// fencedAddr reports whether the member advertising Raft address addr is
// fenced for its disk.
func (t *memberTable) fencedAddr(addr string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, m := range t.m {
		if m.raftAddr == addr {
			return m.disk != ""
		}
	}
	return false
}

// diskOf is the disk state member id is fenced for, "" when none.
func (t *memberTable) diskOf(id int32) DiskState {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[id].disk
}

// dead reports whether node id's Raft address is proven dead.
func (t *memberTable) dead(id int32, deaths *raftnet.PeerDeaths) bool {
	t.mu.RLock()
	m, ok := t.m[id]
	t.mu.RUnlock()
	return ok && deaths.IsDead(m.raftAddr)
}

// hasRaftAddr reports whether a member advertises addr as its Raft address.
func (t *memberTable) hasRaftAddr(addr string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, m := range t.m {
		if m.raftAddr == addr {
			return true
		}
	}
	return false
}

// raftAddrs returns the members' Raft addresses by node id, leaving out
// those deaths proves dead.
func (t *memberTable) raftAddrs(deaths *raftnet.PeerDeaths) map[int32]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[int32]string, len(t.m))
	for id, m := range t.m {
		if !deaths.IsDead(m.raftAddr) {
			out[id] = m.raftAddr
		}
	}
	return out
}

// brokers lists the members, leaving out those deaths proves dead and
// those fenced for their disk.
func (t *memberTable) brokers(deaths *raftnet.PeerDeaths) []Broker {
	t.mu.RLock()
	out := make([]Broker, 0, len(t.m))
	for _, m := range t.m {
		if m.disk != "" || deaths.IsDead(m.raftAddr) {
			continue
		}
		out = append(out, m.broker)
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b Broker) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return out
}

// serverID is the Raft server id of a node.
func serverID(nodeID int32) raft.ServerID {
	return raft.ServerID(strconv.FormatInt(int64(nodeID), 10))
}
