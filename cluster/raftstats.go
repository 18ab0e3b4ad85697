package cluster

import (
	"time"

	"github.com/hashicorp/raft"
)

// ShardRaftStats is one shard's Raft state at a moment, for metrics.
type ShardRaftStats struct {
	Shard  int32 // MetaShard for the metadata group
	Leader bool  // this node leads the shard
	Term   uint64
	// LastIndex, CommitIndex and AppliedIndex are this replica's: the last
	// entry in its log, the last it knows committed, the last its FSM
	// applied.
	LastIndex, CommitIndex, AppliedIndex uint64
	// LeadershipsGained counts the times this node became the shard's
	// leader since it started.
	LeadershipsGained uint64
	// Followers are, on the leader, the shard's other voters.
	Followers []FollowerStats
}

// FollowerStats is what a shard's leader knows of one follower.
type FollowerStats struct {
	NodeID int32
	// Lag is how many entries of the leader's log the follower has not
	// acknowledged (0 once it has the leader's last entry).
	Lag uint64
	// SinceContact is how long ago the follower last answered (a
	// heartbeat, a replication); -1 when it has not since this node leads.
	SinceContact time.Duration
}

// RaftStats returns every shard's Raft state, the metadata group first.
// Safe to call from any goroutine (the metrics scrape calls it); it takes
// each Raft's locks briefly.
func (n *Node) RaftStats() []ShardRaftStats {
	out := make([]ShardRaftStats, 0, len(n.all))
	now := time.Now()
	for _, s := range n.all {
		if s == nil {
			continue
		}
		st := ShardRaftStats{
			Shard:             s.ID,
			Leader:            s.Raft.State() == raft.Leader,
			Term:              s.Raft.CurrentTerm(),
			LastIndex:         s.Raft.LastIndex(),
			CommitIndex:       s.Raft.CommitIndex(),
			AppliedIndex:      s.Raft.AppliedIndex(),
			LeadershipsGained: s.leaderships.Load(),
		}
		if st.Leader {
			if m, ok := s.members(); ok {
				for _, id := range m.voters {
					if id == n.cfg.NodeID {
						continue
					}
					match, at := s.trans.Acked(serverID(id), st.Term)
					f := FollowerStats{NodeID: id, SinceContact: -1}
					if st.LastIndex > match {
						f.Lag = st.LastIndex - match
					}
					if !at.IsZero() {
						f.SinceContact = now.Sub(at)
					}
					st.Followers = append(st.Followers, f)
				}
			}
		}
		out = append(out, st)
	}
	return out
}
