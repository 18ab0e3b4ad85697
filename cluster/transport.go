package cluster

import "github.com/hashicorp/raft"

// unpipelinedTransport is a shard's raft.NetworkTransport with
// AppendEntries pipelining turned off: Raft then replicates to each
// follower one RPC at a time.
//
// hashicorp/raft v1.8.0's pipeline can deadlock. When a follower answers
// with a newer term or Success=false, raft's pipelineDecode returns and
// leaves the pipeline's done channel unread; the send loop can then make
// one more AppendEntries, which parks on the in-progress channel while the
// transport's decoder parks on the done channel. Only the pipeline's Close
// frees them, and the send loop that would call it is the one parked. The
// replication goroutine to that follower is stuck for good: the follower
// gets no more entries, and Raft's Shutdown waits for that goroutine
// forever. The chaos suite's rolling restart found it: right after a
// planned stop moved this node's leaderships away (stale-term answers are
// exactly what then arrives), 26 of 42 SIGTERMs ran into the 20 s shutdown
// timeout. Grafana Pyroscope's metastore turned pipelining off for the
// same deadlock.
type unpipelinedTransport struct {
	*raft.NetworkTransport
}

// AppendEntriesPipeline refuses, so Raft falls back to plain AppendEntries.
func (unpipelinedTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}
