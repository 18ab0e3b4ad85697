package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/transport"
)

// startProcCluster starts n `kcoord serve` processes that bootstrap one
// cluster together (8 shards, replication factor n) and waits until every
// one is ready. extra are more serve arguments for every node.
func startProcCluster(ctx context.Context, t testing.TB, n int, extra ...string) []*kcoordProc {
	t.Helper()
	procs := make([]*kcoordProc, n)
	for i := range procs {
		procs[i] = newProc(t)
	}
	for i, p := range procs {
		p.extra = append([]string{"--node-id", strconv.Itoa(i + 1), "--bootstrap-expect", strconv.Itoa(n)}, extra...)
		if i > 0 {
			p.extra = append(p.extra, "--join", procs[0].gossip)
		}
		p.launch()
	}
	for _, p := range procs {
		p.waitReady(ctx)
	}
	return procs
}

// rawDo sends one request on a fresh connection to addr.
func rawDo(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Do(ctx, req)
}

// rawCoordinator asks addr for group's coordinator and returns its Kafka
// address and node id.
func rawCoordinator(ctx context.Context, addr, group string) (string, int32, error) {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = group
	fc.SetVersion(3)
	r, err := rawDo(ctx, addr, fc)
	if err != nil {
		return "", 0, err
	}
	resp := r.(*kmsg.FindCoordinatorResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return "", 0, err
	}
	return net.JoinHostPort(resp.Host, strconv.Itoa(int(resp.Port))), resp.NodeID, nil
}

// rawSimpleCommit commits offset for (topic, partition) as a simple
// consumer (no member, generation -1) at the coordinator addr.
func rawSimpleCommit(ctx context.Context, addr, group, topic string, partition int32, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := rawDo(ctx, addr, req)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
}

// TestPausedLeaderServesNoStaleReads freezes the coordinator of many groups
// with SIGSTOP (a GC stall or a VM freeze looks the same to the cluster),
// lets the other nodes elect new leaders and change those groups, and
// resumes it with an OffsetFetch and a DescribeGroups already waiting in
// its socket. Its Raft still believes it leads when it wakes up: every
// answer must be NOT_COORDINATOR or the new state, never the old one.
func TestPausedLeaderServesNoStaleReads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three kcoord processes")
	}
	ctx := testContext(t, 3*time.Minute)
	procs := startProcCluster(ctx, t, 3)
	byID := map[int32]*kcoordProc{}
	for i, p := range procs {
		byID[int32(i+1)] = p
	}
	const topic = "paused"
	createTopic(ctx, t, newAdmin(t, procs[0].kafka), topic, 1)

	// Groups by coordinator; the victim is the node coordinating most.
	coordinated := map[int32][]string{}
	for i := range 64 {
		group := fmt.Sprintf("paused-%d", i)
		var node int32
		waitFor(ctx, t, "coordinator of "+group, func(ctx context.Context) error {
			var err error
			_, node, err = rawCoordinator(ctx, procs[0].kafka, group)
			return err
		})
		coordinated[node] = append(coordinated[node], group)
	}
	var victimID int32
	for id, gs := range coordinated {
		if victimID == 0 || len(gs) > len(coordinated[victimID]) {
			victimID = id
		}
	}
	victim := byID[victimID]
	groups := coordinated[victimID]
	fetched, described := groups[:len(groups)/2], groups[len(groups)/2:]
	t.Logf("node %d coordinates %d of 64 groups: %d fetched, %d described", victimID, len(groups), len(fetched), len(described))
	for _, g := range groups {
		waitFor(ctx, t, "first commit of "+g, func(ctx context.Context) error {
			return rawSimpleCommit(ctx, victim.kafka, g, topic, 0, 1)
		})
	}

	// A connection to the victim, open before the pause.
	vc, err := transport.Dial(ctx, victim.kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close()
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "kcoord-e2e", "1"
	if _, err := vc.Do(ctx, av); err != nil {
		t.Fatal(err)
	}

	pid := victim.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer resume()
	t.Logf("node %d (pid %d) stopped", victimID, pid)

	// The survivors take over and change every group: a newer offset for
	// the fetched ones, deletion for the described ones.
	var survivor *kcoordProc
	for id, p := range byID {
		if id != victimID {
			survivor = p
			break
		}
	}
	newCoordinator := func(ctx context.Context, g string) (string, error) {
		addr, node, err := rawCoordinator(ctx, survivor.kafka, g)
		if err != nil {
			return "", err
		}
		if node == victimID {
			return "", fmt.Errorf("%s still coordinated by the stopped node", g)
		}
		return addr, nil
	}
	for _, g := range fetched {
		waitFor(ctx, t, "commit of "+g+" on its new coordinator", func(ctx context.Context) error {
			addr, err := newCoordinator(ctx, g)
			if err != nil {
				return err
			}
			return rawSimpleCommit(ctx, addr, g, topic, 0, 2)
		})
	}
	for _, g := range described {
		waitFor(ctx, t, "deletion of "+g+" on its new coordinator", func(ctx context.Context) error {
			addr, err := newCoordinator(ctx, g)
			if err != nil {
				return err
			}
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.SetVersion(2)
			req.Groups = []string{g}
			r, err := rawDo(ctx, addr, req)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode)
		})
	}

	// Reads queued in the stopped node's socket, then it wakes up.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(8)
	for _, g := range fetched {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		rg.Topics = append(rg.Topics, rt)
		of.Groups = append(of.Groups, rg)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(5)
	dg.Groups = described
	if _, err := vc.Send(of); err != nil {
		t.Fatal(err)
	}
	if _, err := vc.Send(dg); err != nil {
		t.Fatal(err)
	}
	resume()
	t.Logf("node %d resumed with two reads waiting", victimID)

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := vc.Recv(rctx, of)
	if err != nil {
		t.Fatalf("OffsetFetch after resuming: %v", err)
	}
	stale, refused := 0, 0
	for _, rg := range r.(*kmsg.OffsetFetchResponse).Groups {
		switch {
		case rg.ErrorCode == kerr.NotCoordinator.Code:
			refused++
		case rg.ErrorCode != 0:
			t.Errorf("OffsetFetch %s: %v", rg.Group, kerr.ErrorForCode(rg.ErrorCode))
		case len(rg.Topics) != 1 || len(rg.Topics[0].Partitions) != 1:
			t.Errorf("OffsetFetch %s: %+v", rg.Group, rg.Topics)
		case rg.Topics[0].Partitions[0].Offset != 2:
			stale++
			t.Errorf("OffsetFetch %s on the resumed node: offset %d, the new coordinator holds 2", rg.Group, rg.Topics[0].Partitions[0].Offset)
		}
	}
	t.Logf("OffsetFetch: %d groups refused with NOT_COORDINATOR, %d stale", refused, stale)
	r, err = vc.Recv(rctx, dg)
	if err != nil {
		t.Fatalf("DescribeGroups after resuming: %v", err)
	}
	stale, refused = 0, 0
	for _, rg := range r.(*kmsg.DescribeGroupsResponse).Groups {
		switch {
		case rg.ErrorCode == kerr.NotCoordinator.Code:
			refused++
		case rg.ErrorCode == kerr.GroupIDNotFound.Code, rg.ErrorCode == 0 && rg.State == "Dead":
		default:
			stale++
			t.Errorf("DescribeGroups %s on the resumed node: state %q, error %d; the group was deleted", rg.Group, rg.State, rg.ErrorCode)
		}
	}
	t.Logf("DescribeGroups: %d groups refused with NOT_COORDINATOR, %d stale", refused, stale)
}
