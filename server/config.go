package server

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/groups"
)

// Config is everything `kcoord serve` needs to run one node. The CLI fills it
// from flags, KCOORD_ environment variables, `-c key=value` pairs and a YAML
// config file; tests fill it directly. Kafka config names map to the fields in
// the Kafka block below (see KafkaConfigKeys).
type Config struct {
	// NodeID is this node's id; it is also the Kafka broker id given to clients.
	NodeID int32
	// DataDir holds every Raft log, stable store and snapshot of this node.
	DataDir string
	// KafkaAddr is the host:port the Kafka protocol listener binds.
	KafkaAddr string
	// AdvertiseKafkaAddr is the host:port given to clients in Metadata and
	// FindCoordinator; empty means KafkaAddr (after the listener resolved it).
	AdvertiseKafkaAddr string
	// TLSCertFile and TLSKeyFile (PEM) serve the Kafka listener over TLS
	// 1.2+ (--tls-cert-file, --tls-key-file); the pair is reloaded when the
	// files change and on SIGHUP. TLSClientCAFile (--tls-client-ca-file)
	// requires a client certificate from that CA (mutual TLS). Empty:
	// plaintext.
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// SASLEnabledMechanisms is sasl.enabled.mechanisms: a comma-separated
	// list of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 that every Kafka
	// connection must authenticate with (sasl.go). Empty: no SASL.
	SASLEnabledMechanisms string
	// SASLSuperuser is --sasl-superuser, the bootstrap superuser, and
	// SASLSuperuserPassword its password (KCOORD_SASL_SUPERUSER_PASSWORD or
	// --sasl-superuser-password-file): checked by this node itself, never
	// stored in the metadata group.
	SASLSuperuser, SASLSuperuserPassword string
	// SuperUsers is super.users: principals ("User:alice;User:bob") that
	// every authorization allows.
	SuperUsers string
	// ConnectionsMaxReauth is connections.max.reauth.ms: how long a SASL
	// session lasts before the client must re-authenticate (KIP-368); 0
	// for the connection's life, Kafka's default.
	ConnectionsMaxReauth time.Duration
	// SASLServerMaxReceiveSize is sasl.server.max.receive.size: the
	// largest frame a connection may send before it authenticates.
	SASLServerMaxReceiveSize int32
	// RaftAddr is the host:port every shard's Raft traffic shares.
	RaftAddr string
	// AdvertiseRaftAddr is the host:port other nodes dial for Raft; empty
	// means RaftAddr, which must then not be an unspecified IP.
	AdvertiseRaftAddr string
	// RaftTLSCertFile, RaftTLSKeyFile and RaftTLSCAFile (PEM;
	// --raft-tls-cert-file, --raft-tls-key-file, --raft-tls-ca-file; all
	// three or none) make the Raft port speak mutual TLS 1.2+: this node
	// presents the certificate, dialing and accepting, and requires its
	// peers' to chain to the CA (cluster.Config.RaftTLSCertFile). Empty:
	// plaintext.
	RaftTLSCertFile, RaftTLSKeyFile, RaftTLSCAFile string
	// GossipAddr is the host:port memberlist binds.
	GossipAddr string
	// AdvertiseGossipAddr is the host:port other nodes reach for gossip;
	// empty means GossipAddr, or a private IP of this host when GossipAddr
	// binds 0.0.0.0.
	AdvertiseGossipAddr string
	// GossipKeyFile (--gossip-key-file) encrypts gossip with the base64
	// keys it holds, one a line: the first encrypts, all decrypt, which is
	// how keys are rotated (cluster.Config.GossipKeyFile). Empty:
	// plaintext.
	GossipKeyFile string
	// HTTPAddr is the host:port of /healthz, /readyz and /metrics; empty disables it.
	HTTPAddr string
	// Pprof serves Go's profiler (net/http/pprof) under /debug/pprof/ on
	// HTTPAddr, which must then be set. Off by default: a profile costs
	// the node CPU while it runs, and anyone who reaches the HTTP address
	// could start one.
	Pprof bool
	// Join lists gossip seeds as host:port.
	Join []string
	// BootstrapExpect is how many nodes must see each other before the first
	// bootstrap of the Raft groups (1: bootstrap alone). 0, only with Join,
	// joins an existing cluster and never bootstraps.
	BootstrapExpect int

	// OffsetsTopicNumPartitions is offsets.topic.num.partitions: the number of
	// shards groups are hashed over, fixed when the cluster bootstraps. 0
	// (unset, the default) means the cluster's: the count the data dir
	// records, the one a joining node's seeds advertise, or
	// cluster.DefaultShards for a new cluster (cluster.Config.Shards). Set,
	// it must be the cluster's; it chooses a new cluster's count.
	// Server.ShardCount is the count the node runs.
	OffsetsTopicNumPartitions int32
	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor:
	// replicas per shard (capped at the number of nodes).
	OffsetsTopicReplicationFactor int32
	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms.
	GroupInitialRebalanceDelay time.Duration
	// GroupMinSessionTimeout is group.min.session.timeout.ms.
	GroupMinSessionTimeout time.Duration
	// GroupMaxSessionTimeout is group.max.session.timeout.ms.
	GroupMaxSessionTimeout time.Duration
	// GroupMaxSize is group.max.size: members per group.
	GroupMaxSize int32
	// GroupConsumer* are the consumer-protocol (KIP-848) group settings:
	// group.consumer.session.timeout.ms and its min/max bounds,
	// group.consumer.heartbeat.interval.ms and its bounds, and
	// group.consumer.max.size.
	GroupConsumerSessionTimeout       time.Duration
	GroupConsumerMinSessionTimeout    time.Duration
	GroupConsumerMaxSessionTimeout    time.Duration
	GroupConsumerHeartbeatInterval    time.Duration
	GroupConsumerMinHeartbeatInterval time.Duration
	GroupConsumerMaxHeartbeatInterval time.Duration
	GroupConsumerMaxSize              int32
	// GroupConsumerMigrationPolicy is group.consumer.migration.policy.
	GroupConsumerMigrationPolicy string
	// OffsetsRetention is offsets.retention.minutes.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms.
	OffsetsRetentionCheckInterval time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes, in bytes.
	OffsetMetadataMaxBytes int32
	// OffsetsCommitTimeout is offsets.commit.timeout.ms: how long a commit or
	// a group write waits for Raft before failing with REQUEST_TIMED_OUT.
	OffsetsCommitTimeout time.Duration
	// GroupElectionHold is kcoord.group.election.hold.ms: how long a group
	// request that reaches a replica while its shard's leadership settles
	// waits for the outcome before NOT_COORDINATOR (0: answer at once).
	GroupElectionHold time.Duration
	// PlacementMaxConcurrentMoves is kcoord.placement.max.concurrent.moves:
	// the most shards whose replicas move at once when nodes are added or
	// removed (cluster.Config.MaxConcurrentMoves).
	PlacementMaxConcurrentMoves int32
	// LeaderReplicationThrottledRate is leader.replication.throttled.rate:
	// the bytes a second this node sends of Raft snapshots, to the
	// replicas moves add and to followers that fell behind the log, over
	// all its shards (cluster.Config.SnapshotThrottleRate). Unbounded
	// (math.MaxInt64) by default, as in Kafka.
	LeaderReplicationThrottledRate int64
	// LogMaxSync is kcoord.log.max.sync.ms: a write or fsync of the node's
	// log still in flight after it marks the disk stalled, and the node
	// fences itself (stops leading, leaves routing, fails /readyz) until
	// the disk answers again (cluster.Config.MaxSyncDuration). 0 turns the
	// watchdog off.
	LogMaxSync time.Duration
	// MetadataMaxStaleness is kcoord.metadata.max.staleness.ms: how long a
	// node that authenticates its clients trusts its replica of the
	// metadata group (users, ACLs) after a read barrier last brought it up
	// to the leader's. Past it, the node runs one before it serves a
	// request, and closes the connection when it cannot, so that a node
	// cut off from the cluster stops allowing what the others revoked
	// (cluster.Node.MetadataFresh).
	MetadataMaxStaleness time.Duration
	// FeaturesAutoFinalize is kcoord.features.auto.finalize: the metadata
	// leader finalizes the highest kcoord.version level every node
	// supports by itself (true, the default), or leaves it to `kcoord
	// cluster features --finalize` (cluster.Config.ManualFeatureFinalize).
	FeaturesAutoFinalize bool
	// ShutdownDrain is kcoord.shutdown.drain.ms: after a planned stop has
	// moved this node's shard leaderships away, how long its Kafka listener
	// keeps answering (NOT_COORDINATOR to group requests, the new leaders
	// to FindCoordinator, Metadata without this node) so every member's
	// next heartbeat finds the new coordinator rather than a closed port
	// (sarama and kafka-go end a member's session when their coordinator's
	// port refuses them). Above the clients' heartbeat interval (3 s in
	// franz-go, sarama, kafka-go and librdkafka); 0 closes at once.
	ShutdownDrain time.Duration
	// Raft, when set, adjusts the cluster configuration before the node
	// starts (Raft timings, balance interval); tests use it. Not a flag.
	Raft func(*cluster.Config) `yaml:"-"`
	// Groups, when set, adjusts every shard's coordinator configuration
	// after the Kafka names have filled it (benchmarks compare read
	// modes with it). Not a flag.
	Groups func(*groups.Config) `yaml:"-"`
	// FaultInjection serves /debug/faults/raft on the HTTP address (see
	// Server.FaultHandler), for the chaos suite. Hidden test-only flag
	// --fault-injection; never on in production.
	FaultInjection bool `yaml:"-"`
	// UnsafeAckBeforeCommit plants a bug: OffsetCommit is answered before
	// Raft commits it (groups.Config.UnsafeAckBeforeCommit). Hidden
	// test-only flag --unsafe-ack-before-commit, to prove the chaos
	// checkers catch what it loses.
	UnsafeAckBeforeCommit bool `yaml:"-"`
	// UnsafeSkipFsync plants a bug: the node's log acknowledges writes
	// without fdatasync (nodestore.Options.UnsafeSkipSync). Hidden
	// test-only flag --unsafe-skip-fsync, to prove the chaos suite's
	// power-loss nemesis catches what it loses.
	UnsafeSkipFsync bool `yaml:"-"`
	// UnsafeIgnoreFeatureLevels plants a bug: the node writes the formats
	// of its newest feature level before the cluster finalized it
	// (cluster.Config.UnsafeIgnoreFeatureLevels). Hidden test-only flag
	// --unsafe-ignore-feature-levels, to prove the upgrade test catches a
	// format written without its level.
	UnsafeIgnoreFeatureLevels bool `yaml:"-"`

	// SocketRequestMaxBytes is socket.request.max.bytes: the largest request
	// frame accepted, in bytes; a larger one closes the connection.
	SocketRequestMaxBytes int32
	// MaxConnections is max.connections: the most Kafka connections served
	// at once, as a count.
	MaxConnections int32
	// MaxConnectionsPerIP is max.connections.per.ip: the most Kafka
	// connections served at once from one client IP address, as a count.
	MaxConnectionsPerIP int32
	// QueuedMaxRequestBytes is queued.max.request.bytes: the most bytes of
	// requests read and not yet answered, over all connections, before the
	// listener stops reading; -1 means unbounded. At least
	// SocketRequestMaxBytes otherwise.
	QueuedMaxRequestBytes int64

	// MaxPartitionsPerTopic is kcoord.max.partitions.per.topic: the most
	// partitions one topic may have (CreateTopics beyond it answers
	// INVALID_PARTITIONS).
	MaxPartitionsPerTopic int32
	// MaxTopics is kcoord.max.topics: the most topics the registry holds
	// (CreateTopics beyond it answers POLICY_VIOLATION).
	MaxTopics int32
	// MaxPartitions is kcoord.max.partitions: the most partitions of all
	// registered topics together (CreateTopics beyond it answers
	// POLICY_VIOLATION).
	MaxPartitions int32
	// OffsetsCommitUnregisteredTopics is
	// kcoord.offsets.commit.unregistered.topics.enable: OffsetCommit takes
	// offsets of topics that are not in the registry, for data planes whose
	// topics kcoord does not own. Off, as in Kafka, they are
	// UNKNOWN_TOPIC_OR_PARTITION.
	OffsetsCommitUnregisteredTopics bool
}

// DefaultConfig returns the configuration of `kcoord serve` with no flags: a
// single node on loopback with Kafka's defaults, and
// offsets.topic.num.partitions unset (the cluster's count; see
// OffsetsTopicNumPartitions).
func DefaultConfig() Config {
	return Config{
		NodeID:                        1,
		DataDir:                       "./kcoord-data",
		KafkaAddr:                     "127.0.0.1:9092",
		RaftAddr:                      "127.0.0.1:9093",
		GossipAddr:                    "127.0.0.1:7946",
		HTTPAddr:                      "127.0.0.1:9644",
		BootstrapExpect:               1,
		OffsetsTopicReplicationFactor: 3,
		GroupInitialRebalanceDelay:    3 * time.Second,
		GroupMinSessionTimeout:        6 * time.Second,
		GroupMaxSessionTimeout:        30 * time.Minute,
		GroupMaxSize:                  2147483647,

		GroupConsumerSessionTimeout:       45 * time.Second,
		GroupConsumerMinSessionTimeout:    45 * time.Second,
		GroupConsumerMaxSessionTimeout:    60 * time.Second,
		GroupConsumerHeartbeatInterval:    5 * time.Second,
		GroupConsumerMinHeartbeatInterval: 5 * time.Second,
		GroupConsumerMaxHeartbeatInterval: 15 * time.Second,
		GroupConsumerMaxSize:              2147483647,
		GroupConsumerMigrationPolicy:      "bidirectional",

		OffsetsRetention:               10080 * time.Minute,
		OffsetsRetentionCheckInterval:  10 * time.Minute,
		OffsetMetadataMaxBytes:         4096,
		OffsetsCommitTimeout:           5 * time.Second,
		GroupElectionHold:              2 * time.Second,
		PlacementMaxConcurrentMoves:    4,
		LeaderReplicationThrottledRate: raftnet.UnthrottledSnapshotRate,
		ShutdownDrain:                  4 * time.Second,
		LogMaxSync:                     cluster.DefaultMaxSyncDuration,
		MetadataMaxStaleness:           5 * time.Second,
		FeaturesAutoFinalize:           true,
		SocketRequestMaxBytes:          104857600,
		SASLServerMaxReceiveSize:       524288,
		MaxConnections:                 2147483647,
		MaxConnectionsPerIP:            2147483647,
		QueuedMaxRequestBytes:          209715200,
		MaxPartitionsPerTopic:          4096,
		MaxTopics:                      10000,
		MaxPartitions:                  100000,
	}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir must be set"))
	}
	for name, addr := range map[string]string{"kafka-addr": c.KafkaAddr, "raft-addr": c.RaftAddr, "gossip-addr": c.GossipAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, addr, err))
		}
	}
	for name, addr := range map[string]string{"advertise-kafka-addr": c.AdvertiseKafkaAddr, "advertise-raft-addr": c.AdvertiseRaftAddr, "advertise-gossip-addr": c.AdvertiseGossipAddr} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, addr, err))
		}
	}
	if err := c.validateTLS(); err != nil {
		errs = append(errs, err)
	}
	if (c.RaftTLSCertFile == "") != (c.RaftTLSKeyFile == "") || (c.RaftTLSCertFile == "") != (c.RaftTLSCAFile == "") {
		errs = append(errs, errors.New("raft-tls-cert-file, raft-tls-key-file and raft-tls-ca-file go together: mutual TLS on the Raft port needs this node's certificate, its key and the CA its peers' certificates chain to"))
	}
	if err := c.validateSASL(); err != nil {
		errs = append(errs, err)
	}
	if c.Pprof && c.HTTPAddr == "" {
		errs = append(errs, errors.New("pprof needs http-addr: the profiler is served there"))
	}
	switch {
	case c.BootstrapExpect < 0:
		errs = append(errs, errors.New("bootstrap-expect must not be negative"))
	case c.BootstrapExpect == 0 && len(c.Join) == 0:
		errs = append(errs, errors.New("bootstrap-expect must be at least 1 without --join (0 joins an existing cluster)"))
	}
	if c.OffsetsTopicNumPartitions < 0 {
		errs = append(errs, errors.New("offsets.topic.num.partitions must be at least 1 (or unset: the cluster's)"))
	}
	if c.OffsetsTopicReplicationFactor < 1 {
		errs = append(errs, errors.New("offsets.topic.replication.factor must be at least 1"))
	}
	if c.GroupInitialRebalanceDelay < 0 {
		errs = append(errs, errors.New("group.initial.rebalance.delay.ms must not be negative"))
	}
	if c.GroupMinSessionTimeout < 0 || c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout {
		errs = append(errs, errors.New("group.min.session.timeout.ms must be >= 0 and <= group.max.session.timeout.ms"))
	}
	if c.GroupMaxSize < 1 {
		errs = append(errs, errors.New("group.max.size must be at least 1"))
	}
	if err := c.consumerGroupConfig(&groups.Config{}); err != nil {
		errs = append(errs, err)
	}
	if c.OffsetsRetention <= 0 {
		errs = append(errs, errors.New("offsets.retention.minutes must be positive"))
	}
	if c.OffsetsRetentionCheckInterval <= 0 {
		errs = append(errs, errors.New("offsets.retention.check.interval.ms must be positive"))
	}
	if c.OffsetMetadataMaxBytes < 0 {
		errs = append(errs, errors.New("offset.metadata.max.bytes must not be negative"))
	}
	if c.OffsetsCommitTimeout <= 0 {
		errs = append(errs, errors.New("offsets.commit.timeout.ms must be positive"))
	}
	if c.ShutdownDrain < 0 {
		errs = append(errs, errors.New("kcoord.shutdown.drain.ms must not be negative"))
	}
	if c.MetadataMaxStaleness <= 0 {
		errs = append(errs, errors.New("kcoord.metadata.max.staleness.ms must be positive"))
	}
	if c.LogMaxSync < 0 {
		errs = append(errs, errors.New("kcoord.log.max.sync.ms must not be negative (0 turns the disk watchdog off)"))
	}
	if c.GroupElectionHold < 0 {
		errs = append(errs, errors.New("kcoord.group.election.hold.ms must not be negative"))
	}
	if c.SocketRequestMaxBytes < 1 {
		errs = append(errs, errors.New("socket.request.max.bytes must be positive"))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, errors.New("max.connections must be at least 1"))
	}
	if c.MaxConnectionsPerIP < 1 {
		errs = append(errs, errors.New("max.connections.per.ip must be at least 1"))
	}
	if c.QueuedMaxRequestBytes != -1 && c.QueuedMaxRequestBytes < int64(c.SocketRequestMaxBytes) {
		errs = append(errs, fmt.Errorf("queued.max.request.bytes must be -1 (unbounded) or at least socket.request.max.bytes (%d)", c.SocketRequestMaxBytes))
	}
	if c.MaxPartitionsPerTopic < 1 {
		errs = append(errs, errors.New("kcoord.max.partitions.per.topic must be at least 1"))
	}
	if c.MaxTopics < 1 {
		errs = append(errs, errors.New("kcoord.max.topics must be at least 1"))
	}
	if c.MaxPartitions < 1 {
		errs = append(errs, errors.New("kcoord.max.partitions must be at least 1"))
	}
	return errors.Join(errs...)
}

// consumerGroupConfig copies the consumer-protocol group settings into
// cfg and checks them together (the session timeout within its bounds and
// above the heartbeat interval), as Kafka checks them at startup.
func (c *Config) consumerGroupConfig(cfg *groups.Config) error {
	cfg.ConsumerSessionTimeout, cfg.ConsumerMinSessionTimeout, cfg.ConsumerMaxSessionTimeout =
		c.GroupConsumerSessionTimeout, c.GroupConsumerMinSessionTimeout, c.GroupConsumerMaxSessionTimeout
	cfg.ConsumerHeartbeatInterval, cfg.ConsumerMinHeartbeatInterval, cfg.ConsumerMaxHeartbeatInterval =
		c.GroupConsumerHeartbeatInterval, c.GroupConsumerMinHeartbeatInterval, c.GroupConsumerMaxHeartbeatInterval
	cfg.ConsumerMaxSize = c.GroupConsumerMaxSize
	cfg.MigrationPolicy = groups.MigrationPolicy(c.GroupConsumerMigrationPolicy)
	if cfg.ServerAssignors == nil {
		cfg.ServerAssignors = groups.DefaultConfig().ServerAssignors
	}
	return cfg.ValidateConsumer()
}
