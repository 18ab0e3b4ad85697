package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kcoord/kcoord/cluster/raftnet"
)

// leaderOfShard returns the node whose Raft leads shard, or nil.
func leaderOfShard(nodes []*testNode, shard int32) *testNode {
	for _, tn := range nodes {
		if tn.Shard(shard).IsLeader() {
			return tn
		}
	}
	return nil
}

// waitLeaderEpoch waits until a node leads shard and its leadership
// notification has been delivered, and returns the node and its epoch.
func waitLeaderEpoch(t *testing.T, nodes []*testNode, shard int32) (*testNode, uint64) {
	t.Helper()
	var leader *testNode
	eventually(t, 10*time.Second, "a notified leader", func() bool {
		leader = leaderOfShard(nodes, shard)
		return leader != nil && leader.Shard(shard).Leadership().Leader
	})
	return leader, leader.Shard(shard).Leadership().Epoch
}

// TestConfirmLeadershipBatchesConcurrentReads: reads that arrive together
// share confirmation rounds, so a burst of reads costs a few round trips,
// not one each, and every one of them is confirmed.
func TestConfirmLeadershipBatchesConcurrentReads(t *testing.T) {
	nodes := startTestCluster(t, 3, 1)
	leader, epoch := waitLeaderEpoch(t, nodes, 0)
	sh := leader.Shard(0)
	const reads = 200
	before := sh.ReadRounds()
	var wg sync.WaitGroup
	errs := make([]error, reads)
	for i := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errs[i] = sh.ConfirmLeadership(ctx, epoch)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("read %d on the leader: %v", i, err)
		}
	}
	rounds := sh.ReadRounds() - before
	t.Logf("%d concurrent reads confirmed in %d rounds", reads, rounds)
	if rounds == 0 || rounds > reads/4 {
		t.Fatalf("%d reads took %d confirmation rounds: they are not batched", reads, rounds)
	}
}

// TestConfirmLeadershipRefusesAnIsolatedLeader: a leader cut off from its
// followers still believes it leads for a moment, but cannot confirm it:
// reads served under that leadership are refused, never answered stale.
func TestConfirmLeadershipRefusesAnIsolatedLeader(t *testing.T) {
	nodes := startTestCluster(t, 3, 1)
	leader, epoch := waitLeaderEpoch(t, nodes, 0)
	heal := leader.Faults().Isolate()
	defer heal()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !leader.Shard(0).Leads(epoch) {
		t.Skip("the isolated leader stepped down before it was asked")
	}
	err := leader.Shard(0).ConfirmLeadership(ctx, epoch)
	if !errors.Is(err, ErrNotLeading) {
		t.Fatalf("isolated leader's confirmation: %v, want ErrNotLeading", err)
	}
}

// TestLosingLeadershipEndsItsEpoch: the loss of leadership is a
// notification of its own, so a later regain is a new epoch and nothing
// started under the first can act under the second.
func TestLosingLeadershipEndsItsEpoch(t *testing.T) {
	nodes := startTestCluster(t, 3, 1)
	leader, epoch := waitLeaderEpoch(t, nodes, 0)
	if !leader.Shard(0).Leads(epoch) {
		t.Fatal("the notified leader does not lead its epoch")
	}
	heal := leader.Faults().Isolate()
	eventually(t, 10*time.Second, "the isolated leader steps down", func() bool {
		return !leader.Shard(0).Leadership().Leader
	})
	if leader.Shard(0).Leads(epoch) {
		t.Fatal("a deposed leader still leads its old epoch")
	}
	heal()
	if l := leader.Shard(0).Leadership(); l.Epoch <= epoch {
		t.Fatalf("epoch after a loss: %d, was %d", l.Epoch, epoch)
	}
}

// TestConfirmationAfterAPauseCommitsABarrier: right after the process was
// paused, followers' answers buffered during the pause may predate a newer
// leader, so a confirmation commits a barrier instead of counting
// heartbeat answers; otherwise it does not.
func TestConfirmationAfterAPauseCommitsABarrier(t *testing.T) {
	nodes := startTestCluster(t, 3, 1)
	leader, epoch := waitLeaderEpoch(t, nodes, 0)
	sh := leader.Shard(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eventually(t, 10*time.Second, "no recent pause", func() bool { return !raftnet.PausedRecently() })
	before := sh.reads.committed.Load()
	if err := sh.ConfirmLeadership(ctx, epoch); err != nil {
		t.Fatal(err)
	}
	if sh.reads.committed.Load() != before && !raftnet.PausedRecently() {
		t.Fatal("a confirmation with no pause committed a barrier")
	}
	raftnet.MarkPause() // as the watch's ticker does after a long gap
	before = sh.reads.committed.Load()
	if err := sh.ConfirmLeadership(ctx, epoch); err != nil {
		t.Fatal(err)
	}
	if sh.reads.committed.Load() != before+1 {
		t.Fatal("a confirmation right after a pause did not commit a barrier")
	}
}
