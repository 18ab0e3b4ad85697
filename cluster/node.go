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
// shard, all sharing one TCP port through a Mux.
type Node struct {
	cfg    Config
	logger hclog.Logger
	mux    *Mux
	meta   *Shard
	shards []*Shard // group shards by id
	all    []*Shard // meta first, then group shards

	members memberTable
	leaders leaderTable
	gossip  *gossip // nil without GossipAddr; set before any shard starts reporting
	// hasState is set once this node's shards hold Raft state
	// (bootstrapped, or restarted with data).
	hasState atomic.Bool
	stop     chan struct{} // closed by Shutdown: background loops end
	// lastLeaderGain is when this node last won a shard's leadership (Unix
	// nanoseconds); balancing waits for quiet after elections.
	lastLeaderGain atomic.Int64

	// logStore is LogStoreNode (nodeStore holds every shard's log) or
	// LogStoreShard (one raft-boltdb file per shard).
	logStore  string
	nodeStore *NodeStore

	closed       atomic.Bool
	shutdownOnce sync.Once
	shutdownErr  error
}

// NewNode opens the Raft stores under cfg.DataDir, binds cfg.RaftAddr and
// starts a Raft instance per shard plus MetaShard. On the first start of a
// DataDir with BootstrapExpect 1, every shard without Raft state
// (raft.HasExistingState) is bootstrapped as a single-voter cluster; once
// DataDir/node.json records the node, it never bootstraps again. NewNode
// does not wait for leaders: see WaitReady.
func NewNode(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger.Named("cluster")
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("cluster: data dir: %w", err)
	}
	id, initialised, err := readIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if initialised && (id.NodeID != cfg.NodeID || id.Shards != cfg.Shards) {
		return nil, fmt.Errorf("%w: %s has node id %d and %d shards, config has node id %d and %d shards",
			ErrDataDirMismatch, cfg.DataDir, id.NodeID, id.Shards, cfg.NodeID, cfg.Shards)
	}
	logStore := cfg.LogStore
	if initialised {
		// A data dir keeps the log store it was created with; node.json
		// from before the choice existed means per-shard files.
		logStore = cmp.Or(id.LogStore, LogStoreShard)
	}

	mux, err := ListenMux(cfg.RaftAddr, cfg.AdvertiseRaftAddr, cfg.Logger.Named("raft-mux"))
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, logger: logger, mux: mux, stop: make(chan struct{}), logStore: logStore}
	if logStore == LogStoreNode {
		if n.nodeStore, err = OpenNodeStore(filepath.Join(cfg.DataDir, "raft.db")); err != nil {
			_ = mux.Close()
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	n.members.set(Broker{NodeID: cfg.NodeID, KafkaAddr: cfg.KafkaAddr}, mux.advertise)
	if cfg.GossipAddr != "" {
		if err := n.startGossip(); err != nil {
			_ = mux.Close()
			if n.nodeStore != nil {
				_ = n.nodeStore.Close()
			}
			return nil, err
		}
	}

	bootstrap := !initialised && cfg.BootstrapExpect == 1
	ids := make([]int32, 0, cfg.Shards+1)
	fsms := make([]raft.FSM, 0, cfg.Shards+1)
	ids = append(ids, MetaShard)
	fsms = append(fsms, cfg.NewMetaFSM())
	for i := range cfg.Shards {
		ids = append(ids, i)
		fsms = append(fsms, cfg.NewShardFSM(i))
	}
	start := time.Now()
	n.all = make([]*Shard, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, startParallelism)
	for i := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n.all[i], errs[i] = n.startShard(ids[i], fsms[i], bootstrap)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		n.abort()
		return nil, err
	}
	n.meta, n.shards = n.all[0], n.all[1:]

	if !initialised {
		if err := writeIdentity(cfg.DataDir, identity{Version: 1, NodeID: cfg.NodeID, Shards: cfg.Shards, LogStore: logStore}); err != nil {
			n.abort()
			return nil, err
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
	if g := n.gossip; g != nil {
		g.announce()
		if cfg.BootstrapExpect > 1 && !n.hasState.Load() {
			go n.bootstrapLoop()
		}
		go n.balanceLoop()
	}
	logger.Info("node started", "node_id", cfg.NodeID, "raft_addr", mux.advertise, "kafka_addr", cfg.KafkaAddr,
		"shards", cfg.Shards, "bootstrapped", bootstrapped, "elapsed", time.Since(start))
	return n, nil
}

// startShard opens the stores of one shard, bootstraps it if allowed and it
// has no state, and starts its Raft.
func (n *Node) startShard(id int32, fsm raft.FSM, bootstrap bool) (s *Shard, err error) {
	cfg := &n.cfg
	defer func() {
		if err != nil {
			err = fmt.Errorf("cluster: start shard %d: %w", id, err)
		}
	}()
	dir := shardDir(cfg.DataDir, id)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	store, err := n.openShardStore(id, dir)
	if err != nil {
		return nil, err
	}
	var trans *raft.NetworkTransport
	defer func() {
		if err != nil {
			if trans != nil {
				_ = trans.Close()
			}
			_ = store.Close()
		}
	}()
	logs, err := raft.NewLogCache(logCacheSize, store)
	if err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, cfg.SnapshotRetain, cfg.RaftLogger.Named("snapshots").With("shard", id))
	if err != nil {
		return nil, err
	}
	layer, err := n.mux.Listen(id)
	if err != nil {
		return nil, err
	}
	trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: cfg.TransportMaxPool,
		Timeout: cfg.TransportTimeout,
		Logger:  cfg.RaftLogger.Named("net").With("shard", id),
	})

	rc := cfg.raftConfig(id)
	notifyCh := make(chan bool, notifyBuffer)
	rc.NotifyCh = notifyCh

	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return nil, err
	}
	bootstrapped := false
	switch {
	case !existing && bootstrap:
		conf := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter,
			ID:       rc.LocalID,
			Address:  raft.ServerAddress(n.mux.advertise),
		}}}
		if err := raft.BootstrapCluster(rc, logs, store, snaps, trans, conf); err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		bootstrapped = true
	case !existing:
		n.logger.Info("shard has no raft state; waiting to be added to a cluster", "shard", id)
	}

	r, err := raft.NewRaft(rc, fsm, logs, store, snaps, trans)
	if err != nil {
		return nil, err
	}
	s = &Shard{
		ID:           id,
		Raft:         r,
		FSM:          fsm,
		logger:       n.logger,
		localID:      rc.LocalID,
		leaseTimeout: rc.LeaderLeaseTimeout,
		store:        store,
		trans:        trans,
		notifyCh:     notifyCh,
		leaderDone:   make(chan struct{}),
		bootstrapped: bootstrapped,
		hadState:     existing,
		pending:      make(map[*shardFuture]struct{}),
	}
	go s.leadershipLoop(func(id int32, leader bool) {
		n.localLeadership(s, leader)
		if cfg.OnLeadership != nil {
			cfg.OnLeadership(id, leader)
		}
	})
	if !cfg.DisableElectionNudge {
		s.nudgeElection()
	}
	return s, nil
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
type nopCloser struct{ *ShardStore }

func (nopCloser) Close() error { return nil }

// abort stops whatever NewNode started.
func (n *Node) abort() {
	var wg sync.WaitGroup
	for _, s := range n.all {
		if s != nil {
			wg.Add(1)
			go func() { defer wg.Done(); _ = s.shutdown() }()
		}
	}
	wg.Wait()
	_ = n.mux.Close()
	if n.nodeStore != nil {
		_ = n.nodeStore.Close()
	}
}

// ID is this node's id.
func (n *Node) ID() int32 { return n.cfg.NodeID }

// Self is this node as a Broker.
func (n *Node) Self() Broker { return Broker{NodeID: n.cfg.NodeID, KafkaAddr: n.cfg.KafkaAddr} }

// RaftAddr is the advertised address of this node's Raft listener, the
// raft.ServerAddress of this node in every shard.
func (n *Node) RaftAddr() string { return n.mux.advertise }

// Faults is the fault injector of this node's Raft connections (tests).
func (n *Node) Faults() *Faults { return n.mux.Faults() }

// ShardFor is the shard of a group: PartitionFor(groupID, Shards).
func (n *Node) ShardFor(groupID string) int32 { return PartitionFor(groupID, n.cfg.Shards) }

// Shard returns group shard id, or the metadata shard for MetaShard; nil if
// there is no such shard.
func (n *Node) Shard(id int32) *Shard {
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

// Brokers returns the live nodes this node knows of, ordered by node id. A
// single node knows only itself.
func (n *Node) Brokers() []Broker { return n.members.brokers() }

// LeaderOf returns the broker leading shard, if a leader is known and is a
// live node: from this node's own Raft instance when it replicates the
// shard, else from the leader table gossip maintains. A leader this node's
// follower has not heard from for half a heartbeat timeout (it heartbeats
// ten times per timeout) counts as unknown: it is probably dead, and
// sending clients to it would make them fail their requests until the
// election ends instead of waiting for it.
func (n *Node) LeaderOf(shard int32) (Broker, bool) {
	s := n.Shard(shard)
	if s == nil || n.closed.Load() {
		return Broker{}, false
	}
	if s.replicated() {
		_, id := s.Raft.LeaderWithID()
		if id == "" {
			return Broker{}, false
		}
		if id != s.localID && time.Since(s.Raft.LastContact()) > n.cfg.HeartbeatTimeout/2 {
			return Broker{}, false
		}
		nodeID, err := strconv.ParseInt(string(id), 10, 32)
		if err != nil {
			return Broker{}, false
		}
		return n.members.broker(int32(nodeID))
	}
	if e, ok := n.leaders.get(shard); ok {
		return n.members.broker(e.Node)
	}
	return Broker{}, false
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

// Ready reports whether this node holds Raft state (the cluster is
// bootstrapped) and every shard it replicates, MetaShard included, has a
// known leader.
func (n *Node) Ready() bool {
	return !n.closed.Load() && n.holdsShards() && n.leaderless() == 0
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
			if !n.holdsShards() {
				return fmt.Errorf("cluster: this node holds no shard yet (the cluster is not bootstrapped): %w", ctx.Err())
			}
			return fmt.Errorf("cluster: %d of %d shards have no leader: %w", n.leaderless(), len(n.all), ctx.Err())
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
		if n.gossip != nil {
			_ = n.gossip.ml.Shutdown()
		}
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
// tells the cluster through gossip that it is leaving. Call Shutdown after.
func (n *Node) Leave(timeout time.Duration) {
	if n.closed.Load() {
		return
	}
	n.TransferLeadership(timeout)
	if n.gossip != nil {
		n.gossip.leave(time.Second)
	}
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
}

// memberTable is the node's view of live nodes. With a single node it holds
// only itself; memberlist will maintain it.
type memberTable struct {
	mu sync.RWMutex
	m  map[int32]member
}

func (t *memberTable) set(b Broker, raftAddr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[int32]member)
	}
	t.m[b.NodeID] = member{broker: b, raftAddr: raftAddr}
}

func (t *memberTable) remove(id int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
}

func (t *memberTable) broker(id int32) (Broker, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m, ok := t.m[id]
	return m.broker, ok
}

func (t *memberTable) brokers() []Broker {
	t.mu.RLock()
	out := make([]Broker, 0, len(t.m))
	for _, m := range t.m {
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
