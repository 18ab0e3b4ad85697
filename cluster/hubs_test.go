package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/kcoord/kcoord/cluster/raftnet"
)

// appendTotals sums, over nodes, the AppendEntries their hubs had
// answered and those they handed back to the shards' own streams.
func appendTotals(nodes []*testNode) (sent, fellBack uint64) {
	for _, tn := range nodes {
		st := tn.hubs.Stats()
		sent += st.Appends
		fellBack += st.AppendsFellBack
	}
	return sent, fellBack
}

// applyEverywhere commits n entries to each shard through its leader and
// waits until every node's replica holds them.
func applyEverywhere(t *testing.T, nodes []*testNode, shards int32, n int, tag string) {
	t.Helper()
	for shard := range shards {
		for i := range n {
			// A leader that steps down (a loaded machine starves its
			// 100 ms lease) is no failure of what the tests check: the
			// entry goes to the next leader.
			for attempt := 1; ; attempt++ {
				leader := nodeByID(nodes, waitShardLeaders(t, nodes, shards)[shard].Node)
				_, err := leader.Shard(shard).Apply(context.Background(), fmt.Appendf(nil, "set %s-%d %d", tag, i, i), 5*time.Second)
				if err == nil {
					break
				}
				if attempt == 3 || !errors.Is(err, raft.ErrLeadershipLost) && !errors.Is(err, raft.ErrNotLeader) {
					t.Fatalf("shard %d: apply %d: %v", shard, i, err)
				}
				t.Logf("shard %d: apply %d: %v; again on the shard's leader", shard, i, err)
			}
		}
	}
	for _, tn := range nodes {
		for shard := range shards {
			eventually(t, 10*time.Second, fmt.Sprintf("node %d shard %d holds %s", tn.ID(), shard, tag), func() bool {
				v, ok := tn.fsm(shard).get(fmt.Sprintf("%s-%d", tag, n-1))
				return ok && v == fmt.Sprint(n-1)
			})
		}
	}
}

// Replication goes through the append hub: every replica gets every
// entry, and the leaders' hubs answered the AppendEntries without handing
// any back to a shard's own stream.
func TestAppendHubCarriesReplication(t *testing.T) {
	const shards = 4
	nodes := startTestCluster(t, 3, shards)
	sent0, back0 := appendTotals(nodes)
	applyEverywhere(t, nodes, shards, 20, "hub")
	sent, back := appendTotals(nodes)
	t.Logf("%d AppendEntries through the hubs, %d handed back", sent-sent0, back-back0)
	// Each entry is applied after the one before committed, so a request
	// carried it to at least the follower that made the quorum: 4 shards
	// × 20 entries. (The other follower may get two at once when it lags:
	// a loaded CI machine sent 154, not the 160 of one each.)
	if sent-sent0 < shards*20 {
		t.Fatalf("%d AppendEntries through the hubs, want at least %d", sent-sent0, shards*20)
	}
	if back != back0 {
		t.Fatalf("%d AppendEntries handed back to the shards' own streams, in a cluster without faults", back-back0)
	}
}

// A node with separate append streams (a kcoord that predates the hub,
// or SeparateAppendStreams) has no append stream: its peers' hubs fail to
// reach it and their shards replicate to it on their own streams, while
// the other two nodes keep using their hubs with each other.
func TestAppendHubFallsBackForAPeerWithoutOne(t *testing.T) {
	const shards = 4
	id := int32(0)
	nodes := startTestCluster(t, 3, shards, func(c *Config) {
		id++
		if id == 3 {
			c.SeparateAppendStreams = true
		}
	})
	if _, appends := nodes[2].hubs.On(); appends {
		t.Fatal("node 3 has an append hub with SeparateAppendStreams")
	}
	applyEverywhere(t, nodes, shards, 20, "mixed")
	sent, back := appendTotals(nodes[:2])
	if sent == 0 || back == 0 {
		t.Fatalf("nodes 1 and 2: %d AppendEntries through their hubs, %d handed back; want both", sent, back)
	}
}

// A fault on one shard's traffic keeps that shard's AppendEntries off the
// hub, so the fault applies as on the shard's own stream: a follower
// whose inbound traffic for the shard is dropped stops getting its
// entries, while its other shards keep replicating through the hub.
func TestAppendHubLeavesAShardWithAFaultOut(t *testing.T) {
	const shards = 2
	nodes := startTestCluster(t, 3, shards)
	leaders := waitShardLeaders(t, nodes, shards)
	const victim int32 = 0
	follower := followersOf(nodes, leaders[victim].Node)[0]
	heal := follower.Faults().Add(raftnet.Fault{Shards: []int32{victim}, Dir: raftnet.DirInbound, Drop: true})
	leader := nodeByID(nodes, leaders[victim].Node)
	if _, err := leader.Shard(victim).Apply(context.Background(), []byte("set cut 1"), 5*time.Second); err != nil {
		t.Fatal(err) // the third node makes the quorum
	}
	time.Sleep(300 * time.Millisecond)
	if _, ok := follower.fsm(victim).get("cut"); ok {
		t.Fatalf("node %d applied an entry of shard %d while its inbound traffic for it was dropped", follower.ID(), victim)
	}
	heal()
	eventually(t, 10*time.Second, "the follower catches up once healed", func() bool {
		_, ok := follower.fsm(victim).get("cut")
		return ok
	})
}

// A peer whose answers stall past the transport timeout fails the
// requests waiting on it, as a NetworkTransport RPC would, instead of
// holding the shards' replication for good: the shard still commits
// through its other follower, and the stalled one catches up once its
// answers flow again.
func TestAppendHubTimesOutAPeerThatDoesNotAnswer(t *testing.T) {
	const shards = 1
	nodes := startTestCluster(t, 3, shards)
	leaders := waitShardLeaders(t, nodes, shards)
	leader := nodeByID(nodes, leaders[0].Node)
	slow := followersOf(nodes, leader.ID())[0]
	// The slow follower's answers on the append stream wait 3 s each,
	// over the 2 s transport timeout of startTestCluster.
	heal := slow.Faults().Add(raftnet.Fault{Shards: []int32{raftnet.AppendStream}, Dir: raftnet.DirInbound, Delay: 3 * time.Second})
	for i := range 5 {
		if _, err := leader.Shard(0).Apply(context.Background(), fmt.Appendf(nil, "set slow-%d %d", i, i), 5*time.Second); err != nil {
			t.Fatalf("apply %d with one follower stalled: %v", i, err)
		}
	}
	eventually(t, 10*time.Second, "a timed-out AppendEntries", func() bool { return leader.hubs.Stats().AppendsTimedOut > 0 })
	heal()
	eventually(t, 20*time.Second, "the stalled follower catches up", func() bool {
		v, ok := slow.fsm(0).get("slow-4")
		return ok && v == "4"
	})
}

// A shard leader that shuts down while its AppendEntries wait on a
// follower that does not answer does not wait out the transport timeout
// for them: closing the shard's transport fails them at once, as closing
// a NetworkTransport does.
func TestAppendHubShutdownDoesNotWaitForAStalledFollower(t *testing.T) {
	const shards = 1
	nodes := startTestCluster(t, 3, shards, func(c *Config) { c.TransportTimeout = time.Minute })
	leaders := waitShardLeaders(t, nodes, shards)
	leader := nodeByID(nodes, leaders[0].Node)
	slow := followersOf(nodes, leader.ID())[0]
	// Its answers wait 8 s (the test's cleanup waits for that sleep).
	slow.Faults().Add(raftnet.Fault{Shards: []int32{raftnet.AppendStream}, Dir: raftnet.DirInbound, Delay: 8 * time.Second})
	if _, err := leader.Shard(0).Apply(context.Background(), []byte("set a 1"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- leader.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the leader's Shutdown still waits on an AppendEntries to a follower that has not answered, 5 s on (its answer comes at 8 s, the transport timeout is 1 min)")
	}
}

// A delay on all of a follower's Raft traffic applies to the append
// stream itself, so the hub carries the shards' requests through it (each
// delayed once) instead of refusing them into the shards' own streams,
// where they would be delayed a second time.
func TestAppendHubCarriesThroughAFaultOnEveryShard(t *testing.T) {
	const shards = 2
	nodes := startTestCluster(t, 3, shards)
	waitShardLeaders(t, nodes, shards)
	for _, tn := range nodes {
		tn.Faults().Delay(20 * time.Millisecond)
	}
	_, back0 := appendTotals(nodes)
	applyEverywhere(t, nodes, shards, 5, "delayed")
	if _, back := appendTotals(nodes); back != back0 {
		t.Fatalf("%d AppendEntries handed back to the shards' own streams under a delay on every shard", back-back0)
	}
}

// beatTotals sums, over nodes, the heartbeat answers their hubs received
// in frames and the heartbeats their shards sent one by one.
func beatTotals(nodes []*testNode, shards int32) (framed, alone uint64) {
	for _, tn := range nodes {
		framed += tn.hubs.Stats().FrameAnswers
		for _, id := range allShardIDs(shards) {
			alone += tn.Shard(id).trans.HeartbeatsSentAlone()
		}
	}
	return framed, alone
}

// followersOf returns the nodes other than leader.
func followersOf(nodes []*testNode, leader int32) []*testNode {
	var out []*testNode
	for _, tn := range nodes {
		if tn.ID() != leader {
			out = append(out, tn)
		}
	}
	return out
}

// An idle cluster's heartbeats travel in frames: followers keep hearing
// from their leaders (no shard changes term), while hardly a heartbeat
// goes out on its own.
func TestBeatHubCarriesAnIdleClustersHeartbeats(t *testing.T) {
	const shards = 8
	nodes := startTestCluster(t, 3, shards)
	before := waitShardLeaders(t, nodes, shards)
	time.Sleep(500 * time.Millisecond) // elections' and bootstraps' aftermath
	framed0, alone0 := beatTotals(nodes, shards)

	heartbeat := nodes[0].Shard(0).heartbeat
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range allShardIDs(shards) {
			for _, tn := range followersOf(nodes, before[id].Node) {
				if since := time.Since(tn.Shard(id).Raft.LastContact()); since > heartbeat/2 {
					t.Fatalf("node %d last heard from shard %d's leader %v ago, over half the heartbeat timeout %v", tn.ID(), id, since, heartbeat)
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	framed, alone := beatTotals(nodes, shards)
	framed, alone = framed-framed0, alone-alone0
	t.Logf("in 2s: %d heartbeat answers in frames, %d heartbeats sent one by one", framed, alone)
	if framed == 0 || alone*10 > framed {
		t.Fatalf("%d heartbeats sent one by one against %d answered in frames: want under a tenth", alone, framed)
	}
	after := shardLeaders(t, nodes, shards)
	for id, e := range before {
		if after[id].Node != e.Node || after[id].Term != e.Term {
			t.Fatalf("shard %d: leader %+v became %+v in an idle cluster", id, e, after[id])
		}
	}
}

// A fault on one shard's traffic keeps that shard out of frames, so it
// acts as it does on the shard's own stream: a leader whose outbound
// traffic for the shard is dropped loses it, while frames keep carrying
// its other shards.
func TestBeatHubLeavesAShardWithAnOutboundFaultOut(t *testing.T) {
	const shards = 4
	nodes := startTestCluster(t, 3, shards)
	before := waitShardLeaders(t, nodes, shards)
	const victim int32 = 0
	old := nodeByID(nodes, before[victim].Node)
	heal := old.Faults().Add(raftnet.Fault{Shards: []int32{victim}, Dir: raftnet.DirOutbound, Drop: true})
	defer heal()

	eventually(t, 10*time.Second, fmt.Sprintf("shard %d led by another node than %d", victim, old.ID()), func() bool {
		for _, tn := range followersOf(nodes, old.ID()) {
			if tn.Shard(victim).IsLeader() {
				return true
			}
		}
		return false
	})
	for id, e := range before {
		if id == victim || e.Node != old.ID() {
			continue
		}
		if !old.Shard(id).IsLeader() || old.Shard(id).Term() != e.Term {
			t.Fatalf("shard %d, whose traffic has no fault, lost leader %d of term %d", id, e.Node, e.Term)
		}
	}
}

// A follower with an inbound fault on one shard answers none of that
// shard's heartbeats in frames, so it stops hearing from the leader, as it
// would on the shard's own stream.
func TestBeatHubLeavesAShardWithAnInboundFaultOut(t *testing.T) {
	const shards = 4
	nodes := startTestCluster(t, 3, shards)
	before := waitShardLeaders(t, nodes, shards)
	const victim int32 = 1
	follower := followersOf(nodes, before[victim].Node)[0]
	heal := follower.Faults().Add(raftnet.Fault{Shards: []int32{victim}, Dir: raftnet.DirInbound, Drop: true})
	defer heal()

	heartbeat := follower.Shard(victim).heartbeat
	eventually(t, 10*time.Second, fmt.Sprintf("node %d out of touch with shard %d's leader", follower.ID(), victim), func() bool {
		return follower.Shard(victim).Raft.State() != raft.Follower ||
			time.Since(follower.Shard(victim).Raft.LastContact()) > heartbeat
	})
	// The follower's other shards still hear from their leaders.
	for id, e := range before {
		if id == victim || e.Node == follower.ID() {
			continue
		}
		if since := time.Since(follower.Shard(id).Raft.LastContact()); since > heartbeat/2 {
			t.Fatalf("shard %d without a fault: node %d last heard from its leader %v ago", id, follower.ID(), since)
		}
	}
}

// A node without a hub (a kcoord that predates it, or HeartbeatReuse
// off) has no beat stream: frames to it fail, and its peers heartbeat it
// one by one, so every shard keeps its leader.
func TestBeatHubFallsBackForAPeerWithoutOne(t *testing.T) {
	const shards = 6
	id := int32(0)
	nodes := startTestCluster(t, 3, shards, func(c *Config) {
		id++
		if id == 3 {
			c.HeartbeatReuse = -1
		}
	})
	if beats, _ := nodes[2].hubs.On(); beats {
		t.Fatal("node 3 has a hub with HeartbeatReuse off")
	}
	before := waitShardLeaders(t, nodes, shards)
	time.Sleep(2 * time.Second)
	after := shardLeaders(t, nodes, shards)
	for id, e := range before {
		if after[id].Node != e.Node || after[id].Term != e.Term {
			t.Fatalf("shard %d: leader %+v became %+v", id, e, after[id])
		}
	}
	var framed uint64
	for _, tn := range nodes[:2] {
		framed += tn.hubs.Stats().FrameAnswers
	}
	if framed == 0 {
		t.Fatal("nodes 1 and 2 exchanged no frames")
	}
}
