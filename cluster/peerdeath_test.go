package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/internal/testkit"
)

// TestAKilledLeaderIsRoutedAroundAtOnce: when a shard leader's process is
// gone (its sockets closed, its port refusing), its followers prove the
// death within moments, long before a heartbeat timeout, and from then on
// no follower names it: each names itself (a live replica that holds the
// requests) until the new leader is known, and Metadata's broker list
// leaves the dead node out.
func TestAKilledLeaderIsRoutedAroundAtOnce(t *testing.T) {
	nodes := startTestCluster(t, 3, 1)
	leader, _ := waitLeaderEpoch(t, nodes, 0)
	var followers []*testNode
	for _, tn := range nodes {
		if tn != leader {
			followers = append(followers, tn)
		}
	}
	eventually(t, 5*time.Second, "steady followers", func() bool {
		for _, f := range followers {
			if b, ok := f.LeaderOf(0); !ok || b.NodeID != leader.ID() {
				return false
			}
		}
		return true
	})
	deadAddr := leader.RaftAddr()
	if err := leader.Shutdown(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for _, f := range followers {
		eventually(t, 2*time.Second, "the follower proves the leader dead", func() bool {
			return f.mux.Deaths().IsDead(deadAddr)
		})
	}
	t.Logf("death proven %v after the kill (heartbeat timeout 200ms)", time.Since(killed))
	deadline := time.Now().Add(10 * time.Second)
	for {
		settled := true
		for _, f := range followers {
			b, ok := f.LeaderOf(0)
			if ok && b.NodeID == leader.ID() {
				t.Fatalf("node %d names the dead leader %d after its death was proven", f.ID(), leader.ID())
			}
			if ok && b.NodeID == f.ID() && !f.Shard(0).IsLeader() && !f.Shard(0).Settling() {
				t.Fatalf("node %d names itself without settling or leading", f.ID())
			}
			if slices.Contains(brokerIDs(f.Node), leader.ID()) {
				t.Fatalf("node %d lists the dead node %d among its brokers", f.ID(), leader.ID())
			}
			if f.Shard(0).Settling() && !f.Shard(0).IsLeader() {
				settled = false
			}
		}
		newLeader := leaderOfShard(followers, 0)
		if settled && newLeader != nil && newLeader.Shard(0).Leadership().Leader {
			for _, f := range followers {
				if b, ok := f.LeaderOf(0); ok && b.NodeID != newLeader.ID() {
					settled = false
				}
			}
			if settled {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leader named by both followers")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestAPartitionedLeaderIsNotDeclaredDead: a leader cut off by a partition
// refuses no connection, so nothing proves it dead; its followers wait out
// Raft's timeouts as before.
func TestAPartitionedLeaderIsNotDeclaredDead(t *testing.T) {
	nodes := startTestCluster(t, 3, 1)
	leader, _ := waitLeaderEpoch(t, nodes, 0)
	heal := leader.Faults().Isolate()
	defer heal()
	eventually(t, 10*time.Second, "another leader", func() bool {
		l := leaderOfShard(nodes, 0)
		return l != nil && l != leader
	})
	for _, tn := range nodes {
		if tn != leader && tn.mux.Deaths().IsDead(leader.RaftAddr()) {
			t.Fatalf("node %d declared the partitioned (live) leader dead", tn.ID())
		}
	}
}

// TestARestartedReplicaNamesTheGossipedLeader: a follower restarted
// before any leader reached it again (here it comes back on another Raft
// port, so none ever does; after a real restart the leader's heartbeat
// back-off looks the same for seconds) names the leader gossip reports,
// rather than no one: FindCoordinator then answers the real coordinator
// instead of COORDINATOR_NOT_AVAILABLE, which cost a franz-go member in
// the docker failover test a retry with a 4 s back-off and its session.
func TestARestartedReplicaNamesTheGossipedLeader(t *testing.T) {
	leader, follower := gossipLeaderAndFollower(t)
	cfg := follower.cfg
	cfg.Join = []string{leader.GossipAddr()}
	if err := follower.Shutdown(); err != nil {
		t.Fatal(err)
	}
	restarted := startTestNode(t, cfg)
	s := restarted.Shard(0)
	eventually(t, 10*time.Second, "the restarted follower names the gossiped leader", func() bool {
		b, ok := restarted.LeaderOf(0)
		return ok && b.NodeID == leader.ID()
	})
	if !s.Raft.LastContact().IsZero() {
		t.Fatal("a leader reached the restarted follower: the test proves nothing")
	}
}

// TestAReplicaRemovedUnawaresNamesTheGossipedLeader: a follower demoted to
// non-voter and then removed while cut off never hears of its removal; its
// Raft keeps it a non-voter with no leader for good. It must still name
// the shard's leader from gossip: before, it answered no one, so
// FindCoordinator there said COORDINATOR_NOT_AVAILABLE for good and
// placement counted the shard under-replicated forever (the stall of
// BenchmarkReplicaMoves).
func TestAReplicaRemovedUnawaresNamesTheGossipedLeader(t *testing.T) {
	leader, follower := gossipLeaderAndFollower(t)
	fid := serverID(follower.ID())
	ls := leader.Shard(0)
	// What the follower is to name comes by gossip, which a loaded
	// machine may deliver after the election: wait for it first.
	eventually(t, 5*time.Second, "the follower's leader table names shard 0's leader", func() bool {
		e, ok := follower.leaders.get(0)
		return ok && e.Node == leader.ID() && e.Term == ls.Term()
	})
	if err := ls.Raft.DemoteVoter(fid, 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	s := follower.Shard(0)
	eventually(t, 5*time.Second, "the follower learns its demotion", func() bool { return !s.votes() && s.replicated() })
	heal := follower.Faults().Isolate()
	defer heal()
	if err := ls.Raft.RemoveServer(fid, 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the cut-off non-voter's Raft forgets its leader", func() bool {
		_, id := s.Raft.LeaderWithID()
		return id == ""
	})
	if !s.replicated() {
		t.Fatal("the follower heard of its removal: the test proves nothing")
	}
	b, ok := follower.LeaderOf(0)
	if !ok || b.NodeID != leader.ID() {
		t.Fatalf("LeaderOf(0) on the removed non-voter = %+v, %v; want the gossiped leader %d", b, ok, leader.ID())
	}
}

// gossipLeaderAndFollower starts a three-node gossip cluster of one shard
// and returns shard 0's leader and one of its followers.
func gossipLeaderAndFollower(t *testing.T) (leader, follower *testNode) {
	t.Helper()
	nodes := startGossipCluster(t, 3, 1)
	leader, _ = waitLeaderEpoch(t, nodes, 0)
	for _, tn := range nodes {
		if tn != leader {
			return leader, tn
		}
	}
	return leader, nil
}

// TestAContactRightAfterTheProofIsALeftover: a frame the dead leader wrote
// before it died, read just after its death was proven, does not override
// the proof (routing would name the dead node again); a contact well after
// the proof does.
func TestAContactRightAfterTheProofIsALeftover(t *testing.T) {
	mux, err := raftnet.ListenMux("127.0.0.1:0", "", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	addr := testkit.RefusingAddr(t) // the probe's dial is refused
	d := mux.Deaths()
	d.Suspect(addr)
	eventually(t, 5*time.Second, "the death proven", func() bool { return d.IsDead(addr) })
	at, ok := d.DeadSince(addr)
	if !ok {
		t.Fatal("death not recorded")
	}
	s := &Shard{deaths: d}
	if !s.leaderDead(raft.ServerAddress(addr), at.Add(5*time.Millisecond)) {
		t.Fatal("a contact 5ms after the proof overrode it")
	}
	if s.leaderDead(raft.ServerAddress(addr), at.Add(deathContactSlack+time.Millisecond)) {
		t.Fatal("a contact past deathContactSlack did not override the proof")
	}
}
