package cluster

import "errors"

// Sentinel errors of package cluster. Compare with errors.Is: most are returned
// wrapped with details. Raft's own errors (raft.ErrNotLeader,
// raft.ErrLeadershipLost, raft.ErrEnqueueTimeout, raft.ErrRaftShutdown, ...) are
// never wrapped or translated by this package.
var (
	// ErrInvalidConfig wraps every error Config.Validate returns.
	ErrInvalidConfig = errors.New("cluster: invalid config")

	// ErrDataDirMismatch is returned by NewNode when DataDir was initialised
	// by a node with another NodeID or Shards count. The shard count fixes
	// where every group lives (PartitionFor), so it can never change for a
	// data directory.
	ErrDataDirMismatch = errors.New("cluster: data dir belongs to another node id or shard count")

	// ErrShutdown is returned by Node methods called after Shutdown.
	ErrShutdown = errors.New("cluster: node is shut down")

	// ErrApplyTimeout is returned by Shard.Apply when its timeout expires
	// after the command was enqueued but before it was applied. The command
	// may still commit later.
	ErrApplyTimeout = errors.New("cluster: timed out waiting for the command to apply")

	// ErrMuxClosed is returned by the stream mux and its stream layers after
	// they were closed.
	ErrMuxClosed = errors.New("cluster: raft stream mux closed")

	// ErrShardRegistered is returned by Mux.Listen for a shard that already
	// has a stream layer.
	ErrShardRegistered = errors.New("cluster: shard already has a stream layer")

	// ErrBadHeader is returned for a Raft connection whose header is not a
	// kcoord stream header of a known version.
	ErrBadHeader = errors.New("cluster: bad raft stream header")

	// ErrFaultInjected is returned by dials and writes refused by an injected
	// fault (see Faults).
	ErrFaultInjected = errors.New("cluster: connection dropped by injected fault")
)
