package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcoord/kcoord/bench"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkLargeState measures a three-process cluster (50 shards, RF 3)
// holding 100 k groups × 10 partitions of committed offsets (1 M offsets,
// every one on every node): each node's resident memory after the fill,
// the time a node restarted with SIGTERM takes to be ready again, and a
// failover (procFailover) at that size beside one of the same cluster
// before the fill, as its baseline. One iteration is the whole scenario:
//
//	go test ./e2e -run '^$' -bench LargeState -benchtime 1x -timeout 20m
func BenchmarkLargeState(b *testing.B) {
	const (
		groups     = 100_000
		partitions = 10
		fillers    = 32
	)
	for b.Loop() {
		ctx := testContext(b, 15*time.Minute)
		procs := startProcCluster(ctx, b, 3, "-c", "offsets.topic.num.partitions=50")
		seeds := []string{procs[0].kafka, procs[1].kafka, procs[2].kafka}
		const topic = "large"
		topicID := createTopic(ctx, b, newAdmin(b, seeds[0]), topic, partitions)
		emptyFailover := procFailover(ctx, b, procs, "empty-failover", topic)

		start := time.Now()
		var wg sync.WaitGroup
		var failed sync.Once
		for w := range fillers {
			cl := newClient(b, seeds[0], kgo.SeedBrokers(seeds...))
			wg.Go(func() {
				for i := w; i < groups; i += fillers {
					req := kmsg.NewPtrOffsetCommitRequest()
					req.Group, req.Generation = fmt.Sprintf("large-%d", i), -1
					rt := kmsg.NewOffsetCommitRequestTopic()
					rt.Topic, rt.TopicID = topic, topicID
					for p := range int32(partitions) {
						rp := kmsg.NewOffsetCommitRequestTopicPartition()
						rp.Partition, rp.Offset, rp.LeaderEpoch = p, int64(i), -1
						rt.Partitions = append(rt.Partitions, rp)
					}
					req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
					resp, err := req.RequestWith(ctx, cl)
					if err == nil {
						err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
					}
					if err != nil {
						failed.Do(func() { b.Errorf("commit to large-%d: %v", i, err) })
						return
					}
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			return
		}
		fill := time.Since(start)
		time.Sleep(5 * time.Second) // followers apply, the last batches settle
		var rss []float64
		for _, p := range procs {
			mb, err := bench.ResidentMB(p.cmd.Process.Pid)
			if err != nil {
				b.Fatal(err)
			}
			rss = append(rss, mb)
		}

		// A planned restart of node 3: SIGTERM, start, ready.
		procs[2].stop(syscall.SIGTERM)
		t0 := time.Now()
		procs[2].start(ctx)
		restart := time.Since(t0)
		largeFailover := procFailover(ctx, b, procs, "large-7", topic)

		b.Logf("filled %d groups × %d partitions in %v (%.0f group commits/s); resident memory per node %.0f / %.0f / %.0f MiB; node 3 ready %v after its restart; failover %v full against %v empty (%.2f×)",
			groups, partitions, fill.Round(time.Millisecond), groups/fill.Seconds(), rss[0], rss[1], rss[2], restart.Round(time.Millisecond),
			largeFailover.Round(time.Millisecond), emptyFailover.Round(time.Millisecond), largeFailover.Seconds()/emptyFailover.Seconds())
		b.ReportMetric(max(rss[0], rss[1], rss[2]), "max-rss-MiB")
		b.ReportMetric(restart.Seconds(), "restart-s")
		b.ReportMetric(groups/fill.Seconds(), "fill-groups/s")
		b.ReportMetric(largeFailover.Seconds()/emptyFailover.Seconds(), "failover-x-empty")
	}
}

// procFailover kills -9 the process coordinating group and returns the
// time from the kill until a commit to group, sent through a surviving
// node's FindCoordinator answer, is accepted; then it restarts the killed
// node and waits until it is ready.
func procFailover(ctx context.Context, b *testing.B, procs []*kcoordProc, group, topic string) time.Duration {
	b.Helper()
	for tryRawCommit(ctx, procs[0].kafka, group, "", -1, topic, 0) != nil {
		if ctx.Err() != nil {
			b.Fatalf("no commit to %s before the failover", group)
		}
		time.Sleep(10 * time.Millisecond)
	}
	id, err := coordinatorID(ctx, procs[0].kafka, group)
	if err != nil {
		b.Fatal(err)
	}
	victim := procs[id-1]
	survivor := procs[int(id)%len(procs)].kafka
	start := time.Now()
	victim.kill9()
	for tryRawCommit(ctx, survivor, group, "", -1, topic, 0) != nil {
		if ctx.Err() != nil {
			b.Fatalf("no failover of %s", group)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	victim.start(ctx)
	return took
}

// coordinatorID is the node id FindCoordinator at addr names for group.
func coordinatorID(ctx context.Context, addr, group string) (int32, error) {
	found, err := findCoordinator(ctx, addr, group)
	if err != nil {
		return 0, err
	}
	return found.NodeID, nil
}
