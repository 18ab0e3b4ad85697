package server

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/cluster/raftnet"
)

// kafkaKey maps one Kafka broker config name to a Config field; exactly one
// of the field pointers is set. Numbers are integers, as in Kafka; min and
// max bound what SetKafkaConfig accepts (max is the range of the Kafka type:
// SHORT, INT or LONG, or what a time.Duration can hold). Booleans are
// Kafka's BOOLEAN: true or false, in any case. Validate checks the relations
// between fields.
//
// Names starting with "kcoord." are kcoord's own settings, which Kafka has
// no equivalent of.
type kafkaKey struct {
	name     string
	min, max int64
	unit     time.Duration // 0: a plain number, else the unit of a duration
	int32p   func(c *Config) *int32
	int64p   func(c *Config) *int64
	durp     func(c *Config) *time.Duration
	boolp    func(c *Config) *bool
	// strp is a string field: one of choices when they are set (Kafka's
	// case-insensitive enumerations; stored lower-case), else free text
	// (trimmed) that Validate parses.
	strp    func(c *Config) *string
	choices []string
	// zeroUnset says 0 is not a value but "unset" (an int32 field whose
	// min is above 0): KafkaConfig answers "" for it.
	zeroUnset bool
	help      string
}

const (
	maxMillis  = int64(math.MaxInt64 / int64(time.Millisecond))
	maxMinutes = int64(math.MaxInt64 / int64(time.Minute))
)

// kafkaKeys lists the supported keys: design.md's table in its order, then
// the listener's limits, then kcoord's own.
var kafkaKeys = []kafkaKey{
	{name: "offsets.topic.num.partitions", min: 1, max: math.MaxInt32, zeroUnset: true,
		int32p: func(c *Config) *int32 { return &c.OffsetsTopicNumPartitions },
		help: fmt.Sprintf("shards groups are hashed over, fixed when the cluster bootstraps; unset, a node runs the count its data dir records, or its seeds' cluster's when it joins, or %d for a new cluster (set it only to choose a new cluster's count)",
			cluster.DefaultShards)},
	{name: "offsets.topic.replication.factor", min: 1, max: math.MaxInt16,
		int32p: func(c *Config) *int32 { return &c.OffsetsTopicReplicationFactor },
		help:   "replicas per shard, capped at the number of nodes"},
	{name: "group.initial.rebalance.delay.ms", min: 0, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupInitialRebalanceDelay },
		help: "how long the first rebalance of an empty group waits for more members"},
	{name: "group.min.session.timeout.ms", min: 0, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupMinSessionTimeout },
		help: "smallest session timeout a member may ask for"},
	{name: "group.max.session.timeout.ms", min: 0, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupMaxSessionTimeout },
		help: "largest session timeout a member may ask for"},
	{name: "group.max.size", min: 1, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.GroupMaxSize },
		help:   "members per group"},
	{name: "group.consumer.session.timeout.ms", min: 1, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupConsumerSessionTimeout },
		help: "how long a consumer-protocol (KIP-848) member may go without a heartbeat before it is fenced"},
	{name: "group.consumer.min.session.timeout.ms", min: 1, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupConsumerMinSessionTimeout },
		help: "lower bound of group.consumer.session.timeout.ms"},
	{name: "group.consumer.max.session.timeout.ms", min: 1, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupConsumerMaxSessionTimeout },
		help: "upper bound of group.consumer.session.timeout.ms"},
	{name: "group.consumer.heartbeat.interval.ms", min: 1, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupConsumerHeartbeatInterval },
		help: "how often consumer-protocol members are told to heartbeat; below the session timeout"},
	{name: "group.consumer.min.heartbeat.interval.ms", min: 1, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupConsumerMinHeartbeatInterval },
		help: "lower bound of group.consumer.heartbeat.interval.ms"},
	{name: "group.consumer.max.heartbeat.interval.ms", min: 1, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupConsumerMaxHeartbeatInterval },
		help: "upper bound of group.consumer.heartbeat.interval.ms"},
	{name: "group.consumer.max.size", min: 1, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.GroupConsumerMaxSize },
		help:   "members per consumer-protocol group"},
	{name: "group.consumer.migration.policy",
		strp:    func(c *Config) *string { return &c.GroupConsumerMigrationPolicy },
		choices: []string{"bidirectional", "upgrade", "downgrade", "disabled"},
		help:    "which way a group with members may change protocol: a KIP-848 member joining upgrades a classic group (upgrade, bidirectional); the last KIP-848 member leaving downgrades a group of classic members (downgrade, bidirectional); classic members may join a KIP-848 group unless disabled"},
	{name: "offsets.retention.minutes", min: 1, max: min(math.MaxInt32, maxMinutes), unit: time.Minute,
		durp: func(c *Config) *time.Duration { return &c.OffsetsRetention },
		help: "how long committed offsets of an empty group are kept"},
	{name: "offsets.retention.check.interval.ms", min: 1, max: maxMillis, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.OffsetsRetentionCheckInterval },
		help: "how often expired offsets are looked for"},
	{name: "offset.metadata.max.bytes", min: 0, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.OffsetMetadataMaxBytes },
		help:   "largest metadata string of a committed offset"},
	{name: "offsets.commit.timeout.ms", min: 1, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.OffsetsCommitTimeout },
		help: "how long a commit or group write waits for Raft before REQUEST_TIMED_OUT"},
	{name: "socket.request.max.bytes", min: 1, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.SocketRequestMaxBytes },
		help:   "largest request frame accepted; a larger one closes the connection"},
	{name: "max.connections", min: 1, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.MaxConnections },
		help:   "Kafka connections served at once"},
	{name: "max.connections.per.ip", min: 1, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.MaxConnectionsPerIP },
		help:   "Kafka connections served at once from one client IP"},
	{name: "queued.max.request.bytes", min: -1, max: math.MaxInt64,
		int64p: func(c *Config) *int64 { return &c.QueuedMaxRequestBytes },
		help:   "bytes of requests read and not yet answered before the listener stops reading; -1 unbounded"},
	{name: "sasl.enabled.mechanisms",
		strp: func(c *Config) *string { return &c.SASLEnabledMechanisms },
		help: "SASL mechanisms every Kafka connection must authenticate with, comma-separated: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; empty for no SASL"},
	{name: "super.users",
		strp: func(c *Config) *string { return &c.SuperUsers },
		help: "principals every authorization allows, semicolon-separated: User:alice;User:bob"},
	{name: "connections.max.reauth.ms", min: 0, max: maxMillis, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.ConnectionsMaxReauth },
		help: "how long a SASL session lasts before the client must re-authenticate; 0 for the connection's life"},
	{name: "sasl.server.max.receive.size", min: 1, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.SASLServerMaxReceiveSize },
		help:   "largest frame a connection may send before it has authenticated"},
	{name: "kcoord.max.partitions.per.topic", min: 1, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.MaxPartitionsPerTopic },
		help:   "partitions one topic may have; CreateTopics beyond it is INVALID_PARTITIONS"},
	{name: "kcoord.max.topics", min: 1, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.MaxTopics },
		help:   "topics the registry holds; CreateTopics beyond it is POLICY_VIOLATION"},
	{name: "kcoord.max.partitions", min: 1, max: math.MaxInt32,
		int32p: func(c *Config) *int32 { return &c.MaxPartitions },
		help:   "partitions of all registered topics together; CreateTopics beyond it is POLICY_VIOLATION"},
	{name: "kcoord.group.election.hold.ms", min: 0, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.GroupElectionHold },
		help: "how long a group request reaching a replica while its shard elects waits for the outcome before NOT_COORDINATOR"},
	{name: "kcoord.placement.max.concurrent.moves", min: 1, max: 1024,
		int32p: func(c *Config) *int32 { return &c.PlacementMaxConcurrentMoves },
		help:   "shards whose replicas move at once when nodes are added or removed"},
	{name: "leader.replication.throttled.rate", min: raftnet.MinSnapshotRate, max: math.MaxInt64,
		int64p: func(c *Config) *int64 { return &c.LeaderReplicationThrottledRate },
		help:   "bytes a second this node sends of Raft snapshots, to the replicas a move adds and to followers behind the log, over all its shards; the default is unbounded, as in Kafka"},
	{name: "kcoord.log.max.sync.ms", min: 0, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.LogMaxSync },
		help: "a write or fsync of the node's log still in flight after this fences the node (it stops leading and serving until the disk answers); 0 turns the watchdog off"},
	{name: "kcoord.metadata.max.staleness.ms", min: 1, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.MetadataMaxStaleness },
		help: "how long a node that authenticates its clients trusts its copy of the users and ACLs after it last caught up with the metadata leader; past it, it catches up again before it serves a request, and closes the connection when it cannot"},
	{name: "kcoord.shutdown.drain.ms", min: 0, max: math.MaxInt32, unit: time.Millisecond,
		durp: func(c *Config) *time.Duration { return &c.ShutdownDrain },
		help: "after a planned stop moved this node's leaderships away, how long it still answers clients so they find the new coordinators"},
	{name: "kcoord.features.auto.finalize",
		boolp: func(c *Config) *bool { return &c.FeaturesAutoFinalize },
		help:  "finalize the highest kcoord.version feature level every node supports by itself (else by hand: kcoord cluster features --finalize)"},
	{name: "kcoord.offsets.commit.unregistered.topics.enable",
		boolp: func(c *Config) *bool { return &c.OffsetsCommitUnregisteredTopics },
		help:  "OffsetCommit takes topics not in the registry (else UNKNOWN_TOPIC_OR_PARTITION, as in Kafka)"},
}

func lookupKafkaKey(key string) (kafkaKey, bool) {
	for _, k := range kafkaKeys {
		if k.name == key {
			return k, true
		}
	}
	return kafkaKey{}, false
}

// KafkaConfigKeys returns the Kafka broker config names SetKafkaConfig accepts.
func KafkaConfigKeys() []string {
	keys := make([]string, len(kafkaKeys))
	for i, k := range kafkaKeys {
		keys[i] = k.name
	}
	return keys
}

// KafkaConfigHelp returns a one-line description of a Kafka config name, or
// "" for an unknown one.
func KafkaConfigHelp(key string) string {
	k, _ := lookupKafkaKey(key)
	return k.help
}

// SetKafkaConfig sets the field behind a Kafka broker config name from its
// value as Kafka writes it (an integer, durations in the unit the name ends
// with; or a boolean). It rejects unknown names and values Kafka would
// reject.
func (c *Config) SetKafkaConfig(key, value string) error {
	k, ok := lookupKafkaKey(key)
	if !ok {
		return fmt.Errorf("unknown Kafka config %q (supported: %s)", key, strings.Join(KafkaConfigKeys(), ", "))
	}
	if k.strp != nil && k.choices == nil {
		*k.strp(c) = strings.TrimSpace(value)
		return nil
	}
	if k.strp != nil {
		v := strings.ToLower(strings.TrimSpace(value))
		if !slices.Contains(k.choices, v) {
			return fmt.Errorf("invalid value %q for Kafka config %s: want one of %s", value, key, strings.Join(k.choices, ", "))
		}
		*k.strp(c) = v
		return nil
	}
	if k.boolp != nil {
		switch strings.ToLower(strings.TrimSpace(value)) {
		case "true":
			*k.boolp(c) = true
		case "false":
			*k.boolp(c) = false
		default:
			return fmt.Errorf("invalid value %q for Kafka config %s: want true or false", value, key)
		}
		return nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return fmt.Errorf("invalid value %q for Kafka config %s: not an integer", value, key)
	}
	if n < k.min || n > k.max {
		return fmt.Errorf("invalid value %q for Kafka config %s: must be between %d and %d", value, key, k.min, k.max)
	}
	switch {
	case k.durp != nil:
		*k.durp(c) = time.Duration(n) * k.unit
	case k.int64p != nil:
		*k.int64p(c) = n
	default:
		*k.int32p(c) = int32(n)
	}
	return nil
}

// KafkaConfig returns the value of a Kafka broker config name as Kafka
// writes it ("" for a setting left unset), and false for an unknown name.
func (c *Config) KafkaConfig(key string) (string, bool) {
	k, ok := lookupKafkaKey(key)
	if !ok {
		return "", false
	}
	switch {
	case k.strp != nil:
		return *k.strp(c), true
	case k.boolp != nil:
		return strconv.FormatBool(*k.boolp(c)), true
	case k.durp != nil:
		return strconv.FormatInt(int64(*k.durp(c)/k.unit), 10), true
	case k.int64p != nil:
		return strconv.FormatInt(*k.int64p(c), 10), true
	case k.zeroUnset && *k.int32p(c) == 0:
		return "", true
	}
	return strconv.FormatInt(int64(*k.int32p(c)), 10), true
}
