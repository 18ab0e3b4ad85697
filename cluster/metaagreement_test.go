package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/fsm"
)

// metaCluster starts three nodes whose metadata group runs fsm.MetaFSM
// and returns a follower that knows the metadata leader, the leader, and
// the third node.
func metaCluster(t *testing.T) (follower, leader, other *testNode) {
	t.Helper()
	nodes := startTestCluster(t, 3, 1, func(c *Config) {
		c.NewMetaFSM = func() raft.FSM { return fsm.NewMetaFSM(nil) }
	})
	eventually(t, 10*time.Second, "a follower that knows the metadata leader", func() bool {
		for _, tn := range nodes {
			if b, ok := tn.MetaLeader(); ok && !tn.Shard(MetaShard).IsLeader() && nodeByID(nodes, b.NodeID).Shard(MetaShard).IsLeader() {
				follower, leader = tn, nodeByID(nodes, b.NodeID)
				return true
			}
		}
		return false
	})
	for _, tn := range nodes {
		if tn != follower && tn != leader {
			other = tn
		}
	}
	return follower, leader, other
}

func metaOf(tn *testNode) *fsm.MetaFSM { return tn.Shard(MetaShard).FSM.(*fsm.MetaFSM) }

func applyMeta(t *testing.T, through *testNode, cmd fsm.Command) error {
	t.Helper()
	b, err := fsm.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return through.ApplyMetadataChange(ctx, b, 3*time.Second)
}

// A metadata change answered through a follower is in that follower's
// replica when the answer comes (a CreateTopics followed by a Metadata
// request on the same node finds the topic), and in every other live
// replica too: a listing through any node right after shows it.
func TestAMetadataChangeIsAppliedWhereItIsAnswered(t *testing.T) {
	follower, leader, other := metaCluster(t)
	for i := range 20 {
		name := fmt.Sprintf("t%d", i)
		if err := applyMeta(t, follower, &fsm.TopicCreate{Topic: fsm.Topic{Name: name, Partitions: 1}}); err != nil {
			t.Fatal(err)
		}
		for _, tn := range []*testNode{follower, leader, other} {
			if _, ok := metaOf(tn).Topic(name); !ok {
				t.Fatalf("node %d does not hold %s when its creation through node %d was answered", tn.ID(), name, follower.ID())
			}
		}
	}
	// A refused change is answered once this replica holds what refused
	// it: the topic exists here when "exists" is the answer.
	if err := applyMeta(t, leader, &fsm.TopicCreate{Topic: fsm.Topic{Name: "dup", Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := applyMeta(t, other, &fsm.TopicCreate{Topic: fsm.Topic{Name: "dup", Partitions: 1}}); !errors.Is(err, fsm.ErrTopicExists) {
		t.Fatalf("creating an existing topic through node %d: %v, want fsm.ErrTopicExists", other.ID(), err)
	}
}

// A change that takes something away is answered only once every live
// replica applied it, however slowly the leader's entries reach one of
// them: a revoked ACL or a deleted credential must not keep working on a
// lagging node. A DENY ACL takes a grant away too.
func TestARevocationWaitsForEveryLiveReplica(t *testing.T) {
	follower, leader, slow := metaCluster(t)
	if err := applyMeta(t, follower, &fsm.TopicCreate{Topic: fsm.Topic{Name: "doomed", Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	// The leader's writes to the slow node take 80 ms more (its
	// heartbeat timeout is 200 ms): the leader and the follower make the
	// quorum, so the changes commit without it.
	heal := leader.Faults().Add(raftnet.Fault{Peer: slow.RaftAddr(), Delay: 80 * time.Millisecond})
	defer heal()
	start := time.Now()
	if err := applyMeta(t, follower, &fsm.TopicDelete{Name: "doomed"}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if _, ok := metaOf(slow).Topic("doomed"); ok {
		t.Fatalf("the delete was answered after %v while node %d still held the topic", took, slow.ID())
	}
	t.Logf("the delete was answered after %v, once the slow node applied it", took)

	deny := fsm.ACL{ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:eve", Host: "*", Operation: 3, Permission: fsm.ACLPermissionDeny}
	if err := applyMeta(t, follower, &fsm.ACLCreate{ACLs: []fsm.ACL{deny}}); err != nil {
		t.Fatal(err)
	}
	if got := metaOf(slow).ACLs(); len(got) != 1 {
		t.Fatalf("a DENY ACL was answered while node %d held %d ACLs", slow.ID(), len(got))
	}
}

// A retried removal finds nothing to remove, and its answer still means
// "gone everywhere": ConfirmMetadataEverywhere waits for every live
// replica to reach the leader's state.
func TestConfirmingEverywhereWaitsForTheSlowReplica(t *testing.T) {
	follower, leader, slow := metaCluster(t)
	heal := leader.Faults().Add(raftnet.Fault{Peer: slow.RaftAddr(), Delay: 80 * time.Millisecond})
	defer heal()
	// Straight into the leader's Raft: nothing waits for the replicas.
	b, err := fsm.Encode(&fsm.TopicCreate{Topic: fsm.Topic{Name: "quiet", Partitions: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Shard(MetaShard).Apply(context.Background(), b, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := follower.ConfirmMetadataEverywhere(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []*testNode{follower, leader, slow} {
		if _, ok := metaOf(tn).Topic("quiet"); !ok {
			t.Fatalf("node %d lacks the topic once every replica was confirmed", tn.ID())
		}
	}
}

// The read barrier brings a follower up to what the leader applied before
// it was called, however late the leader's entries reach it.
func TestTheReadBarrierSeesWhatTheLeaderApplied(t *testing.T) {
	_, leader, slow := metaCluster(t)
	heal := leader.Faults().Add(raftnet.Fault{Peer: slow.RaftAddr(), Delay: 80 * time.Millisecond})
	defer heal()
	for i := range 5 {
		name := fmt.Sprintf("seen-%d", i)
		b, err := fsm.Encode(&fsm.TopicCreate{Topic: fsm.Topic{Name: name, Partitions: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leader.Shard(MetaShard).Apply(context.Background(), b, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = slow.SyncMetadata(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := metaOf(slow).Topic(name); !ok {
			t.Fatalf("node %d lacks %s after its read barrier", slow.ID(), name)
		}
	}
}

// A replica is trusted to allow requests only while a read barrier
// succeeded lately: none yet at first; one makes it fresh; cut off from
// the leader it turns stale after maxStaleness and cannot sync; healed, a
// barrier makes it fresh again.
func TestAReplicaCutOffFromItsLeaderIsNotFresh(t *testing.T) {
	follower, _, _ := metaCluster(t)
	const maxStaleness = 300 * time.Millisecond
	sync := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return follower.SyncMetadata(ctx)
	}
	if follower.MetadataFresh(maxStaleness) {
		t.Fatal("a replica no barrier has confirmed is fresh")
	}
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	if !follower.MetadataFresh(maxStaleness) {
		t.Fatal("a replica is not fresh right after a barrier")
	}
	heal := follower.Faults().Isolate()
	eventually(t, 5*time.Second, "the isolated follower stale", func() bool { return !follower.MetadataFresh(maxStaleness) })
	if err := sync(); err == nil {
		t.Fatal("an isolated follower synced with the metadata leader")
	}
	if follower.MetadataFresh(maxStaleness) {
		t.Fatal("a failed barrier made the replica fresh")
	}
	heal()
	eventually(t, 10*time.Second, "the healed follower synced", func() bool { return sync() == nil })
	if !follower.MetadataFresh(maxStaleness) {
		t.Fatal("the healed follower is not fresh after a barrier")
	}
}

// The read barrier's rounds are shared: a round that began at or after a
// caller's read serves it, and one that began before never does (it could
// have read the leader before a change the caller must see).
func TestMetadataSyncRoundsServeOnlyLaterReads(t *testing.T) {
	var m metaSync
	release := make(chan struct{})
	started := make(chan time.Time, 10)
	run := func() error {
		started <- time.Now()
		<-release
		return nil
	}
	before := time.Now()
	first := m.join(before, run)
	roundStart := <-started
	// Reads that began before the running round share it; one that
	// began after it must wait for the next.
	if again := m.join(before, run); again != first {
		t.Fatal("a read that began before the running round did not share it")
	}
	later := roundStart.Add(time.Nanosecond)
	next := m.join(later, run)
	if next == first {
		t.Fatal("a read that began after the running round was served by it")
	}
	var wg sync.WaitGroup
	wg.Go(func() { <-first.done })
	release <- struct{}{}
	wg.Wait()
	<-started // the queued round
	release <- struct{}{}
	<-next.done
	if rd := m.join(later, run); rd != next {
		t.Fatal("a read already covered by a finished round waits for another")
	}
	if got := m.rounds.Load(); got != 2 {
		t.Fatalf("%d rounds ran, want 2", got)
	}

	// A round that failed serves the reads that began before it too:
	// one request's many misses do not each wait out a failing round.
	failing := func() error { return errors.New("no leader") }
	since := time.Now()
	rd := m.join(since, failing)
	<-rd.done
	if again := m.join(since, failing); again != rd || again.err == nil {
		t.Fatal("a read that began before a failed round was not given its failure")
	}
	if m.rounds.Load() != 3 {
		t.Fatalf("%d rounds ran, want 3", m.rounds.Load())
	}
}
