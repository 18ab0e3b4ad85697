package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// pipelineTotals sums what the nodes' append pipelines did.
func pipelineTotals(nodes []*testNode) (opened, stopped, failed, resent uint64) {
	for _, tn := range nodes {
		st := tn.hubs.PipelineStats()
		opened, stopped, failed, resent = opened+st.Opened, stopped+st.Stopped, failed+st.Failed, resent+st.Resent
	}
	return
}

// leaderOf returns the node leading shard now, nil if none does.
func leaderOf(nodes []*testNode, shard int32) *testNode {
	for _, tn := range nodes {
		if tn.Shard(shard).IsLeader() {
			return tn
		}
	}
	return nil
}

// pipelinedWriters runs writers goroutines that each commit up to each
// entries, round robin over the shards, through the shard's leader of the
// moment, until they are done or stop closes. A write a leadership change
// failed is tried again, for a few seconds at most. It returns the keys whose
// writes were acknowledged, by shard.
func pipelinedWriters(t *testing.T, nodes []*testNode, shards int32, writers, each int, stop <-chan struct{}) map[int32][]string {
	t.Helper()
	var mu sync.Mutex
	acked := make(map[int32][]string)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				select {
				case <-stop:
					return
				default:
				}
				shard := int32((w + i) % int(shards))
				key := fmt.Sprintf("w%d-%d", w, i)
				var err error
				for range 100 { // 2 s and more of elections and transfers
					if leader := leaderOf(nodes, shard); leader == nil {
						err = raft.ErrNotLeader
					} else {
						_, err = leader.Shard(shard).Apply(context.Background(), fmt.Appendf(nil, "set %s %d", key, i), 5*time.Second)
					}
					if err == nil || !errors.Is(err, raft.ErrLeadershipLost) && !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipTransferInProgress) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil {
					t.Errorf("writer %d: shard %d: %s: %v", w, shard, key, err)
					return
				}
				mu.Lock()
				acked[shard] = append(acked[shard], key)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return acked
}

// everyReplicaHolds waits until every node's replica of each shard holds
// every acknowledged key.
func everyReplicaHolds(t *testing.T, nodes []*testNode, acked map[int32][]string) {
	t.Helper()
	for _, tn := range nodes {
		for shard, keys := range acked {
			eventually(t, 10*time.Second, fmt.Sprintf("node %d shard %d holds its %d writes", tn.ID(), shard, len(keys)), func() bool {
				for _, k := range keys {
					if _, ok := tn.fsm(shard).get(k); !ok {
						return false
					}
				}
				return true
			})
		}
	}
}

// shutdownWithin shuts every node down at once and fails the test if
// that takes longer than d: a replication goroutine parked in a pipeline
// holds raft's Shutdown for good.
func shutdownWithin(t *testing.T, nodes []*testNode, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, tn := range nodes {
			wg.Go(func() { _ = tn.Shutdown() })
		}
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("the nodes did not shut down within %v", d)
	}
}

// With PipelineAppends, concurrent writes to three nodes commit and reach
// every replica, and the shards' leaders did pipeline their
// AppendEntries (on the append hub).
func TestPipelinedReplicationReachesEveryReplica(t *testing.T) {
	const shards = 4
	nodes := startTestCluster(t, 3, shards, func(c *Config) { c.PipelineAppends = true })
	waitShardLeaders(t, nodes, shards)
	acked := pipelinedWriters(t, nodes, shards, 16, 40, nil)
	everyReplicaHolds(t, nodes, acked)
	opened, stopped, failed, resent := pipelineTotals(nodes)
	t.Logf("pipelines: %d opened, %d stopped by an answer, %d failed; %d requests sent again", opened, stopped, failed, resent)
	if opened == 0 {
		t.Fatal("no shard leader pipelined its AppendEntries")
	}
	shutdownWithin(t, nodes, 20*time.Second)
}

// Leadership transfers in the middle of pipelined writes, where the old
// leader's pipelines get the answers of a newer term that stop raft's
// pipeline decoder (the v1.8.0 deadlock's trigger), hang nothing: every
// transfer returns, the writes go on at the new leaders, every
// acknowledged one reaches every replica, and the nodes shut down.
func TestPipelinedReplicationSurvivesLeadershipTransfers(t *testing.T) {
	const shards = 4
	nodes := startTestCluster(t, 3, shards, func(c *Config) { c.PipelineAppends = true })
	waitShardLeaders(t, nodes, shards)
	stop := make(chan struct{})
	var acked map[int32][]string
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		acked = pipelinedWriters(t, nodes, shards, 16, 150, stop)
	}()
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); <-writing }
	t.Cleanup(halt) // the writers end before the test does, whatever fails
	for round := range 3 {
		time.Sleep(150 * time.Millisecond) // let writes flow through the pipelines
		var wg sync.WaitGroup
		for shard := range int32(shards) {
			leader := leaderOf(nodes, shard)
			if leader == nil {
				continue // an election is under way already
			}
			wg.Go(func() {
				if err := leader.Shard(shard).transferLeadership("", ""); err != nil {
					t.Logf("round %d: shard %d: transfer from node %d: %v", round, shard, leader.ID(), err)
				}
			})
		}
		transferred := make(chan struct{})
		go func() { wg.Wait(); close(transferred) }()
		select {
		case <-transferred:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: leadership transfers did not return", round)
		}
		waitShardLeaders(t, nodes, shards)
	}
	select {
	case <-writing:
	case <-time.After(60 * time.Second):
		t.Fatal("the writers did not finish")
	}
	everyReplicaHolds(t, nodes, acked)
	opened, stopped, failed, resent := pipelineTotals(nodes)
	t.Logf("pipelines: %d opened, %d stopped by an answer, %d failed; %d requests sent again", opened, stopped, failed, resent)
	if opened == 0 {
		t.Fatal("no shard leader pipelined its AppendEntries")
	}
	shutdownWithin(t, nodes, 20*time.Second)
}
