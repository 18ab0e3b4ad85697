package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/server"
)

// waitPlacementSettled waits until the metadata leader among servers has no
// shard moving, queued for a move or under-replicated, and settled holds
// for the placement statistics of every server.
// It fails tb with the shards still moving when ctx ends first.
func waitPlacementSettled(ctx context.Context, tb testing.TB, servers []*server.Server, settled func(id int32, st cluster.PlacementStats) bool) {
	tb.Helper()
	for {
		done := false
		for _, s := range servers {
			if st := s.Node().PlacementStats(); st.MetaLeader && st.MovesInFlight == 0 && st.MovesQueued == 0 && st.UnderReplicated == 0 {
				done = true
			}
		}
		for _, s := range servers {
			done = done && settled(s.Node().ID(), s.Node().PlacementStats())
		}
		if done {
			return
		}
		if ctx.Err() != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			st := servers[0].Node().Status(sctx)
			cancel()
			for _, sh := range st.Shards {
				if sh.Moving || sh.UnderReplicated {
					tb.Logf("shard %d: leader %d term %d voters %v non-voters %v desired %v under-replicated %v moving %v",
						sh.Shard, sh.Leader, sh.Term, sh.Voters, sh.Nonvoters, sh.Desired, sh.UnderReplicated, sh.Moving)
				}
			}
			for _, s := range servers {
				tb.Logf("node %d: %+v", s.Node().ID(), s.Node().PlacementStats())
			}
			tb.Fatal("placement did not settle")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeNode asks through s that node id be drained, retrying while the
// metadata group has no leader to take it.
func removeNode(ctx context.Context, tb testing.TB, s *server.Server, id int32) {
	tb.Helper()
	for {
		err := s.Node().RemoveNode(ctx, id)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			tb.Fatalf("remove node %d: %v", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNodesAddedAndRemovedUnderACommittingGroup grows a three-node cluster
// to five and shrinks it back to three (drain 5, stop it; drain 4, stop it)
// while a franz-go consumer group commits what it owns every 50 ms. Shards
// move and leaderships follow (the group's coordinator among them), yet the
// group never rebalances, no acknowledged commit is lost, and every shard
// ends with its three voters on the nodes that remain.
func TestNodesAddedAndRemovedUnderACommittingGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("moves every shard's replicas twice")
	}
	ctx := testContext(t, 4*time.Minute)
	servers, seeds := startTestCluster(t)
	const topic, partitions = "elastic", 4
	createTopic(ctx, t, newAdmin(t, seeds[0]), topic, partitions)
	const group = "elastic-inproc"
	var members []*kgoMember
	for i := range 2 {
		members = append(members, startKgoMember(ctx, t, seeds[0], group, topic, i, kgo.RangeBalancer(), kgo.SeedBrokers(seeds...)))
	}
	adm := newAdmin(t, seeds[0])
	waitFor(ctx, t, "two franz-go members to own the partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, partitions, "range", kgoView(members))
	})
	time.Sleep(3 * heartbeatInterval)
	before := dcSnapshot(members)

	// Each member commits the partitions it owns; acked keeps the last
	// acknowledged offset per partition.
	var mu sync.Mutex
	acked := map[int32]int64{}
	var commits, failures int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopLoad) // a failed wait ends the test before the load stops
	for _, m := range members {
		wg.Go(func() {
			for off := int64(1); ; off++ {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				owned := m.owned.list()
				offsets := map[int32]int64{}
				for _, p := range owned {
					offsets[p] = off
				}
				err := m.commit(ctx, topic, offsets)
				mu.Lock()
				if err == nil {
					commits++
					for _, p := range owned {
						acked[p] = off
					}
				} else {
					failures++
				}
				mu.Unlock()
			}
		})
	}

	// 3 → 5.
	all := slices.Clone(servers)
	for id := int32(4); id <= 5; id++ {
		all = append(all, server.AddTestNode(t, all, id, nil))
	}
	waitPlacementSettled(ctx, t, all, func(id int32, st cluster.PlacementStats) bool { return id <= 3 || st.Replicas > 0 })
	t.Logf("five nodes: %v", replicaCounts(all))
	// The group's coordinator goes to a node that leaves, so its hand-off
	// is part of the test.
	leaving := leadOnALeavingNode(t, all, group)
	coordinator := watchCoordinator(t, all[0], group)

	// 5 → 4 → 3: drain a node, then stop it.
	for id := int32(5); id >= 4; id-- {
		removeNode(ctx, t, all[0], id)
		waitPlacementSettled(ctx, t, all, func(n int32, st cluster.PlacementStats) bool { return n != id || st.Replicas == 0 })
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := all[id-1].Shutdown(sctx); err != nil {
			t.Errorf("stop node %d: %v", id, err)
		}
		cancel()
		all = all[:id-1]
		t.Logf("node %d drained and stopped: %v", id, replicaCounts(all))
	}
	stopLoad()
	history := coordinator.stop()
	t.Logf("the group's coordinator, from its move to node %d on: %v", leaving, history)
	if leaving > 0 && (len(history) < 2 || history[len(history)-1] > 3) {
		t.Errorf("the group's coordinator went %v; it was to go from node %d to one of nodes 1-3", history, leaving)
	}

	// Every shard has its three voters on nodes 1-3, as placement desires,
	// and the metadata shard lets the stopped nodes' read replicas go.
	waitFor(ctx, t, "every shard on nodes 1-3 alone", func(ctx context.Context) error {
		st := servers[0].Node().Status(ctx)
		for _, sh := range st.Shards {
			if !slices.Equal(sh.Voters, []int32{1, 2, 3}) || len(sh.Nonvoters) > 0 || sh.UnderReplicated {
				return fmt.Errorf("shard %d has voters %v, non-voters %v, under-replicated %v", sh.Shard, sh.Voters, sh.Nonvoters, sh.UnderReplicated)
			}
		}
		return nil
	})
	// The group went through it all in its generation, and holds every
	// acknowledged commit.
	survivors := dcAdminSeeds(t, seeds)
	waitFor(ctx, t, "the group Stable with its members", func(ctx context.Context) error {
		return checkGroup(ctx, survivors, group, topic, partitions, "range", kgoView(members))
	})
	if after := dcSnapshot(members); !slices.Equal(before, after) {
		t.Errorf("the group rebalanced: %+v -> %+v", before, after)
	}
	got, err := fetchOffsets(ctx, survivors, group)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if commits == 0 {
		t.Fatal("no commit was acknowledged")
	}
	for p, off := range acked {
		if c := got[topic][p]; c.Offset < off {
			t.Errorf("partition %d: offset %d committed, %d was acknowledged", p, c.Offset, off)
		}
	}
	t.Logf("%d commits acknowledged, %d failed (and retried on the next tick)", commits, failures)
}

// coordinatorWatch records which node leads a group's shard, as one node
// routes it, sampled every 20 ms.
type coordinatorWatch struct {
	history []int32
	done    chan struct{}
	wg      sync.WaitGroup
	stopped sync.Once
}

// watchCoordinator starts watching the leader of group's shard through s;
// the watch stops when the test ends, if not before.
func watchCoordinator(t *testing.T, s *server.Server, group string) *coordinatorWatch {
	n := s.Node()
	shard := s.ShardFor(group)
	w := &coordinatorWatch{done: make(chan struct{})}
	sample := func() {
		if b, ok := n.LeaderOf(shard); ok && (len(w.history) == 0 || w.history[len(w.history)-1] != b.NodeID) {
			w.history = append(w.history, b.NodeID)
		}
	}
	sample()
	w.wg.Go(func() {
		for {
			select {
			case <-w.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			sample()
		}
	})
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the watch and returns the leaders seen, in order.
func (w *coordinatorWatch) stop() []int32 {
	w.stopped.Do(func() { close(w.done) })
	w.wg.Wait()
	return w.history
}

// leadOnALeavingNode moves the leadership of group's shard to node 5, or to
// node 4 when 5 holds no replica of it, and returns the node that leads it
// after; 0 when neither holds one (the test then checks no hand-off).
func leadOnALeavingNode(t *testing.T, servers []*server.Server, group string) int32 {
	t.Helper()
	shard := servers[0].ShardFor(group)
	var leader *cluster.Shard
	var leaderID int32
	for _, s := range servers {
		if sh := s.Node().Shard(shard); sh != nil && sh.IsLeader() {
			leader, leaderID = sh, s.Node().ID()
		}
	}
	if leader == nil {
		t.Fatalf("shard %d has no leader", shard)
	}
	conf := leader.Raft.GetConfiguration().Configuration()
	for _, target := range []int32{5, 4} {
		for _, srv := range conf.Servers {
			if srv.ID != raft.ServerID(strconv.Itoa(int(target))) || srv.Suffrage != raft.Voter {
				continue
			}
			if target != leaderID {
				if err := leader.Raft.LeadershipTransferToServer(srv.ID, srv.Address).Error(); err != nil {
					t.Fatalf("move shard %d's leadership to node %d: %v", shard, target, err)
				}
			}
			// The transfer is done; wait until node 1 routes to it.
			deadline := time.Now().Add(10 * time.Second)
			for {
				if b, ok := servers[0].Node().LeaderOf(shard); ok && b.NodeID == target {
					return target
				}
				if time.Now().After(deadline) {
					t.Fatalf("node 1 does not route shard %d to node %d", shard, target)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	t.Logf("shard %d has no replica on node 4 or 5: its coordinator moves only for balance", shard)
	return 0
}

// replicaCounts is each server's voting replica count, by node id.
func replicaCounts(servers []*server.Server) string {
	s := ""
	for _, sv := range servers {
		s += fmt.Sprintf(" %d:%d", sv.Node().ID(), sv.Node().PlacementStats().Replicas)
	}
	return s
}
