package cluster

import "time"

// nudgeFollowers makes the shard's followers learn its commit index now.
//
// A hashicorp/raft follower applies an entry once an AppendEntries tells it
// the entry is committed, and its leader sends one only with the next
// entry or after CommitTimeout without any (50–100 ms for the metadata
// group). A barrier is such an entry: appended right after a change has
// committed, it carries the change's commit to every follower with one
// send, so that each applies it within a log write and a round trip.
// ApplyMetadataChange calls it on the metadata leader once a change has
// applied there: every node answers from its own replica, and the node
// that took the change waits for its replica. It does not wait; the
// barrier's goroutine ends when the barrier applies, fails, or the shard
// shuts down (Shard.Barrier's tracked future always completes).
func (s *Shard) nudgeFollowers() {
	go func() { _ = s.Barrier(nudgeTimeout) }()
}

// nudgeTimeout bounds how long a nudge waits to enter Raft's queue.
const nudgeTimeout = time.Second
