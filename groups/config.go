package groups

import (
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
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
	}
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
	case c.ElectionHold < 0:
		return errors.New("groups: election hold must not be negative")
	}
	return nil
}
