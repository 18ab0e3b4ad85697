package raftnet

import "errors"

// Sentinel errors of package raftnet. Compare with errors.Is: most are
// returned wrapped with details. Their messages keep the "cluster:"
// prefix they had before the package split out of package cluster:
// operators' log searches and alerts match them.
var (
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

	// ErrFenced is returned by Raft dials and writes while the node is
	// fenced for its disk (see cluster.Node.DiskHealth): it sends and answers no
	// Raft traffic until the disk answers again.
	ErrFenced = errors.New("cluster: node fenced for its disk")

	// ErrRaftTLS wraps the errors of loading the Raft port's TLS files
	// (LoadTLS).
	ErrRaftTLS = errors.New("cluster: raft TLS")

	// ErrSnapshotRate is a snapshot throttle below MinSnapshotRate
	// (NewSnapshotThrottle).
	ErrSnapshotRate = errors.New("cluster: leader.replication.throttled.rate too low")
)
