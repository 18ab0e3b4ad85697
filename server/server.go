package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kcoord/kcoord/api"
	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

// Server is one kcoord node: the Kafka listener, the shards' Raft groups and
// a group coordinator per shard, wired together. The CLI and tests create it
// with New, then Start; Ready and KafkaAddr are safe from any goroutine once
// Start returned; Shutdown is safe at any time, even after a failed Start.
type Server struct {
	cfg    Config
	logger hclog.Logger
	reg    prometheus.Registerer
	// logSyncTime observes the node log's group commits (write and
	// fdatasync); nil without metrics.
	logSyncTime prometheus.Histogram
	// rebalanceTime observes the coordinators' completed rebalances; nil
	// without a registry.
	rebalanceTime prometheus.Histogram

	mu    sync.Mutex
	kafka *transport.Server
	// certs serves the Kafka listener's TLS certificate; nil for
	// plaintext.
	certs  *certReloader
	node   *cluster.Node
	coords []*groups.Coordinator
	states []*fsm.ShardFSM
	meta   *fsm.MetaFSM
	// metaReads is how requests consult meta (metareads.go).
	metaReads *metaReads
	// authorizer decides requests by ACLs on a node that authenticates
	// its clients; nil otherwise.
	authorizer *auth.Authorizer
	serve      chan error
	closed     bool
	// stopRetention ends the retention loop; retentionDone closes when it
	// has.
	stopRetention chan struct{}
	retentionDone chan struct{}
	// metaLoaded is the metadata group's leadership epoch in which this
	// node, as its leader, applied every entry of earlier terms (the topic
	// registry is complete); it counts only while that epoch lasts.
	metaLoaded atomic.Uint64
	// raftNode is the cluster node for readers that do not take mu (the
	// metrics, the HTTP handlers, the metadata reads); set once Start
	// returned.
	raftNode atomic.Pointer[cluster.Node]
	// opened is the cluster node from the moment cluster.Open returned:
	// written once, before the node's Start, which begins the leadership
	// goroutines that read it (onLeadership).
	opened *cluster.Node
	// shards is the node's shard count (cluster.Node.ShardCount), for
	// readers that do not take mu (ShardFor); 0 before Open decided it.
	shards atomic.Int32
	// stopping is set when Shutdown or Kill begins.
	stopping atomic.Bool
	// events is this node's timeline for the status page.
	events timeline
}

// New validates cfg and returns a server that has not started anything.
// reg may be nil (no metrics).
func New(cfg Config, logger hclog.Logger, reg *prometheus.Registry) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, logger: logger}
	if reg != nil {
		s.reg = reg
		if err := reg.Register(newCollector(s)); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		if err := reg.Register(newRaftCollector(s)); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		s.rebalanceTime = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kcoord_rebalance_duration_seconds",
			Help: "Rebalances completed on this node, by how long they took: from PreparingRebalance to Stable.",
			// 10 ms to about 11 minutes: the initial delay is 3 s, a
			// rebalance timeout up to minutes.
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 17),
		})
		s.logSyncTime = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kcoord_log_sync_seconds",
			Help: "Group commits of the node's log, by how long their write and fdatasync took (kcoord.log.max.sync.ms fences the node past its bound).",
			// 25 µs to about 26 s: a healthy fdatasync is a tenth of a
			// millisecond, a stall is seconds.
			Buckets: prometheus.ExponentialBuckets(0.000025, 2, 21),
		})
		if err := reg.Register(s.logSyncTime); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		if err := reg.Register(s.rebalanceTime); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return s, nil
}

// Start binds the Kafka listener, starts every shard's Raft instance and
// serves. Connections that arrive while the shards start are refused with
// a reset (transport.Config.RefuseUntilOpen), so that clients go to
// another node rather than wait. It returns once requests are served;
// Ready reports when the shards have leaders.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("server: shut down")
	}
	mux := transport.NewMux()
	tcfg := transport.DefaultConfig()
	tcfg.Addr, tcfg.MaxRequestBytes = s.cfg.KafkaAddr, s.cfg.SocketRequestMaxBytes
	tcfg.Logger, tcfg.Registerer = s.logger.Named("kafka"), s.reg
	tcfg.MaxConnections, tcfg.MaxConnectionsPerIP = int(s.cfg.MaxConnections), int(s.cfg.MaxConnectionsPerIP)
	tcfg.QueuedMaxRequestBytes = s.cfg.QueuedMaxRequestBytes
	tcfg.RefuseUntilOpen = true
	tlsCfg, certs, err := s.cfg.listenerTLS(s.logger.Named("tls"))
	if err != nil {
		return err
	}
	tcfg.TLS, s.certs = tlsCfg, certs
	s.meta = fsm.NewMetaFSM(s.logger.Named("meta"))
	s.metaReads = &metaReads{s: s, maxStaleness: s.cfg.MetadataMaxStaleness, timeout: s.cfg.OffsetsCommitTimeout}
	sasl, err := s.cfg.authenticator(s.meta, s.metaReads)
	if err != nil {
		return err
	}
	if sasl != nil {
		tcfg.SASL, tcfg.SASLMaxReceiveBytes = sasl, s.cfg.SASLServerMaxReceiveSize
		if len(s.cfg.superusers()) == 0 {
			s.logger.Warn("SASL is on with no superuser: no one can create users (set --sasl-superuser or -c super.users)")
		}
	}
	kafka, err := transport.NewServer(tcfg, mux)
	if err != nil {
		return err
	}
	if err := kafka.Listen(); err != nil {
		return fmt.Errorf("kafka listener: %w", err)
	}
	s.kafka = kafka
	s.serve = make(chan error, 1)
	go func() { s.serve <- kafka.Serve() }()
	advertised := s.cfg.AdvertiseKafkaAddr
	if advertised == "" {
		advertised = kafka.Addr().String()
	}
	acls := &aclStore{fsm: s.meta, timeout: s.cfg.OffsetsCommitTimeout}
	var authorizer api.Authorizer // nil: everything allowed, as Kafka without an authorizer
	if s.cfg.authenticates() {
		s.authorizer = auth.NewAuthorizer(s.cfg.superusers(), acls.index)
		authorizer = s.authorizer
	}
	if err := s.startNode(advertised); err != nil {
		s.stopping.Store(true) // ends the retries of leadership delivered meanwhile (retryWhileLeading)
		return err
	}
	acls.node = s.node
	h := api.New(api.Config{
		NodeID:                   s.cfg.NodeID,
		MaxPartitionsPerTopic:    s.cfg.MaxPartitionsPerTopic,
		MaxTopics:                s.cfg.MaxTopics,
		MaxPartitions:            s.cfg.MaxPartitions,
		ElectionHold:             s.cfg.GroupElectionHold,
		CommitUnregisteredTopics: s.cfg.OffsetsCommitUnregisteredTopics,
		Authorizer:               authorizer,
		Metadata:                 s.metaReads,
		Registry:                 s.meta,
		BootstrapSuperuser:       s.cfg.SASLSuperuser,
		Logger:                   s.logger.Named("api"),
	}, apiCluster{s.node}, &topicRegistry{node: s.node, fsm: s.meta, timeout: s.cfg.OffsetsCommitTimeout}, s.apiShards())
	h.WithCredentials(&credentialStore{node: s.node, fsm: s.meta, timeout: s.cfg.OffsetsCommitTimeout}).WithACLs(acls).WithFeatures(apiCluster{s.node})
	h.Register(mux)
	mux.SetFeatures(s.apiFeatures)
	kafka.Open()
	s.stopRetention = make(chan struct{})
	s.retentionDone = make(chan struct{})
	go groups.RunRetention(s.stopRetention, s.retentionDone, s.coords, s.cfg.OffsetsRetentionCheckInterval, s.cfg.OffsetsRetention, s.logger)
	s.logger.Debug("serving", "kafka", kafka.Addr().String(), "advertised", advertised, "raft", s.node.RaftAddr(), "shards", s.ShardCount())
	return nil
}

// startNode opens the Raft node, which decides the shard count and builds
// an FSM per shard (NewShardFSM), builds a coordinator on each of its
// shards and starts the node. Called with s.mu held.
func (s *Server) startNode(advertised string) error {
	gcfg := groups.DefaultConfig()
	gcfg.InitialRebalanceDelay = s.cfg.GroupInitialRebalanceDelay
	gcfg.MinSessionTimeout, gcfg.MaxSessionTimeout = s.cfg.GroupMinSessionTimeout, s.cfg.GroupMaxSessionTimeout
	gcfg.MaxSize, gcfg.WriteTimeout = s.cfg.GroupMaxSize, s.cfg.OffsetsCommitTimeout
	gcfg.ElectionHold = s.cfg.GroupElectionHold
	gcfg.OffsetMetadataMaxBytes, gcfg.OffsetsRetention = s.cfg.OffsetMetadataMaxBytes, s.cfg.OffsetsRetention
	if err := s.cfg.consumerGroupConfig(&gcfg); err != nil {
		return err
	}
	gcfg.Topics = s.meta
	if s.authorizer != nil {
		gcfg.AuthorizeTopic = api.TopicAuthorizer(s.authorizer)
	}
	gcfg.UnsafeAckBeforeCommit = s.cfg.UnsafeAckBeforeCommit
	if s.cfg.UnsafeAckBeforeCommit {
		s.logger.Warn("UNSAFE: OffsetCommits are acknowledged before Raft commits them (--unsafe-ack-before-commit, a planted bug for the chaos suite)")
	}
	gcfg.Logger = s.logger.Named("groups")
	gcfg.ObserveRebalance = func(r groups.Rebalance) {
		if h := s.rebalanceTime; h != nil {
			h.Observe(r.Took.Seconds())
		}
		s.events.add(rebalanceEvent(s.cfg.NodeID, r))
	}
	if s.cfg.Groups != nil {
		s.cfg.Groups(&gcfg)
	}
	ccfg := cluster.DefaultConfig()
	ccfg.NodeID, ccfg.DataDir = s.cfg.NodeID, s.cfg.DataDir
	ccfg.RaftAddr, ccfg.AdvertiseRaftAddr, ccfg.KafkaAddr = s.cfg.RaftAddr, s.cfg.AdvertiseRaftAddr, advertised
	ccfg.Shards, ccfg.BootstrapExpect = s.cfg.OffsetsTopicNumPartitions, s.cfg.BootstrapExpect
	ccfg.ReplicationFactor = int(s.cfg.OffsetsTopicReplicationFactor)
	ccfg.MaxConcurrentMoves = int(s.cfg.PlacementMaxConcurrentMoves)
	ccfg.SnapshotThrottleRate = s.cfg.LeaderReplicationThrottledRate
	ccfg.GossipAddr, ccfg.AdvertiseGossipAddr, ccfg.Join = s.cfg.GossipAddr, s.cfg.AdvertiseGossipAddr, s.cfg.Join
	ccfg.GossipKeyFile = s.cfg.GossipKeyFile
	ccfg.UnsafeSkipSync = s.cfg.UnsafeSkipFsync
	ccfg.ManualFeatureFinalize = !s.cfg.FeaturesAutoFinalize
	ccfg.UnsafeIgnoreFeatureLevels = s.cfg.UnsafeIgnoreFeatureLevels
	if s.cfg.UnsafeIgnoreFeatureLevels {
		s.logger.Warn("UNSAFE: the node writes formats its cluster has not finalized (--unsafe-ignore-feature-levels, a planted bug for the upgrade test)")
	}
	if s.cfg.UnsafeSkipFsync {
		s.logger.Warn("UNSAFE: the node's log acknowledges writes without fdatasync (--unsafe-skip-fsync, a planted bug for the chaos suite)")
	}
	ccfg.MaxSyncDuration = s.cfg.LogMaxSync
	if s.cfg.LogMaxSync == 0 {
		ccfg.MaxSyncDuration = -1 // off
	}
	if h := s.logSyncTime; h != nil {
		ccfg.ObserveLogSync = func(d time.Duration) { h.Observe(d.Seconds()) }
	}
	ccfg.RaftTLSCertFile, ccfg.RaftTLSKeyFile, ccfg.RaftTLSCAFile = s.cfg.RaftTLSCertFile, s.cfg.RaftTLSKeyFile, s.cfg.RaftTLSCAFile
	if s.cfg.Raft != nil {
		s.cfg.Raft(&ccfg)
	}
	// Open calls it once per shard, in order, on this goroutine, once it
	// has decided the count.
	ccfg.NewShardFSM = func(shard int32) raft.FSM {
		st := fsm.NewShardFSM(shard, s.logger.Named("fsm"))
		s.states = append(s.states, st)
		return st
	}
	ccfg.NewMetaFSM = func() raft.FSM { return s.meta }
	ccfg.OnLeadership = s.onLeadership
	ccfg.Inspect = s.inspect
	ccfg.Logger = s.logger
	ccfg.RaftLogger = quiet(s.logger.Named("raft"), hclog.Warn)
	s.states = nil
	node, err := cluster.Open(ccfg)
	if err != nil {
		return err // cluster's errors say "cluster: " already
	}
	n := node.ShardCount()
	if len(s.states) != int(n) {
		_ = node.Shutdown()
		return fmt.Errorf("server: the node made %d shard FSMs for %d shards", len(s.states), n)
	}
	s.shards.Store(n)
	s.coords = make([]*groups.Coordinator, n)
	// The shards lead nothing until Start: each coordinator uses its
	// shard as its groups.Log from the start.
	for i := range s.coords {
		c, err := groups.NewCoordinator(gcfg, int32(i), node.Shard(int32(i)), s.states[i])
		if err != nil {
			_ = node.Shutdown()
			return err
		}
		s.coords[i] = c
	}
	s.opened = node
	if err := node.Start(); err != nil {
		return err
	}
	s.node = node
	s.raftNode.Store(node)
	return nil
}

// apiShards lists every shard's coordinator for the handlers.
// Called with s.mu held.
func (s *Server) apiShards() []api.Shard {
	out := make([]api.Shard, len(s.states))
	for i := range out {
		out[i] = api.Shard{Coordinator: s.coords[i]}
	}
	return out
}

// onLeadership is cluster's leadership callback, on the shard's leadership
// goroutine (possibly while the node's Start still runs). A loss deactivates
// the coordinator at once. A gain is served on a goroutine of its own
// (activation waits on Raft): it reads the shard's Leadership, the one
// fact every consumer compares against, and retries while that epoch
// lasts; an activation of an epoch that has passed does nothing.
func (s *Server) onLeadership(shard int32, leader bool) {
	s.events.add(leadershipEvent(s.cfg.NodeID, shard, leader, s.raftNode.Load()))
	if !leader {
		if shard != cluster.MetaShard {
			s.coords[shard].Deactivate()
		}
		return
	}
	go func() {
		sh := s.opened.Shard(shard)
		l := sh.Leadership()
		if !l.Leader {
			return // lost again already; that notification deactivated
		}
		if shard == cluster.MetaShard {
			s.retryWhileLeading(sh, l.Epoch, "metadata barrier", func() error { return s.loadMeta(sh, l.Epoch) })
			s.stampClusterID(sh, l.Epoch, s.meta.ClusterID)
			return
		}
		c := s.coords[shard]
		s.retryWhileLeading(sh, l.Epoch, "coordinator activation", func() error { return c.Activate(l.Epoch) })
		s.stampClusterID(sh, l.Epoch, s.states[shard].ClusterID)
	}()
}

// loadMeta marks the topic registry current for the metadata leadership
// epoch once a barrier has applied every entry of earlier terms: after a
// restart the registry is complete only then.
func (s *Server) loadMeta(sh *cluster.Shard, epoch uint64) error {
	if err := sh.Barrier(s.cfg.OffsetsCommitTimeout); err != nil {
		return err
	}
	// Only the current epoch's barrier counts; a late one of an earlier
	// epoch must not overwrite a later epoch's mark.
	for cur := s.metaLoaded.Load(); cur < epoch && sh.Leads(epoch); cur = s.metaLoaded.Load() {
		if s.metaLoaded.CompareAndSwap(cur, epoch) {
			break
		}
	}
	return nil
}

// retryWhileLeading runs fn until it succeeds, the shard's leadership epoch
// moves on (a later notification owns the shard now) or the server stops,
// backing off up to a second between tries. A barrier can fail under load
// (the apply queue full) while this node still leads; giving up would
// leave the shard unserved for the whole term.
func (s *Server) retryWhileLeading(sh *cluster.Shard, epoch uint64, what string, fn func() error) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !sh.Leads(epoch) || s.stopping.Load() {
			return
		}
		// Leadership can arrive while the node is still starting (the
		// first tries then fail at once); only a failure that persists is
		// worth a warning.
		log := s.logger.Debug
		if attempt > 3 {
			log = s.logger.Warn
		}
		log(what+" failed; retrying", "shard", sh.ID, "epoch", epoch, "error", err, "backoff", backoff)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
		if !sh.Leads(epoch) || s.stopping.Load() {
			return
		}
	}
}

// Ready reports whether every shard has a known leader and this node's
// coordinators serve the shards it leads.
func (s *Server) Ready() bool {
	s.mu.Lock()
	node, coords := s.node, s.coords
	s.mu.Unlock()
	if node == nil || !node.Ready() {
		return false
	}
	if meta := node.Shard(cluster.MetaShard); meta.IsLeader() && !meta.Leads(s.metaLoaded.Load()) {
		return false
	}
	for _, sh := range node.Shards() {
		if sh.IsLeader() && (coords[sh.ID] == nil || !coords[sh.ID].Active()) {
			return false
		}
	}
	return true
}

// readiness is Ready with the reason a fenced node is not: /readyz says
// it.
func (s *Server) readiness() (bool, string) {
	if node := s.raftNode.Load(); node != nil {
		if h := node.DiskHealth(); h.Fenced() {
			return false, fmt.Sprintf("fenced: disk %s: %s", h.State, h.Reason)
		}
	}
	return s.Ready(), ""
}

// WaitReady blocks until Ready or ctx ends.
func (s *Server) WaitReady(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !s.Ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// KafkaAddr is the bound Kafka listener address (nil before Start).
func (s *Server) KafkaAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kafka == nil {
		return nil
	}
	return s.kafka.Addr()
}

// Shutdown is a planned stop (SIGTERM): the node first hands the leadership
// of its shards to other nodes and leaves gossip, so its groups move
// without waiting for an election timeout; then the Kafka listener and its
// connections close, then the coordinators and every Raft instance stop.
// Idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.stop(ctx, true)
}

// Kill stops the server abruptly, as a crash would look to the rest of the
// cluster: no leadership transfer, no gossip leave (tests use it to fail a
// node in-process). Idempotent with Shutdown.
func (s *Server) Kill() error {
	return s.stop(context.Background(), false)
}

func (s *Server) stop(ctx context.Context, graceful bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.stopping.Store(true)
	kafka, node, coords := s.kafka, s.node, s.coords
	stopRetention, retentionDone := s.stopRetention, s.retentionDone
	s.mu.Unlock()
	if stopRetention != nil {
		close(stopRetention)
		<-retentionDone
	}
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if graceful && node != nil {
			if moved := node.Leave(leaveTimeout); moved > 0 {
				s.drain(ctx)
			}
		}
		// Requests held for an election end now: closing the listener
		// waits for every handler.
		for _, c := range coords {
			if c != nil {
				c.Stop()
			}
		}
		if kafka != nil {
			errs = append(errs, kafka.Close())
		}
		for _, c := range coords {
			if c != nil {
				c.Deactivate()
			}
		}
		if node != nil {
			errs = append(errs, node.Shutdown())
		}
	}()
	select {
	case <-done:
		return errors.Join(errs...)
	case <-ctx.Done():
		return fmt.Errorf("shutdown: %w", ctx.Err())
	}
}

// drain keeps the Kafka listener answering for Config.ShutdownDrain (or
// until ctx ends) after a planned stop moved this node's leaderships away:
// each member's next heartbeat gets NOT_COORDINATOR here and its client
// looks the coordinator up again (this node answers with the new leader),
// instead of finding this node's port closed, on which sarama and kafka-go
// end the member's session and its group rebalances. Runs on the stopping
// goroutine.
func (s *Server) drain(ctx context.Context) {
	if s.cfg.ShutdownDrain <= 0 {
		return
	}
	s.logger.Info("draining: still answering clients while they find the new coordinators", "for", s.cfg.ShutdownDrain)
	t := time.NewTimer(s.cfg.ShutdownDrain)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// BoundConfig is the server's configuration with every listener's bound
// address in place of port 0, so a restart (tests) reuses the same
// addresses: its Raft peers know it by them.
func (s *Server) BoundConfig() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cfg
	if s.kafka != nil {
		c.KafkaAddr = s.kafka.Addr().String()
	}
	if s.node != nil {
		c.RaftAddr = s.node.RaftAddr()
		if g := s.node.GossipAddr(); g != "" {
			c.GossipAddr = g
		}
	}
	return c
}

// leaveTimeout bounds the leadership transfers of a planned stop.
const leaveTimeout = 5 * time.Second

// ShardFor is the shard a group lives on: Kafka's partitionFor over the
// node's shard count (ShardCount). Any goroutine, once Start returned.
func (s *Server) ShardFor(groupID string) int32 {
	return groups.PartitionFor(groupID, s.ShardCount())
}

// ShardCount is the number of shards groups are hashed over on this node
// (offsets.topic.num.partitions as the cluster fixed it, whether or not
// this node's configuration sets it); 0 before Start has opened the node.
// Any goroutine.
func (s *Server) ShardCount() int32 { return s.shards.Load() }

// Node is the cluster node (nil before Start); tests use it for fault
// injection and leadership inspection.
func (s *Server) Node() *cluster.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// ReloadTLS reloads the Kafka listener's certificate and key from their
// files (SIGHUP); new connections get them, open ones keep theirs. A pair
// that does not load leaves the previous one served and is returned. A
// node without TLS has nothing to reload. Any goroutine.
func (s *Server) ReloadTLS() error {
	s.mu.Lock()
	certs := s.certs
	s.mu.Unlock()
	if certs == nil {
		return nil
	}
	return certs.reload()
}
