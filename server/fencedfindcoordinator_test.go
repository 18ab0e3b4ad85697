package server

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/groups"
)

// pinnedRequest sends req to the node at addr alone (a fresh client whose
// only broker is that seed) and returns the answer or the failure.
func pinnedRequest(ctx context.Context, addr string, req kmsg.Request, opts ...kgo.Opt) (kmsg.Response, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// fenceACoordinator starts three nodes, stalls the disk of the one that
// coordinates a group, runs stalled (if set) with them, and returns the
// node, the group and its shard the moment the node has fenced itself
// (polled every millisecond). The disk answers again when the test ends.
func fenceACoordinator(t *testing.T, stalled func(victim *Server, group string)) (victim *Server, group string, shard int32) {
	t.Helper()
	servers := StartTestCluster(t, 3, func(i int, c *Config) {
		c.LogMaxSync = 300 * time.Millisecond
		c.OffsetsCommitUnregisteredTopics = true // commits go to Raft without a topic
	})
	waitAllReady(t, servers)
	victim, group, shard = groupLedBy(servers, "fenced")
	t.Cleanup(victim.Node().DiskFaults().Stall())
	if stalled != nil {
		stalled(victim, group)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !victim.Node().DiskHealth().Fenced() {
		if time.Now().After(deadline) {
			t.Fatal("the node did not fence itself")
		}
		time.Sleep(time.Millisecond)
	}
	return victim, group, shard
}

// groupLedBy returns a group id starting with prefix, its shard and
// the server that leads that shard.
func groupLedBy(servers []*Server, prefix string) (leader *Server, group string, shard int32) {
	for i := 0; ; i++ {
		group = fmt.Sprintf("%s-%d", prefix, i)
		shard = groups.PartitionFor(group, servers[0].ShardCount())
		for _, s := range servers {
			if s.Node().Shard(shard).IsLeader() {
				return s, group, shard
			}
		}
	}
}

// FindCoordinator asked of a node the moment it fenced itself for its
// disk names the group's new coordinator: the node waits for the shard's
// new leader to be known (kcoord.group.election.hold.ms) instead of
// answering COORDINATOR_NOT_AVAILABLE, on which segmentio/kafka-go leaves
// its group and rejoins as a new member, rebalancing it.
func TestAFencedNodeNamesTheNewCoordinator(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	victim, group, _ := fenceACoordinator(t, nil)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group} // v0-3, v4+
	resp, err := pinnedRequest(ctx, victim.KafkaAddr().String(), req)
	if err != nil {
		t.Fatal(err)
	}
	fc := resp.(*kmsg.FindCoordinatorResponse)
	code, id := fc.ErrorCode, fc.NodeID
	if len(fc.Coordinators) == 1 {
		code, id = fc.Coordinators[0].ErrorCode, fc.Coordinators[0].NodeID
	}
	if err := kerr.ErrorForCode(code); err != nil {
		t.Fatalf("FindCoordinator of %s asked of node %d as it fenced itself: %v", group, victim.cfg.NodeID, err)
	}
	if id == victim.cfg.NodeID {
		t.Fatalf("the fenced node %d named itself the coordinator of %s", id, group)
	}
	t.Logf("the fenced node %d named node %d", victim.cfg.NodeID, id)
}

// A leader that fenced itself for its disk answers its groups' requests
// NOT_COORDINATOR only once it knows the node it handed the shard to
// leads: a client told sooner asks another node for the coordinator in
// the moment before that node has heard of the hand-off, can be named the
// fenced node again, and segmentio/kafka-go leaves its group on that
// second refusal (BenchmarkDiskStall saw its group rebalance so).
func TestAFencedLeaderRefusesOnceItsSuccessorIsKnown(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	// A commit parks the leader's Raft on the stalled disk, and an
	// OffsetFetch then waits for its leadership confirmation: the fence
	// fails that confirmation, and the read must still wait for the
	// successor. Another OffsetFetch arrives after the fence.
	inFlight := make(chan error, 1)
	victim, group, shard := fenceACoordinator(t, func(victim *Server, group string) {
		addr := victim.KafkaAddr().String()
		go func() { _, _ = pinnedRequest(ctx, addr, offsetCommitOf(group)) }()
		time.Sleep(50 * time.Millisecond)
		go func() { inFlight <- offsetFetchRefusal(ctx, addr, group) }()
		time.Sleep(50 * time.Millisecond)
	})
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, kerr.NotCoordinator) {
			t.Fatalf("%s OffsetFetch of %s at the fenced node: %v, want NOT_COORDINATOR", what, group, err)
		}
		b, ok := victim.Node().LeaderOf(shard)
		if !ok || b.NodeID == victim.cfg.NodeID {
			t.Fatalf("the fenced node answered a %s read NOT_COORDINATOR while it knew no successor for shard %d (%v, %v)", what, shard, b, ok)
		}
	}
	check("later", offsetFetchRefusal(ctx, victim.KafkaAddr().String(), group))
	check("pending", <-inFlight)
}

// offsetCommitOf is a simple consumer's commit of partition 0 of "t" for
// group.
func offsetCommitOf(group string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// offsetFetchRefusal is the error of an OffsetFetch of group sent to addr
// alone (nil when it was served).
func offsetFetchRefusal(ctx context.Context, addr, group string) error {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group // v0-7
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group // v8+
	req.Groups = append(req.Groups, rg)
	resp, err := pinnedRequest(ctx, addr, req)
	if err != nil {
		return err
	}
	of := resp.(*kmsg.OffsetFetchResponse)
	code := of.ErrorCode
	if len(of.Groups) == 1 {
		code = of.Groups[0].ErrorCode
	}
	return kerr.ErrorForCode(code)
}

// A commit whose log write fails on the coordinator's disk (EIO) is
// answered NOT_COORDINATOR, which every client retries on the new
// coordinator, never UNKNOWN_SERVER_ERROR: the leader steps down and the
// entry may still commit under the next one (the chaos suite's
// disk-eio-leader nemesis found commits answered the unknown error).
func TestACommitWhoseLogWriteFailsIsRetriable(t *testing.T) {
	servers := StartTestCluster(t, 3, func(i int, c *Config) { c.OffsetsCommitUnregisteredTopics = true })
	waitAllReady(t, servers)
	ctx := testCtx(t, 60*time.Second)
	victim, group, _ := groupLedBy(servers, "eio")
	victim.Node().DiskFaults().FailNextWrite(syscall.EIO)
	resp, err := pinnedRequest(ctx, victim.KafkaAddr().String(), offsetCommitOf(group))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("a commit whose log write failed: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
}
