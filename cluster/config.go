package cluster

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/cluster/raftnet"
)

// The log store kinds of Config.LogStore.
const (
	// LogStoreNode is one write-ahead log per node for every shard's Raft
	// log and stable store (package nodestore, DataDir/wal), with group
	// commit: appends that arrive together from different shards share one
	// write and one fsync.
	LogStoreNode = "node"
	// LogStoreShard is raft-boltdb, one file per shard: each shard's
	// appends pay their own transaction and fsyncs.
	LogStoreShard = "shard"
)

// MetaShard is the shard id of the metadata Raft group (topic registry,
// later users, ACLs and shard placement). Group shards are 0..Shards-1.
// It is raftnet.MetaShard, one of the Raft port's reserved stream ids.
const MetaShard = raftnet.MetaShard

// Config configures a Node. Start from DefaultConfig. Zero-valued durations
// and sizes (Raft timings, gossip intervals, JoinTimeout, ...), an empty
// LogStore and a nil Logger take their defaults in Open and Validate;
// NodeID and BootstrapExpect are used as given (BootstrapExpect 0
// means "join, never bootstrap", not "default"); Shards 0 means "the
// cluster's" (see Shards).
type Config struct {
	// NodeID is this node's id: the Kafka broker id and the Raft server id
	// (its decimal string) in every shard.
	NodeID int32

	// DataDir holds the Raft state: DataDir/shards/<id> per group shard,
	// DataDir/meta for MetaShard, and DataDir/node.json recording NodeID and
	// the shard count once the node has been initialised.
	DataDir string

	// RaftAddr is the host:port of the one TCP listener shared by the Raft
	// instances of every shard. Port 0 picks a free port.
	RaftAddr string

	// AdvertiseRaftAddr is the host:port peers dial to reach RaftAddr. Empty
	// means the bound listener address, which must then not be an unspecified
	// IP (0.0.0.0 or ::).
	AdvertiseRaftAddr string

	// RaftTLSCertFile and RaftTLSKeyFile (PEM) are this node's certificate
	// and key on the Raft port, and RaftTLSCAFile (PEM) the CA certificates
	// its peers' must chain to: set all three or none. With them every
	// connection of the port, accepted or dialed, speaks mutual TLS 1.2+
	// before anything else, and a peer without a certificate of that CA
	// (for both client and server auth; its name is not checked) is
	// refused. The files are re-read when they change. See rafttls.go.
	RaftTLSCertFile, RaftTLSKeyFile, RaftTLSCAFile string

	// KafkaAddr is the advertised Kafka host:port of this node, as reported by
	// Brokers and LeaderOf.
	KafkaAddr string

	// Shards is offsets.topic.num.partitions: the number of group shards,
	// fixed when the cluster bootstraps. 0 (unset, the default) means the
	// cluster's: the count node.json records on an initialised data dir;
	// on a fresh one, the count the seeds' cluster advertises when Join
	// finds one, else DefaultShards for a new cluster. A set count must be
	// the recorded one (else ErrDataDirMismatch) and the seeds' cluster's
	// (else ErrShardCountMismatch), and the nodes of a multi-node bootstrap
	// must agree on it. Node.ShardCount is the count a node runs. See
	// shardcount.go.
	Shards int32

	// BootstrapExpect says whether and how this node may bootstrap a new
	// cluster, the first time it starts on an empty DataDir:
	//
	//   - 0: never. The node joins an existing cluster through Join: it
	//     adopts the cluster's id from its seeds and holds no replica until
	//     a shard leader adds it (or a test bootstraps it by hand with
	//     Raft.BootstrapCluster). `kcoord serve --join` without
	//     --bootstrap-expect gives 0.
	//   - 1: alone, as a cluster of one (every shard a single voter). With
	//     Join, only if the seeds show no live cluster (no peer holding Raft
	//     state): a node that finds one joins it instead.
	//   - N > 1: together with N-1 others (GossipAddr must be set): once
	//     exactly N nodes, all expecting N, all advertise the same view of
	//     each other (and none holds state), each bootstraps the shards it is
	//     placed on (see placement) under one cluster id. More nodes than N
	//     starting at once is an error, logged once: nobody bootstraps.
	//
	// A node whose shards hold Raft state, or that has a cluster id, never
	// bootstraps, whatever BootstrapExpect says.
	BootstrapExpect int

	// JoinTimeout (wall-clock duration) bounds how long Start waits, on an
	// empty DataDir with Join set, for a seed to answer before any shard's
	// Raft starts: the node must learn its peers' views first, to refuse to
	// start when its id is a voter of theirs (ErrEmptyDataDirVoter) and to
	// adopt their cluster id. When no seed answers in time, Start goes on
	// and records the data dir as awaiting peers (see node.json): the node
	// keeps joining in the background, accepts no Raft traffic of any
	// cluster until gossip confirms it holds no seat there, and never
	// adopts the id of a cluster that lists it as a voter (it logs the same
	// advice as ErrEmptyDataDirVoter instead). Default 10s.
	JoinTimeout time.Duration

	// LogStore is where a new data dir keeps the shards' Raft logs:
	// LogStoreNode (default: one write-ahead log, group commit across shards) or
	// LogStoreShard (one raft-boltdb file per shard). A data dir keeps the
	// kind it was created with.
	LogStore string

	// ReplicationFactor is offsets.topic.replication.factor: voters per
	// shard, capped at BootstrapExpect. Default 3.
	ReplicationFactor int

	// GossipAddr is the host:port memberlist binds; empty runs no gossip
	// (a single node). Port 0 picks a free port.
	GossipAddr string
	// AdvertiseGossipAddr is the host:port other nodes reach for gossip;
	// empty lets memberlist pick (the bound address, or a private IP when
	// bound to 0.0.0.0).
	AdvertiseGossipAddr string
	// Join lists gossip seeds (host:port); joining retries until one answers.
	// Needs GossipAddr.
	Join []string
	// GossipKeyFile, if set, encrypts gossip with the keys it holds: one
	// base64 key (16, 24 or 32 bytes) a line, the first encrypting, all
	// decrypting, so that keys can be rotated; re-read when it changes.
	// Every node of a cluster needs a matching file. Needs GossipAddr. See
	// gossipkey.go.
	GossipKeyFile string
	// GossipProbeInterval (wall-clock duration) is memberlist's failure
	// probe interval. Default 1s.
	GossipProbeInterval time.Duration
	// GossipPushPullInterval (wall-clock duration) is how often nodes
	// exchange their full state (members, leader table). Default 5s.
	GossipPushPullInterval time.Duration

	// PlayApplyLevel makes the node gossip that it applies command types
	// up to this one only, as an older release does (0: this build's,
	// fsm.LatestCommandType). For tests of rolling upgrades.
	PlayApplyLevel int
	// BalanceInterval (wall-clock duration) is how often a node checks that
	// it leads no more than its share of group shards. Default 5s.
	BalanceInterval time.Duration
	// PlacementInterval (wall-clock duration) is how often the metadata
	// leader revises the shards' desired voters and each shard leader
	// moves its configuration one step towards them (placer.go). Default 1s.
	PlacementInterval time.Duration
	// MaxConcurrentMoves is kcoord.placement.max.concurrent.moves: the most
	// shards whose configuration differs from their desired voters at once,
	// so that moves (a snapshot sent to each new replica) never take the
	// cluster's whole bandwidth. Default 4.
	MaxConcurrentMoves int
	// SnapshotThrottleRate is leader.replication.throttled.rate: the bytes
	// a second this node sends of Raft snapshots, over all its shards (a
	// snapshot goes to each replica a move adds, and to a follower that
	// fell behind the log). 0 is the default, raftnet's
	// UnthrottledSnapshotRate, as Kafka's; otherwise at least
	// raftnet.MinSnapshotRate.
	SnapshotThrottleRate int64

	// MaxSyncDuration is kcoord.log.max.sync.ms: a write or fsync of the
	// node store (LogStoreNode) still in flight after it marks the node's
	// disk stalled, and the node fences itself (diskfence.go) until the
	// disk answers again. Default DefaultMaxSyncDuration; negative turns
	// the watchdog off.
	MaxSyncDuration time.Duration
	// ManualFeatureFinalize leaves finalizing feature levels to an
	// operator (FinalizeFeature, `kcoord cluster features --finalize`);
	// by default (false: kcoord.features.auto.finalize=true) the metadata
	// leader finalizes the highest level every node supports by itself.
	ManualFeatureFinalize bool
	// UnsafeIgnoreFeatureLevels plants a bug for the upgrade test: the
	// node writes the formats of its highest feature level without
	// waiting for the cluster to finalize it, which a node of the previous
	// release cannot apply.
	UnsafeIgnoreFeatureLevels bool

	// UnsafeSkipSync plants a bug for the chaos suite: the node store
	// acknowledges writes without fdatasync (nodestore.Options).
	UnsafeSkipSync bool
	// ObserveLogSync, when set, is told how long each group commit's write
	// and fdatasync of the node store took (kcoord_log_sync_seconds). It
	// runs on the store's committer goroutine and must not block.
	ObserveLogSync func(time.Duration)

	// NewShardFSM builds the FSM of a group shard. Open calls it once per
	// shard.
	NewShardFSM func(shard int32) raft.FSM
	// NewMetaFSM builds the FSM of MetaShard. Open calls it once.
	NewMetaFSM func() raft.FSM

	// OnLeadership, if set, is called whenever this node gains (true) or
	// loses (false) leadership of a shard, MetaShard included. Calls come from
	// one goroutine per shard, in order per shard; Shutdown delivers the final
	// loss of leadership before it returns. It may block briefly, but not on
	// Raft applies of the same shard.
	OnLeadership func(shard int32, isLeader bool)

	// Inspect, if set, answers other nodes' inspection queries (see
	// Inspector and Node.Inspect).
	Inspect Inspector

	// RaftLogger receives hashicorp/raft's own logs (elections, snapshots,
	// RPC errors) with a "shard" key; nil means Logger.Named("raft"). With
	// dozens of shards per node they are many: callers usually pass a logger
	// that keeps only warnings.
	RaftLogger hclog.Logger

	// Logger receives the node's logs; Raft logs go to Logger.Named("raft")
	// with a "shard" key. Nil means hclog.Default().
	Logger hclog.Logger

	// HeartbeatTimeout (wall-clock duration) is how long a follower goes
	// without contact from a leader before it starts an election; the leader
	// heartbeats at a tenth of it. Default 500ms: a LAN round trip is well
	// under a millisecond, and a group whose coordinator died must have a
	// new one before its members' clients give up on it (franz-go rejoins
	// after about 2s of failed heartbeats).
	HeartbeatTimeout time.Duration
	// ElectionTimeout (wall-clock duration) is how long a candidate waits for
	// votes before retrying. Must be >= HeartbeatTimeout. Default 500ms.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout (wall-clock duration): a leader that has not heard
	// from a quorum for this long steps down. Must be <= HeartbeatTimeout.
	// Default 250ms.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout (wall-clock duration) is the longest the metadata
	// group's leader waits without new entries before it sends followers an
	// AppendEntries, so they learn the commit index and apply promptly:
	// every node serves the topic registry from its own replica. Default
	// 50ms.
	CommitTimeout time.Duration
	// GroupCommitTimeout is CommitTimeout of the group shards. Default
	// 500ms: no one reads a group shard's follower, and while commits flow
	// every AppendEntries carries the commit index anyway; only the last
	// entries of a burst wait for it. At 50ms these sends to every follower
	// of every idle shard were half of an idle cluster's CPU (they go
	// through the follower's Raft loop and log, unlike heartbeats). It is
	// also when hashicorp/raft retries a failed send to a follower if no new
	// entry comes: a commit that needs that follower for its quorum (one
	// voter down) waits up to twice it after a broken connection, which is
	// why it is not longer.
	GroupCommitTimeout time.Duration
	// HeartbeatReuse is how long a follower's successful answer in a
	// frame of coalesced heartbeats answers a shard leader's next
	// heartbeats to it without a send (see heartbeats.go). Frames go to
	// each peer every nine tenths of it, for every shard (beathub.go).
	// Zero means a quarter of HeartbeatTimeout (125ms by default; less
	// when LeaderLeaseTimeout leaves less room, see validate); negative
	// sends every heartbeat one by one, and turns frames and
	// LeaderHeartbeatTimeout off. At most a quarter of HeartbeatTimeout,
	// and below HeartbeatTimeout - LeaderLeaseTimeout.
	HeartbeatReuse time.Duration
	// LeaderHeartbeatTimeout is the HeartbeatTimeout a shard's Raft runs
	// with while it leads (Shard.paceHeartbeats): hashicorp/raft's leader
	// heartbeats each follower every tenth to fifth of its own
	// HeartbeatTimeout, and with frames carrying the followers' contact
	// (HeartbeatReuse) those heartbeats only refresh the leader's lease
	// and are answered at home. Zero means the longest validate allows, at
	// most twice HeartbeatTimeout (833ms by default, heartbeats every
	// 83–167ms instead of 50–100ms); it is HeartbeatTimeout when
	// HeartbeatReuse is off. Its fifth must leave a third of
	// LeaderLeaseTimeout for a late timer: at most 10/3 of the lease.
	LeaderHeartbeatTimeout time.Duration

	// SnapshotInterval (wall-clock duration) is how often each shard checks
	// whether to snapshot (staggered randomly up to twice this). Default 120s.
	SnapshotInterval time.Duration
	// SnapshotThreshold is the number of log entries since the last snapshot
	// that triggers a snapshot. Default 8192.
	SnapshotThreshold uint64
	// TrailingLogs is the number of log entries kept after a snapshot, so a
	// lagging follower can catch up from the log. Default 10240.
	TrailingLogs uint64
	// SnapshotRetain is the number of snapshots kept per shard. Default 2.
	SnapshotRetain int

	// MaxAppendEntries is the most entries in one AppendEntries RPC, and the
	// size of the Apply batch buffer. Default 64, at most 1024.
	MaxAppendEntries int
	// TransportTimeout (wall-clock duration) is the I/O deadline of Raft RPCs
	// and dials. Default 10s.
	TransportTimeout time.Duration
	// TransportMaxPool is the number of idle outbound connections kept per
	// peer and shard. Default 3.
	TransportMaxPool int
	// SeparateAppendStreams sends each shard's AppendEntries on the
	// shard's own connections, as hashicorp/raft's NetworkTransport does,
	// instead of one append stream per peer for every shard (appendhub.go).
	// For comparisons and for peers that misbehave on the shared stream.
	SeparateAppendStreams bool
	// PipelineAppends lets each shard leader's Raft pipeline its
	// AppendEntries to a follower on the append stream, up to 8 in
	// flight, instead of sending one and waiting for its answer
	// (raftnet's pipeline.go, which hashicorp/raft's pipeline deadlock
	// cannot park). Leader-side only: followers of any release take the
	// requests. No effect with SeparateAppendStreams. Default off, until
	// it measures better than one at a time (BenchmarkReplicatePipeline).
	PipelineAppends bool

	// DisableElectionNudge turns off fast single-voter elections. By default,
	// a shard whose configuration has this node as its only voter starts its
	// election as soon as it is started instead of after 1-2 HeartbeatTimeouts,
	// so a fresh or restarted single node is ready in milliseconds whatever
	// the timeouts. Multi-voter shards are never nudged.
	DisableElectionNudge bool

	// slowSyncFloor (tests only) replaces defaultSlowSyncFloor, the sync
	// time below which no disk counts as slow (slowdisk.go).
	slowSyncFloor time.Duration
	// hiddenPeers (tests only) are node ids this node's gossip treats as
	// unreachable: their alive messages are dropped, as if a network
	// partition hid them, so tests can give nodes different views.
	hiddenPeers []int32
	// stallBootstrap (tests only) makes the node take part in a multi-node
	// bootstrap (it gossips its proposal and view, so its peers agree on
	// it) but stops its cluster loop the moment it sees the agreement,
	// until Shutdown: its mux names no cluster, it writes no configuration
	// and its meta no longer changes, as if it crashed then.
	stallBootstrap bool
}

// DefaultConfig returns the configuration of `kcoord serve` with no flags: a
// single node (id 1, BootstrapExpect 1, no gossip) with the shard count left
// to its data dir (DefaultShards for a new one), Raft on
// 127.0.0.1:9093, Kafka advertised at 127.0.0.1:9092, data in ./kcoord-data,
// and LAN-suited Raft timings (those of hashicorp/raft's DefaultConfig). The
// FSM constructors must still be set.
func DefaultConfig() Config {
	return Config{
		NodeID:             1,
		DataDir:            "./kcoord-data",
		RaftAddr:           "127.0.0.1:9093",
		KafkaAddr:          "127.0.0.1:9092",
		BootstrapExpect:    1,
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		GroupCommitTimeout: 500 * time.Millisecond,
		SnapshotInterval:   120 * time.Second,
		SnapshotThreshold:  8192,
		TrailingLogs:       10240,
		SnapshotRetain:     2,
		MaxAppendEntries:   64,
		TransportTimeout:   10 * time.Second,
		TransportMaxPool:   3,

		LogStore:               LogStoreNode,
		ReplicationFactor:      3,
		GossipProbeInterval:    time.Second,
		GossipPushPullInterval: 5 * time.Second,
		BalanceInterval:        5 * time.Second,
		PlacementInterval:      time.Second,
		MaxConcurrentMoves:     4,
		JoinTimeout:            10 * time.Second,
		MaxSyncDuration:        DefaultMaxSyncDuration,
	}
}

// withDefaults returns a copy of c with zero-valued tunables set to their
// defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Logger == nil {
		c.Logger = hclog.Default()
	}
	if c.RaftLogger == nil {
		c.RaftLogger = c.Logger.Named("raft")
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = d.HeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = d.ElectionTimeout
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = d.LeaderLeaseTimeout
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = d.CommitTimeout
	}
	if c.HeartbeatReuse == 0 {
		// Within validate's bounds whatever the other timings: a lease
		// close to the heartbeat timeout leaves less room, none turns it
		// off.
		c.HeartbeatReuse = min(time.Duration(float64(c.HeartbeatTimeout)*raftnet.DefaultHeartbeatReuse), (c.HeartbeatTimeout-c.LeaderLeaseTimeout)/2)
		if c.HeartbeatReuse < minHeartbeatReuse {
			c.HeartbeatReuse = -1
		}
	}
	switch {
	case c.LeaderHeartbeatTimeout != 0:
	case c.HeartbeatReuse < 0:
		c.LeaderHeartbeatTimeout = c.HeartbeatTimeout
	default:
		c.LeaderHeartbeatTimeout = max(c.HeartbeatTimeout, min(2*c.HeartbeatTimeout, c.LeaderLeaseTimeout*10/3))
	}
	if c.GroupCommitTimeout == 0 {
		c.GroupCommitTimeout = d.GroupCommitTimeout
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = d.SnapshotInterval
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = d.SnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = d.TrailingLogs
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = d.SnapshotRetain
	}
	if c.MaxAppendEntries == 0 {
		c.MaxAppendEntries = d.MaxAppendEntries
	}
	if c.TransportTimeout == 0 {
		c.TransportTimeout = d.TransportTimeout
	}
	if c.TransportMaxPool == 0 {
		c.TransportMaxPool = d.TransportMaxPool
	}
	if c.LogStore == "" {
		c.LogStore = d.LogStore
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = d.ReplicationFactor
	}
	if c.GossipProbeInterval == 0 {
		c.GossipProbeInterval = d.GossipProbeInterval
	}
	if c.GossipPushPullInterval == 0 {
		c.GossipPushPullInterval = d.GossipPushPullInterval
	}
	if c.BalanceInterval == 0 {
		c.BalanceInterval = d.BalanceInterval
	}
	if c.JoinTimeout == 0 {
		c.JoinTimeout = d.JoinTimeout
	}
	if c.PlacementInterval == 0 {
		c.PlacementInterval = d.PlacementInterval
	}
	if c.MaxConcurrentMoves == 0 {
		c.MaxConcurrentMoves = d.MaxConcurrentMoves
	}
	if c.SnapshotThrottleRate == 0 {
		c.SnapshotThrottleRate = raftnet.UnthrottledSnapshotRate
	}
	if c.MaxSyncDuration == 0 {
		c.MaxSyncDuration = d.MaxSyncDuration
	}
	return c
}

// Validate reports whether c (with defaults applied to its zero-valued
// tunables) can start a node. Errors wrap ErrInvalidConfig.
func (c *Config) Validate() error {
	cc := c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if cc.NodeID < 0 {
		return bad("NodeID %d is negative", cc.NodeID)
	}
	if cc.DataDir == "" {
		return bad("DataDir is empty")
	}
	if _, _, err := net.SplitHostPort(cc.RaftAddr); err != nil {
		return bad("RaftAddr %q: %v", cc.RaftAddr, err)
	}
	if cc.AdvertiseRaftAddr != "" {
		if err := raftnet.CheckAdvertisable(cc.AdvertiseRaftAddr); err != nil {
			return bad("AdvertiseRaftAddr: %v", err)
		}
	}
	if _, _, err := net.SplitHostPort(cc.KafkaAddr); err != nil {
		return bad("KafkaAddr %q: %v", cc.KafkaAddr, err)
	}
	if cc.Shards < 0 {
		return bad("Shards %d is negative (0 leaves the count to the data dir or the cluster)", cc.Shards)
	}
	switch {
	case cc.BootstrapExpect < 0:
		return bad("BootstrapExpect %d is negative", cc.BootstrapExpect)
	case cc.BootstrapExpect > 1 && cc.GossipAddr == "":
		return bad("BootstrapExpect %d needs GossipAddr: nodes find each other through gossip", cc.BootstrapExpect)
	case len(cc.Join) > 0 && cc.GossipAddr == "":
		return bad("Join needs GossipAddr: seeds are gossip addresses")
	case cc.JoinTimeout < 0:
		return bad("JoinTimeout %v is negative", cc.JoinTimeout)
	case cc.LogStore != LogStoreNode && cc.LogStore != LogStoreShard:
		return bad("LogStore %q is neither %q nor %q", cc.LogStore, LogStoreNode, LogStoreShard)
	case cc.ReplicationFactor < 1:
		return bad("ReplicationFactor %d must be positive", cc.ReplicationFactor)
	case cc.GossipKeyFile != "" && cc.GossipAddr == "":
		return bad("GossipKeyFile needs GossipAddr: it encrypts gossip")
	case (cc.RaftTLSCertFile == "") != (cc.RaftTLSKeyFile == "") || (cc.RaftTLSCertFile == "") != (cc.RaftTLSCAFile == ""):
		return bad("RaftTLSCertFile, RaftTLSKeyFile and RaftTLSCAFile go together: mutual TLS needs this node's certificate, its key and the CA its peers' chain to")
	}
	if cc.GossipAddr != "" {
		if _, _, err := net.SplitHostPort(cc.GossipAddr); err != nil {
			return bad("GossipAddr %q: %v", cc.GossipAddr, err)
		}
	}
	if cc.NewShardFSM == nil {
		return bad("NewShardFSM is nil")
	}
	if cc.NewMetaFSM == nil {
		return bad("NewMetaFSM is nil")
	}
	if cc.SnapshotRetain < 1 {
		return bad("SnapshotRetain %d must be at least 1", cc.SnapshotRetain)
	}
	// A follower hears from its leader every nine tenths of
	// HeartbeatReuse plus a round trip in frames, or, for a shard frames
	// leave out, at raft's leader's heartbeat interval (up to a fifth of
	// LeaderHeartbeatTimeout, at most 2/5 of HeartbeatTimeout); under
	// half of HeartbeatTimeout, with room for a round trip, it is not
	// taken for cut off (Shard.Settling). And a partitioned leader steps
	// down after LeaderLeaseTimeout plus HeartbeatReuse, which must come
	// before a newer leader can be elected (HeartbeatTimeout).
	if cc.HeartbeatReuse > 0 && (cc.HeartbeatReuse < minHeartbeatReuse || cc.HeartbeatReuse > cc.HeartbeatTimeout/4 || cc.HeartbeatReuse+cc.LeaderLeaseTimeout >= cc.HeartbeatTimeout) {
		return bad("HeartbeatReuse %v must be at least %v (frames go every nine tenths of it), at most a quarter of HeartbeatTimeout %v, and below it minus LeaderLeaseTimeout %v", cc.HeartbeatReuse, minHeartbeatReuse, cc.HeartbeatTimeout, cc.LeaderLeaseTimeout)
	}
	// The lease counts each follower's last answer to raft's own
	// heartbeats, which come at most a fifth of LeaderHeartbeatTimeout
	// apart: a third of the lease is left for a late timer.
	if l := cc.LeaderHeartbeatTimeout; l < cc.HeartbeatTimeout || l > cc.HeartbeatTimeout && (l > 2*cc.HeartbeatTimeout || l > cc.LeaderLeaseTimeout*10/3) {
		return bad("LeaderHeartbeatTimeout %v must be at least HeartbeatTimeout %v, and longer only up to twice it and 10/3 of LeaderLeaseTimeout %v", l, cc.HeartbeatTimeout, cc.LeaderLeaseTimeout)
	}
	if cc.GroupCommitTimeout < time.Millisecond {
		return bad("GroupCommitTimeout %v must be at least 1ms", cc.GroupCommitTimeout)
	}
	if cc.TransportTimeout < 0 || cc.TransportMaxPool < 0 {
		return bad("TransportTimeout and TransportMaxPool must not be negative")
	}
	if cc.SnapshotThrottleRate < raftnet.MinSnapshotRate {
		return bad("SnapshotThrottleRate %d is below %d bytes a second (leader.replication.throttled.rate)", cc.SnapshotThrottleRate, raftnet.MinSnapshotRate)
	}
	for _, shard := range []int32{MetaShard, 0} {
		if err := raft.ValidateConfig(cc.raftConfig(shard)); err != nil {
			return bad("raft: %v", err)
		}
	}
	return nil
}

// minHeartbeatReuse is the shortest HeartbeatReuse: frames of coalesced
// heartbeats go to every peer every nine tenths of it, and below a few
// milliseconds they would go nonstop. A default that would be shorter (a
// lease close to HeartbeatTimeout) turns reuse and frames off.
const minHeartbeatReuse = 5 * time.Millisecond

// raftConfig is the hashicorp/raft configuration of one shard. NotifyCh is
// left for the caller.
func (c *Config) raftConfig(shard int32) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(c.NodeID)
	rc.Logger = c.RaftLogger.With("shard", shard)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	if shard != MetaShard {
		rc.CommitTimeout = c.GroupCommitTimeout
	}
	rc.SnapshotInterval = c.SnapshotInterval
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	rc.MaxAppendEntries = c.MaxAppendEntries
	rc.BatchApplyCh = true
	// Raft also emits every replication metric under a name holding the
	// peer (raft.replication.appendEntries.rpc.<peer>), on every
	// AppendEntries; raftSink exports only the labelled form.
	rc.NoLegacyTelemetry = true
	rc.NoSnapshotRestoreOnStart = false
	// A node removed from a shard's configuration keeps running (as a
	// non-voter without peers) rather than shutting that shard down: the node
	// still serves its other shards, and shard placement will re-add it.
	rc.ShutdownOnRemove = false
	return rc
}
