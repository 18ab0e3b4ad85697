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

	mu     sync.Mutex
	kafka  *transport.Server
	node   *cluster.Node
	coords []*groups.Coordinator
	states []*fsm.ShardFSM
	meta   *fsm.MetaFSM
	serve  chan error
	closed bool
	// stopRetention ends the retention loop; retentionDone closes when it
	// has.
	stopRetention chan struct{}
	retentionDone chan struct{}
	// metaLoaded is set once this node, as the metadata group's leader,
	// has applied every entry of earlier terms (the topic registry is
	// complete).
	metaLoaded atomic.Bool
	// metaEpoch counts metadata leadership changes, so a barrier that
	// finishes after a later loss does not set metaLoaded.
	metaEpoch atomic.Uint64
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
	}
	return s, nil
}

// Start binds the Kafka listener, starts every shard's Raft instance and
// serves. It returns once the listener accepts connections; Ready reports
// when the shards have leaders.
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
	kafka, err := transport.NewServer(tcfg, mux)
	if err != nil {
		return err
	}
	if err := kafka.Listen(); err != nil {
		return fmt.Errorf("kafka listener: %w", err)
	}
	s.kafka = kafka
	advertised := s.cfg.AdvertiseKafkaAddr
	if advertised == "" {
		advertised = kafka.Addr().String()
	}
	if err := s.startNode(advertised); err != nil {
		return err
	}
	h := api.New(api.Config{
		NodeID:                 s.cfg.NodeID,
		ClusterID:              "kcoord",
		OffsetMetadataMaxBytes: s.cfg.OffsetMetadataMaxBytes,
		OffsetsRetention:       s.cfg.OffsetsRetention,
		Logger:                 s.logger.Named("api"),
	}, s.node, &topicRegistry{shard: s.node.Shard(cluster.MetaShard), fsm: s.meta, timeout: s.cfg.OffsetsCommitTimeout}, s.apiShards())
	h.Register(mux)
	s.serve = make(chan error, 1)
	go func() { s.serve <- kafka.Serve() }()
	s.stopRetention = make(chan struct{})
	s.retentionDone = make(chan struct{})
	go s.retentionLoop(s.stopRetention, s.retentionDone)
	s.logger.Info("serving", "kafka", kafka.Addr().String(), "advertised", advertised, "raft", s.node.RaftAddr(), "shards", s.cfg.OffsetsTopicNumPartitions)
	return nil
}

// startNode builds the FSMs and coordinators and starts the Raft node.
// Called with s.mu held.
func (s *Server) startNode(advertised string) error {
	n := s.cfg.OffsetsTopicNumPartitions
	s.states = make([]*fsm.ShardFSM, n)
	s.coords = make([]*groups.Coordinator, n)
	s.meta = fsm.NewMetaFSM(s.logger.Named("meta"))
	for i := range s.states {
		s.states[i] = fsm.NewShardFSM(int32(i), s.logger.Named("fsm"))
	}
	ccfg := cluster.DefaultConfig()
	ccfg.NodeID, ccfg.DataDir = s.cfg.NodeID, s.cfg.DataDir
	ccfg.RaftAddr, ccfg.AdvertiseRaftAddr, ccfg.KafkaAddr = s.cfg.RaftAddr, s.cfg.AdvertiseRaftAddr, advertised
	ccfg.Shards, ccfg.BootstrapExpect = n, s.cfg.BootstrapExpect
	ccfg.ReplicationFactor = int(s.cfg.OffsetsTopicReplicationFactor)
	ccfg.GossipAddr, ccfg.AdvertiseGossipAddr, ccfg.Join = s.cfg.GossipAddr, s.cfg.AdvertiseGossipAddr, s.cfg.Join
	if s.cfg.Raft != nil {
		s.cfg.Raft(&ccfg)
	}
	ccfg.NewShardFSM = func(shard int32) raft.FSM { return s.states[shard] }
	ccfg.NewMetaFSM = func() raft.FSM { return s.meta }
	ccfg.OnLeadership = s.onLeadership
	ccfg.Logger = s.logger
	ccfg.RaftLogger = quiet(s.logger.Named("raft"), hclog.Warn)
	node, err := cluster.NewNode(ccfg)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	s.node = node
	return nil
}

// coordinator returns shard's coordinator, creating it on first use: the
// leadership callback can fire from inside cluster.NewNode, before Start
// could have built them from the node's shards.
func (s *Server) coordinator(shard int32) *groups.Coordinator {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coordinatorLocked(shard)
}

func (s *Server) coordinatorLocked(shard int32) *groups.Coordinator {
	if c := s.coords[shard]; c != nil {
		return c
	}
	gcfg := groups.DefaultConfig()
	gcfg.InitialRebalanceDelay = s.cfg.GroupInitialRebalanceDelay
	gcfg.MinSessionTimeout, gcfg.MaxSessionTimeout = s.cfg.GroupMinSessionTimeout, s.cfg.GroupMaxSessionTimeout
	gcfg.MaxSize, gcfg.WriteTimeout = s.cfg.GroupMaxSize, s.cfg.OffsetsCommitTimeout
	gcfg.Logger = s.logger.Named("groups")
	c, err := groups.NewCoordinator(gcfg, shard, &lazyLog{s: s, shard: shard}, s.states[shard])
	if err != nil {
		// The config was validated in New; this is a programming error.
		panic(err)
	}
	s.coords[shard] = c
	return c
}

// apiShards lists every shard's coordinator and state for the handlers.
// Called with s.mu held.
func (s *Server) apiShards() []api.Shard {
	out := make([]api.Shard, len(s.states))
	for i := range out {
		out[i] = api.Shard{Coordinator: s.coordinatorLocked(int32(i)), State: s.states[i]}
	}
	return out
}

// onLeadership is cluster's leadership callback, on the shard's leadership
// goroutine. Activation waits on Raft, so it runs on its own goroutine; the
// coordinator's epoch makes a late activation after a loss harmless.
func (s *Server) onLeadership(shard int32, leader bool) {
	if shard == cluster.MetaShard {
		s.onMetaLeadership(leader)
		return
	}
	c := s.coordinator(shard)
	if !leader {
		c.Deactivate()
		return
	}
	go func() {
		if err := c.Activate(); err != nil {
			s.logger.Warn("coordinator activation failed", "shard", shard, "error", err)
		}
	}()
}

// onMetaLeadership tracks whether the topic registry is current on this
// node when it leads the metadata group: after a restart, the registry is
// only complete once the new term's first entry committed.
func (s *Server) onMetaLeadership(leader bool) {
	s.logger.Info("metadata leadership", "leader", leader)
	s.metaLoaded.Store(false)
	epoch := s.metaEpoch.Add(1)
	if !leader {
		return
	}
	go func() {
		log := &lazyLog{s: s, shard: cluster.MetaShard}
		if err := log.Barrier(s.cfg.OffsetsCommitTimeout); err != nil {
			s.logger.Warn("metadata barrier failed", "error", err)
			return
		}
		if s.metaEpoch.Load() == epoch {
			s.metaLoaded.Store(true)
		}
	}()
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
	if meta := node.Shard(cluster.MetaShard); meta.IsLeader() && !s.metaLoaded.Load() {
		return false
	}
	for _, sh := range node.Shards() {
		if sh.IsLeader() && (coords[sh.ID] == nil || !coords[sh.ID].Active()) {
			return false
		}
	}
	return true
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
			node.Leave(leaveTimeout)
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

// Node is the cluster node (nil before Start); tests use it for fault
// injection and leadership inspection.
func (s *Server) Node() *cluster.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// lazyLog is a coordinator's Log: the shard is looked up on use because
// coordinators may be created while cluster.NewNode is still starting.
type lazyLog struct {
	s     *Server
	shard int32
}

func (l *lazyLog) raftShard() (*cluster.Shard, error) {
	l.s.mu.Lock()
	node := l.s.node
	l.s.mu.Unlock()
	if node == nil {
		return nil, raft.ErrNotLeader
	}
	return node.Shard(l.shard), nil
}

// ApplyAsync implements groups.Log.
func (l *lazyLog) ApplyAsync(cmd []byte, timeout time.Duration) raft.ApplyFuture {
	sh, err := l.raftShard()
	if err != nil {
		return groups.FailedFuture(err)
	}
	return sh.ApplyAsync(cmd, timeout)
}

// IsLeader implements groups.Log.
func (l *lazyLog) IsLeader() bool {
	sh, err := l.raftShard()
	return err == nil && sh.IsLeader()
}

// Barrier implements groups.Log.
func (l *lazyLog) Barrier(timeout time.Duration) error {
	sh, err := l.raftShard()
	if err != nil {
		return err
	}
	return sh.Barrier(timeout)
}
