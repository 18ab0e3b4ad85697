package groups

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kcoord/kcoord/assignors"
	"github.com/kcoord/kcoord/fsm"
)

// Config tunes one shard's group coordinator. The server fills it from
// Kafka's broker config names.
type Config struct {
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long the
	// first rebalance of an Empty group waits for more members.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout are
	// group.min/max.session.timeout.ms: the session timeouts members may ask
	// for.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// MaxSize is group.max.size, in members.
	MaxSize int32
	// NewMemberJoinTimeout is how long a member that joined for the first
	// time may wait in a rebalance without rejoining before it is removed
	// (Kafka's fixed 5 minutes).
	NewMemberJoinTimeout time.Duration
	// WriteTimeout is offsets.commit.timeout.ms: how long a group write may
	// wait to enter Raft's queue (REQUEST_TIMED_OUT after). A write already
	// queued waits for its commit; it fails with NOT_COORDINATOR if the
	// leader loses its quorum, which the leader lease bounds.
	WriteTimeout time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: the longest
	// metadata string a commit may store, in UTF-16 code units as Kafka
	// counts them.
	OffsetMetadataMaxBytes int32
	// OffsetsRetention is offsets.retention.minutes: how long offsets
	// outlive their group's last member (or their commit, outside group
	// management), and the expiry an OffsetCommit v1 timestamp gets.
	OffsetsRetention time.Duration
	// ElectionHold is kcoord.group.election.hold.ms: how long a request
	// that reaches this node while its shard's leadership settles (see
	// Log.Settling) waits for the outcome before it is answered
	// NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while this node is still
	// loading). 0 answers at once. Keep it below the clients' request
	// timeouts (kafka-go: 5 s).
	ElectionHold time.Duration
	// UnconfirmedReads serves reads (OffsetFetch, DescribeGroups,
	// ListGroups, Heartbeat, a Stable group's SyncGroup) from the leader's
	// state without a quorum confirming its leadership first: a paused or
	// partitioned former leader can then answer stale data. It exists only
	// so benchmarks can measure what linearizable reads cost, side by side
	// in one run; no Kafka config or flag sets it.
	UnconfirmedReads bool
	// UnsafeAckBeforeCommit answers an OffsetCommit as soon as its entry is
	// handed to Raft, before a quorum has it, and lets the write finish in
	// the background: a planted bug, for proving that the chaos suite
	// catches lost and stale commits (kcoord serve
	// --unsafe-ack-before-commit, a hidden test-only flag). Never set it
	// otherwise.
	UnsafeAckBeforeCommit bool
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms: how
	// long a consumer-protocol member may go without a heartbeat before it
	// is fenced. It lies within ConsumerMinSessionTimeout and
	// ConsumerMaxSessionTimeout (group.consumer.min/max.session.timeout.ms).
	ConsumerSessionTimeout    time.Duration
	ConsumerMinSessionTimeout time.Duration
	ConsumerMaxSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms:
	// how often consumer-protocol members are told to heartbeat, within
	// ConsumerMinHeartbeatInterval and ConsumerMaxHeartbeatInterval, and
	// below the session timeout.
	ConsumerHeartbeatInterval    time.Duration
	ConsumerMinHeartbeatInterval time.Duration
	ConsumerMaxHeartbeatInterval time.Duration
	// ConsumerMaxSize is group.consumer.max.size, in members.
	ConsumerMaxSize int32
	// ServerAssignors is group.consumer.assignors: the server-side
	// assignors members may name (assignors.ServerAssignorNamed), the
	// first being the default.
	ServerAssignors []string
	// DefaultServerAssignor is set by Validate to ServerAssignors[0].
	DefaultServerAssignor string
	// MigrationPolicy is group.consumer.migration.policy: whether classic
	// members may join a consumer group, and a consumer member a classic
	// group (Kafka's bidirectional by default).
	MigrationPolicy MigrationPolicy
	// Topics is the topic registry that consumer-group subscriptions
	// resolve against; nil is an empty registry.
	Topics TopicSource
	// AuthorizeTopic, when set, is asked whether a consumer-group
	// member's principal (as its heartbeat named it) may describe a topic
	// its regex matches; the topics it may not are left out of its
	// subscription. nil lets every regex match every topic.
	AuthorizeTopic TopicAuthorizer
	// ObserveRebalance, when set, is told of each completed rebalance and
	// how long it took: from the group entering PreparingRebalance until
	// it is Stable again. Called with the group's lock held, so it must
	// not block (a Prometheus histogram's Observe, a timeline's append).
	ObserveRebalance func(Rebalance)
	// Logger gets the coordinator's logs; nil discards them.
	Logger hclog.Logger
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		InitialRebalanceDelay: 3 * time.Second,
		MinSessionTimeout:     6 * time.Second,
		MaxSessionTimeout:     30 * time.Minute,
		MaxSize:               2147483647,
		NewMemberJoinTimeout:  5 * time.Minute,
		WriteTimeout:          5 * time.Second,
		ElectionHold:          2 * time.Second,

		ConsumerSessionTimeout:       45 * time.Second,
		ConsumerMinSessionTimeout:    45 * time.Second,
		ConsumerMaxSessionTimeout:    60 * time.Second,
		ConsumerHeartbeatInterval:    5 * time.Second,
		ConsumerMinHeartbeatInterval: 5 * time.Second,
		ConsumerMaxHeartbeatInterval: 15 * time.Second,
		ConsumerMaxSize:              2147483647,
		ServerAssignors:              []string{assignors.DefaultServerAssignor, "range"},
		MigrationPolicy:              MigrationBidirectional,

		OffsetMetadataMaxBytes: 4096,
		OffsetsRetention:       10080 * time.Minute,
	}
}

// TopicSource is the topic registry as consumer groups read it. Both
// methods are called from request and timer goroutines, often: they must
// be cheap and never block on Raft (fsm.MetaFSM reads its applied state).
type TopicSource interface {
	// Topics lists every registered topic.
	Topics() []fsm.Topic
	// TopicsVersion changes whenever the list may have changed; equal
	// versions mean equal lists.
	TopicsVersion() uint64
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.InitialRebalanceDelay < 0:
		return errors.New("groups: initial rebalance delay must not be negative")
	case c.MinSessionTimeout < 0 || c.MaxSessionTimeout < c.MinSessionTimeout:
		return errors.New("groups: session timeout bounds are inverted")
	case c.MaxSize < 1:
		return errors.New("groups: max size must be at least 1")
	case c.NewMemberJoinTimeout <= 0:
		return errors.New("groups: new member join timeout must be positive")
	case c.WriteTimeout <= 0:
		return errors.New("groups: write timeout must be positive")
	case c.OffsetMetadataMaxBytes < 0:
		return errors.New("groups: offset metadata max bytes must not be negative")
	case c.OffsetsRetention <= 0:
		return errors.New("groups: offsets retention must be positive")
	case c.ElectionHold < 0:
		return errors.New("groups: election hold must not be negative")
	}
	return c.ValidateConsumer()
}

// ValidateConsumer checks the consumer-protocol settings (Validate's last
// step) and sets DefaultServerAssignor.
func (c *Config) ValidateConsumer() error {
	switch {
	case c.ConsumerMinSessionTimeout <= 0 || c.ConsumerMaxSessionTimeout < c.ConsumerMinSessionTimeout:
		return errors.New("group.consumer.min.session.timeout.ms must be positive and at most group.consumer.max.session.timeout.ms")
	case c.ConsumerSessionTimeout < c.ConsumerMinSessionTimeout || c.ConsumerSessionTimeout > c.ConsumerMaxSessionTimeout:
		return fmt.Errorf("group.consumer.session.timeout.ms %d must be within group.consumer.min.session.timeout.ms %d and group.consumer.max.session.timeout.ms %d",
			c.ConsumerSessionTimeout.Milliseconds(), c.ConsumerMinSessionTimeout.Milliseconds(), c.ConsumerMaxSessionTimeout.Milliseconds())
	case c.ConsumerMinHeartbeatInterval <= 0 || c.ConsumerMaxHeartbeatInterval < c.ConsumerMinHeartbeatInterval:
		return errors.New("group.consumer.min.heartbeat.interval.ms must be positive and at most group.consumer.max.heartbeat.interval.ms")
	case c.ConsumerHeartbeatInterval < c.ConsumerMinHeartbeatInterval || c.ConsumerHeartbeatInterval > c.ConsumerMaxHeartbeatInterval:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms %d must be within group.consumer.min.heartbeat.interval.ms %d and group.consumer.max.heartbeat.interval.ms %d",
			c.ConsumerHeartbeatInterval.Milliseconds(), c.ConsumerMinHeartbeatInterval.Milliseconds(), c.ConsumerMaxHeartbeatInterval.Milliseconds())
	case c.ConsumerHeartbeatInterval >= c.ConsumerSessionTimeout:
		return errors.New("group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms")
	case c.ConsumerMaxSize < 1:
		return errors.New("group.consumer.max.size must be at least 1")
	case len(c.ServerAssignors) == 0:
		return errors.New("group.consumer.assignors names no assignor")
	}
	switch c.MigrationPolicy {
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
	default:
		return fmt.Errorf("group.consumer.migration.policy %q is none of bidirectional, upgrade, downgrade and disabled", c.MigrationPolicy)
	}
	for _, name := range c.ServerAssignors {
		if _, err := assignors.ServerAssignorNamed(name); err != nil {
			return fmt.Errorf("group.consumer.assignors: %w", err)
		}
	}
	c.DefaultServerAssignor = c.ServerAssignors[0]
	return nil
}

// TopicAuthorizer reports whether principal ("User:alice"), connected
// from host (Kafka's "/127.0.0.1"), may describe topic. Called with a
// group's lock held, from request goroutines; it must not block.
type TopicAuthorizer func(principal, host, topic string) bool
