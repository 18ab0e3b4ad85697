package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// diskTestBound is kcoord.log.max.sync.ms in these tests.
const diskTestBound = 300 * time.Millisecond

func withDiskBound(cfg *Config) { cfg.MaxSyncDuration = diskTestBound }

// ledBy returns the shards (MetaShard included) that node id leads.
func ledBy(leaders map[int32]leaderEntry, id int32) []int32 {
	var out []int32
	for shard, e := range leaders {
		if e.Node == id {
			out = append(out, shard)
		}
	}
	slices.Sort(out)
	return out
}

// others returns nodes without tn.
func others(nodes []*testNode, tn *testNode) []*testNode {
	var out []*testNode
	for _, o := range nodes {
		if o != tn {
			out = append(out, o)
		}
	}
	return out
}

// leaderAmong returns the node of among whose Raft leads shard, or nil.
func leaderAmong(among []*testNode, shard int32) *testNode {
	for _, tn := range among {
		if tn.Shard(shard).IsLeader() {
			return tn
		}
	}
	return nil
}

// TestStalledDiskFencesTheNodeAndItsShardsElectElsewhere: a leader whose
// disk stops answering (every write and fsync blocks, the process and its
// sockets stay) fences itself in process: its pending write fails, it
// leads nothing and routes nowhere, the shards it led elect among the
// others at once and take writes, and once the disk answers it catches up
// as a follower, without having applied the write it could not make
// durable.
func TestStalledDiskFencesTheNodeAndItsShardsElectElsewhere(t *testing.T) {
	const shards = 4
	nodes := startGossipCluster(t, 3, shards, withDiskBound)
	leaders := waitShardLeaders(t, nodes, shards)
	victim := nodeByID(nodes, leaders[0].Node)
	led := ledBy(leaders, victim.ID())
	rest := others(nodes, victim)
	ctx := context.Background()
	if _, err := victim.Shard(0).Apply(ctx, []byte("set k before"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	epoch := victim.Shard(0).Leadership().Epoch
	t.Logf("stalling the disk of node %d, leader of shards %v", victim.ID(), led)

	resume := victim.DiskFaults().Stall()
	t.Cleanup(resume)
	stalledAt := time.Now()
	applied := make(chan error, 1)
	go func() {
		_, err := victim.Shard(0).Apply(ctx, []byte("set k stalled"), 30*time.Second)
		applied <- err
	}()
	eventually(t, 10*time.Second, "the victim fences itself", func() bool { return victim.DiskHealth().State == DiskStalled })
	fencedAt := time.Now()
	t.Logf("fenced %v after the stall: %s", fencedAt.Sub(stalledAt), victim.DiskHealth().Reason)
	select {
	case err := <-applied:
		if !errors.Is(err, raft.ErrLeadershipLost) {
			t.Fatalf("the write pending at the fence: %v, want raft.ErrLeadershipLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write pending on the stalled disk was not answered at the fence")
	}
	if victim.Shard(0).Leads(epoch) || victim.Ready() {
		t.Fatal("a fenced node still leads or reports ready")
	}
	// It holds requests for a shard it led only until gossip names the
	// node that took it over (handingOver).
	eventually(t, 5*time.Second, "the fenced node to stop holding shard 0's requests", func() bool { return !victim.Shard(0).Settling() })
	if b, ok := victim.LeaderOf(0); !ok || b.NodeID == victim.ID() {
		t.Fatalf("the fenced node stopped holding requests naming %v (%v) the leader of shard 0", b, ok)
	}
	if _, err := victim.Shard(0).Apply(ctx, []byte("set k fenced"), time.Second); !errors.Is(err, raft.ErrLeadershipLost) {
		t.Fatalf("a write proposed on the fenced node: %v, want raft.ErrLeadershipLost", err)
	}

	for _, id := range led {
		eventually(t, 10*time.Second, fmt.Sprintf("shard %d led elsewhere and routed there", id), func() bool {
			l := leaderAmong(rest, id)
			if l == nil {
				return false
			}
			for _, tn := range nodes {
				if b, ok := tn.LeaderOf(id); !ok || b.NodeID != l.ID() {
					return false
				}
			}
			return true
		})
	}
	t.Logf("every shard the victim led is led and routed elsewhere %v after the fence", time.Since(fencedAt))
	for _, tn := range rest {
		eventually(t, 5*time.Second, fmt.Sprintf("node %d leaves the fenced node out of Brokers", tn.ID()), func() bool {
			return !slices.Contains(brokerIDs(tn.Node), victim.ID())
		})
	}
	if slices.Contains(brokerIDs(victim.Node), victim.ID()) {
		t.Errorf("the fenced node lists itself in Brokers: %v", brokerIDs(victim.Node))
	}
	for _, id := range allShardIDs(shards) {
		if b, ok := victim.LeaderOf(id); ok && b.NodeID == victim.ID() {
			t.Errorf("the fenced node names itself the leader of shard %d", id)
		}
	}
	if _, err := leaderAmong(rest, 0).Shard(0).Apply(ctx, []byte("set k during"), 2*time.Second); err != nil {
		t.Fatalf("a write to the new leader: %v", err)
	}

	resume()
	eventually(t, 10*time.Second, "the victim unfences once its disk answers", func() bool { return !victim.DiskHealth().Fenced() })
	eventually(t, 10*time.Second, "the victim catches up as a follower", func() bool {
		v, _ := victim.fsm(0).get("k")
		return v == "during"
	})
	if victim.Shard(0).IsLeader() {
		t.Error("the victim leads shard 0 again right after its stall; it should rejoin as a follower")
	}
	waitReady(t, victim.Node, 10*time.Second)
	for _, tn := range nodes {
		eventually(t, 5*time.Second, fmt.Sprintf("node %d routes to the victim again", tn.ID()), func() bool {
			return slices.Contains(brokerIDs(tn.Node), victim.ID())
		})
	}
	if lines := victim.logs.Lines("node disk unhealthy"); len(lines) != 1 {
		t.Errorf("log lines for the fence: %q, want one", lines)
	}
	if lines := victim.logs.Lines("node disk answers again", "still_leading=0"); len(lines) != 1 {
		t.Errorf("log lines for the recovery: %q, want one", lines)
	}
}

// TestFailedFsyncFencesTheNodeUntilRestart: an fsync that answers EIO
// leaves the log's contents unknown, so the node fences itself for good
// (fail-stop, with the reason on /readyz): the others take its shards,
// and it stays out of routing however long it keeps running.
func TestFailedFsyncFencesTheNodeUntilRestart(t *testing.T) {
	const shards = 2
	nodes := startGossipCluster(t, 3, shards, withDiskBound)
	leaders := waitShardLeaders(t, nodes, shards)
	victim := nodeByID(nodes, leaders[0].Node)
	rest := others(nodes, victim)

	victim.DiskFaults().FailNextSync(syscall.EIO)
	if _, err := victim.Shard(0).Apply(context.Background(), []byte("set k lost"), 2*time.Second); err == nil {
		t.Fatal("a write over a failing fsync succeeded")
	}
	eventually(t, 5*time.Second, "the victim fences itself as failed", func() bool { return victim.DiskHealth().State == DiskFailed })
	for _, id := range ledBy(leaders, victim.ID()) {
		eventually(t, 10*time.Second, fmt.Sprintf("shard %d led elsewhere", id), func() bool { return leaderAmong(rest, id) != nil })
	}
	if _, err := leaderAmong(rest, 0).Shard(0).Apply(context.Background(), []byte("set k after"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * diskTestBound) // longer than a stall's recovery hold
	if h := victim.DiskHealth(); h.State != DiskFailed || victim.Ready() {
		t.Fatalf("the failed node recovered by itself: %+v", h)
	}
	if v, _ := victim.fsm(0).get("k"); v == "lost" {
		t.Error("the failed node applied a write it could not make durable")
	}
}

// TestDiskWatchJudgesStallsAndRecovery walks the watch through a stall
// and a recovery on a fake store: it fences at the bound, not before, and
// unfences only once the disk has answered for the hold.
func TestDiskWatchJudgesStallsAndRecovery(t *testing.T) {
	store := &fakeDisk{}
	w := &diskWatch{store: store, max: time.Second, hold: 2 * time.Second}
	t0 := time.Unix(1000, 0)
	cur := DiskHealth{State: DiskHealthy}
	step := func(at time.Duration, busy time.Duration, want DiskState) {
		t.Helper()
		store.busy = busy
		cur = w.judge(cur, t0.Add(at))
		if cur.State != want {
			t.Fatalf("at %v with a write in flight for %v: %s, want %s", at, busy, cur.State, want)
		}
	}
	step(0, 900*time.Millisecond, DiskHealthy)
	step(100*time.Millisecond, time.Second, DiskStalled)
	step(5*time.Second, 5*time.Second, DiskStalled)
	step(6*time.Second, 0, DiskStalled)                     // answering since 6 s
	step(7*time.Second, 1500*time.Millisecond, DiskStalled) // stuck again: the hold starts over
	step(8*time.Second, 0, DiskStalled)
	step(9900*time.Millisecond, 10*time.Millisecond, DiskStalled)
	step(10*time.Second, 0, DiskHealthy)
	store.failed = syscall.ENOSPC
	step(11*time.Second, 0, DiskFailed)
	store.failed = nil
	step(20*time.Second, 0, DiskFailed)
}

type fakeDisk struct {
	busy   time.Duration
	failed error
}

func (d *fakeDisk) Busy() time.Duration { return d.busy }
func (d *fakeDisk) Failed() error       { return d.failed }

// TestCommitsDoNotWaitForAStalledFollower: a follower whose disk stops
// answering, with the watchdog off so it stays in the cluster, does not
// hold up the leader's commits: the leader and the other follower are a
// quorum.
func TestCommitsDoNotWaitForAStalledFollower(t *testing.T) {
	const shards = 2
	nodes := startGossipCluster(t, 3, shards, func(cfg *Config) { cfg.MaxSyncDuration = -1 })
	leaders := waitShardLeaders(t, nodes, shards)
	leader := nodeByID(nodes, leaders[0].Node)
	var follower *testNode
	for _, tn := range others(nodes, leader) {
		if !slices.Contains(ledBy(leaders, tn.ID()), MetaShard) {
			follower = tn // not the metadata leader either
			break
		}
	}
	if follower == nil {
		follower = others(nodes, leader)[0]
	}
	resume := follower.DiskFaults().Stall()
	t.Cleanup(resume)
	for i := range 20 {
		if _, err := leader.Shard(0).Apply(context.Background(), []byte(fmt.Sprintf("set k v%d", i)), 5*time.Second); err != nil {
			t.Fatalf("commit %d with a follower's disk stalled: %v", i, err)
		}
	}
	if follower.DiskHealth().Fenced() {
		t.Fatal("the watchdog is off, yet the follower fenced itself")
	}
	resume()
	eventually(t, 10*time.Second, "the stalled follower catches up", func() bool {
		v, _ := follower.fsm(0).get("k")
		return v == "v19"
	})
}

// TestSlowLeaderHandsItsLeadershipsToFasterVoters: a leader whose fsyncs
// answer, but far slower than its peers', hands every shard it leads to a
// faster voter (its commits waited for its own fsync), says so in gossip,
// and is given none back while slow; once its disk is fast again it says
// so too.
func TestSlowLeaderHandsItsLeadershipsToFasterVoters(t *testing.T) {
	const shards = 3
	nodes := startGossipCluster(t, 3, shards, func(cfg *Config) { cfg.slowSyncFloor = 20 * time.Millisecond })
	leaders := waitShardLeaders(t, nodes, shards)
	victim := nodeByID(nodes, leaders[0].Node)
	rest := others(nodes, victim)

	// Writes on every shard, so every node's log commits all along.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			for _, id := range allShardIDs(shards) {
				if l := leaderAmong(nodes, id); l != nil {
					_, _ = l.Shard(id).Apply(context.Background(), []byte(fmt.Sprintf("set k %d", i)), time.Second)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { close(stop); <-done }()

	restore := victim.DiskFaults().SlowSyncs(100 * time.Millisecond)
	t.Cleanup(restore)
	eventually(t, 30*time.Second, "the slow leader leads nothing", func() bool {
		for _, id := range allShardIDs(shards) {
			if victim.Shard(id).IsLeader() {
				return false
			}
		}
		return victim.slowDisk.Load()
	})
	for _, tn := range rest {
		eventually(t, 5*time.Second, fmt.Sprintf("node %d knows the victim's disk is slow", tn.ID()), func() bool {
			return tn.members.slowNode(victim.ID())
		})
	}
	if victim.DiskHealth().Fenced() {
		t.Fatal("a slow disk fenced the node; it should only lose its leaderships")
	}
	restore()
	eventually(t, 30*time.Second, "the victim's disk counts as fast again", func() bool {
		return !victim.slowDisk.Load() && !rest[0].members.slowNode(victim.ID())
	})
}

// A leader's failed log write reaches a proposer as raft.LogCache words it
// (the store's error as text): it must read as a lost leadership, which
// clients retry as NOT_COORDINATOR, not as an unknown error.
func TestAFailedLogWriteIsALostLeadership(t *testing.T) {
	store := &failingLogStore{err: errors.New("nodestore: log write failed: input/output error")}
	cache, err := raft.NewLogCache(16, store)
	if err != nil {
		t.Fatal(err)
	}
	werr := cache.StoreLogs([]*raft.Log{{Index: 1, Term: 1}})
	if got := storeFailure(werr); !errors.Is(got, raft.ErrLeadershipLost) {
		t.Fatalf("%v became %v, want raft.ErrLeadershipLost", werr, got)
	}
	if other := errors.New("something else"); storeFailure(other) != other {
		t.Fatal("another error was translated")
	}
}

// failingLogStore is a raft.LogStore whose writes fail.
type failingLogStore struct {
	raft.InmemStore
	err error
}

func (s *failingLogStore) StoreLogs([]*raft.Log) error { return s.err }

// TestShutdownWaitsForAFenceUnderWay: a node whose disk failed fences
// itself on its disk watch's goroutine, which tells each shard it led
// through the shard's notification channel and then hands its leaderships
// off through the shards' transports. Shutdown stops the shards and closes
// those channels, so it waits for a fence under way to finish (CI's race
// detector caught the two overlapping: a send on a closed channel panics).
// The hook holds the fence between the shards' fencing and the hand-offs.
func TestShutdownWaitsForAFenceUnderWay(t *testing.T) {
	const shards = 2
	nodes := startGossipCluster(t, 3, shards, withDiskBound)
	leaders := waitShardLeaders(t, nodes, shards)
	victim := nodeByID(nodes, leaders[0].Node)
	fencing, release := make(chan struct{}), make(chan struct{})
	hook := func() { close(fencing); <-release }
	victim.fenceHook.Store(&hook)

	victim.DiskFaults().FailNextSync(syscall.EIO)
	if _, err := victim.Shard(0).Apply(context.Background(), []byte("set k lost"), 2*time.Second); err == nil {
		t.Fatal("a write over a failing fsync succeeded")
	}
	select {
	case <-fencing:
	case <-time.After(10 * time.Second):
		t.Fatal("the victim did not fence itself")
	}
	done := make(chan error, 1)
	go func() { done <- victim.Shutdown() }()
	select {
	case <-done:
		close(release)
		t.Fatal("Shutdown returned while a fence was under way")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Logf("shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return once the fence finished")
	}
}
