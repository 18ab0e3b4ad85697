package cluster

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/kcoord/kcoord/cluster/raftnet"
)

// watchContact fails the test if, during d, a follower of any of the
// shards goes longer than half its heartbeat timeout without hearing from
// its leader (what Shard.Settling would take for a leader gone).
func watchContact(t *testing.T, nodes []*testNode, leaders map[int32]leaderEntry, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	var longest time.Duration
	defer func() { t.Logf("longest silence seen: %v", longest) }()
	for time.Now().Before(deadline) {
		for id, e := range leaders {
			for _, tn := range followersOf(nodes, e.Node) {
				s := tn.Shard(id)
				since := time.Since(s.Raft.LastContact())
				if raftnet.PausedRecently() {
					continue // this process stalled (a loaded machine): no one's silence
				}
				longest = max(longest, since)
				if since > s.heartbeat/2 {
					t.Fatalf("node %d last heard from shard %d's leader %v ago, over half the heartbeat timeout %v", tn.ID(), id, since, s.heartbeat)
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settledLeaders waits until every shard has one leader that keeps its
// leadership and term for 300ms, and returns them: a cold start's
// elections can still move a leader just after waitShardLeaders sees one
// (more so under -race on a loaded machine), and a watch of a leader's
// followers means nothing if the leader it watches has already lost.
func settledLeaders(t *testing.T, nodes []*testNode, shards int32) map[int32]leaderEntry {
	t.Helper()
	var settled map[int32]leaderEntry
	eventually(t, 10*time.Second, "shard leaders that keep their terms for 300ms", func() bool {
		before := waitShardLeaders(t, nodes, shards)
		time.Sleep(300 * time.Millisecond)
		after := waitShardLeaders(t, nodes, shards)
		if !maps.EqualFunc(before, after, leaderEntry.equal) {
			t.Logf("shard leaders still moving: %v then %v", before, after)
			return false
		}
		settled = after
		return true
	})
	return settled
}

// quietProbes makes raft's idle replication probes too rare to give a
// follower contact, as the group shards' 500ms are in production.
func quietProbes(c *Config) { c.CommitTimeout, c.GroupCommitTimeout = time.Second, time.Second }

// A shard leader's Raft heartbeats at the slower LeaderHeartbeatTimeout,
// and its followers still hear from it every frame: with a lone group
// shard nothing else asks for frames between raft's slower heartbeats.
func TestPacedLeaderKeepsALoneShardsFollowersHearing(t *testing.T) {
	const shards = 1
	nodes := startTestCluster(t, 3, shards, quietProbes, func(c *Config) {
		// The slowest pace there is: raft heartbeats every 40-80ms.
		c.LeaderLeaseTimeout, c.LeaderHeartbeatTimeout = 120*time.Millisecond, 2*c.HeartbeatTimeout
	})
	leaders := settledLeaders(t, nodes, shards)
	for id, e := range leaders {
		s := nodeByID(nodes, e.Node).Shard(id)
		if got := s.Raft.ReloadableConfig().HeartbeatTimeout; got != s.leaderHeartbeat || got <= s.heartbeat {
			t.Fatalf("shard %d's leader runs with HeartbeatTimeout %v, want LeaderHeartbeatTimeout %v (above %v)", id, got, s.leaderHeartbeat, s.heartbeat)
		}
	}
	watchContact(t, nodes, leaders, 4*time.Second)
}

// A shard that frames leave out (here an outbound delay on it) sends each
// of raft's heartbeats one by one, answered by nothing reused, so its
// followers hear at raft's pace: within half the heartbeat timeout too.
func TestPacedLeaderOfAShardLeftOutOfFramesKeepsItsFollowersHearing(t *testing.T) {
	const shards = 2
	nodes := startTestCluster(t, 3, shards, quietProbes)
	leaders := settledLeaders(t, nodes, shards)
	const victim int32 = 0
	leader := nodeByID(nodes, leaders[victim].Node)
	heal := leader.Faults().Add(raftnet.Fault{Shards: []int32{victim}, Dir: raftnet.DirOutbound, Delay: time.Millisecond})
	defer heal()
	time.Sleep(300 * time.Millisecond) // the frames' answers from before the fault age out
	if now := shardLeaders(t, nodes, shards)[victim]; !now.equal(leaders[victim]) {
		t.Fatalf("shard %d's leadership moved from %+v to %+v under a 1ms outbound delay", victim, leaders[victim], now)
	}
	alone0 := leader.Shard(victim).trans.HeartbeatsSentAlone()
	watchContact(t, nodes, map[int32]leaderEntry{victim: leaders[victim]}, 3*time.Second)
	if alone := leader.Shard(victim).trans.HeartbeatsSentAlone() - alone0; alone == 0 {
		t.Fatal("the faulted shard's heartbeats did not go one by one")
	}
}

// A shard's Raft runs with LeaderHeartbeatTimeout only while it leads: a
// leader that hands its leadership over is back at HeartbeatTimeout, so
// as a follower it elects after the usual silence.
func TestHeartbeatPaceFollowsTheRole(t *testing.T) {
	const shards = 1
	nodes := startTestCluster(t, 3, shards)
	leaders := waitShardLeaders(t, nodes, shards)
	const id int32 = 0
	old := nodeByID(nodes, leaders[id].Node).Shard(id)
	if err := old.transferLeadership("", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, fmt.Sprintf("shard %d's old leader back at HeartbeatTimeout %v", id, old.heartbeat), func() bool {
		rc := old.Raft.ReloadableConfig()
		return !old.IsLeader() && rc.HeartbeatTimeout == old.heartbeat && rc.ElectionTimeout == old.election
	})
	eventually(t, 5*time.Second, fmt.Sprintf("shard %d's new leader at LeaderHeartbeatTimeout", id), func() bool {
		for _, tn := range nodes {
			s := tn.Shard(id)
			if s.IsLeader() && s != old {
				return s.Raft.ReloadableConfig().HeartbeatTimeout == s.leaderHeartbeat
			}
		}
		return false
	})
}
