package cluster

import "errors"

// Sentinel errors of package cluster. Compare with errors.Is: most are returned
// wrapped with details. Raft's own errors (raft.ErrNotLeader,
// raft.ErrLeadershipLost, raft.ErrEnqueueTimeout, raft.ErrRaftShutdown, ...) are
// never wrapped or translated by this package.
var (
	// ErrInvalidConfig wraps every error Config.Validate returns.
	ErrInvalidConfig = errors.New("cluster: invalid config")

	// ErrDataDirMismatch is returned by Open when DataDir was initialised
	// by a node with another NodeID, or with another Shards count than a
	// configured (non-zero) one. The shard count fixes
	// where every group lives (groups.PartitionFor), so it can never change for a
	// data directory.
	ErrDataDirMismatch = errors.New("cluster: data dir belongs to another node id or shard count")

	// ErrShardCountMismatch is returned by Open when a fresh node started
	// with Join is configured with a shard count (Config.Shards) other
	// than the one its seeds' cluster advertises, or when those seeds
	// advertise different counts; Open returns it before it writes
	// anything to DataDir. Start returns it when the seeds' cluster turns
	// out to run another count than the node opened (no peer holding state
	// had answered by then). See shardcount.go.
	ErrShardCountMismatch = errors.New("cluster: the shard count differs from the cluster's")

	// ErrStarted is returned by Node.Start on a node started already.
	ErrStarted = errors.New("cluster: node started already")

	// ErrShutdown is returned by Node methods called after Shutdown.
	ErrShutdown = errors.New("cluster: node is shut down")

	// ErrApplyTimeout is returned by Shard.Apply when its timeout expires
	// after the command was enqueued but before it was applied. The command
	// may still commit later.
	ErrApplyTimeout = errors.New("cluster: timed out waiting for the command to apply")

	// ErrNotMetaLeader is returned by Node.RemoveNode on a node that does
	// not lead the metadata group: send it to Node.MetaLeader.
	ErrNotMetaLeader = errors.New("cluster: this node does not lead the metadata group")
	// ErrPlacementUnavailable is returned by Node.RemoveNode when the
	// metadata group's FSM keeps no placement.
	ErrPlacementUnavailable = errors.New("cluster: placement is not kept in this node's metadata group")

	// ErrLastActiveNode is returned by Node.RemoveNode for the cluster's
	// only active node: its replicas would have nowhere to go.
	ErrLastActiveNode = errors.New("cluster: refusing to remove the last active node")

	// ErrEmptyDataDirVoter is returned by Start when DataDir is empty (new
	// or wiped: no node.json) but the node's id holds seats (is a voter) in
	// the shard configurations of a live cluster its seeds belong to. Raft
	// with an empty log under that id could vote a second time in a term it
	// already voted in, and forget entries it acknowledged: two leaders, or a
	// lost commit. The error message says what to do: restore the data dir,
	// or start the node as a new one with another node id (the old id's
	// seats must then be removed from the shards' configurations).
	ErrEmptyDataDirVoter = errors.New("cluster: empty data dir, but this node id is a voter of a live cluster")

	// ErrClusterIDMismatch is returned by Node.AdoptClusterID for an id other
	// than the one DataDir records: a data dir belongs to one cluster for
	// life.
	ErrClusterIDMismatch = errors.New("cluster: data dir belongs to another cluster")

	// ErrAmbiguousJoin is returned by Start on a fresh data dir when the
	// peers reached through Join that hold Raft state advertise different
	// cluster ids: the seeds name nodes of more than one cluster, and the
	// node cannot tell which one to join.
	ErrAmbiguousJoin = errors.New("cluster: the seeds belong to more than one cluster")
	// ErrReplicaTooOld is a metadata change of a command type that a
	// replica of the metadata group does not advertise it applies (a node
	// of an older release, mid rolling upgrade, or one not heard from
	// since this node started): it would panic applying the entry, so the
	// change is refused until every replica runs a release that knows it.
	ErrReplicaTooOld = errors.New("cluster: a replica of the metadata group runs a release that cannot apply this change")
)
