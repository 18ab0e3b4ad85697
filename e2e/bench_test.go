package e2e

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchClients is how many clients (connections, groups and goroutines) the
// parallel variant runs, as in the design's baselines.
const benchClients = 64

// BenchmarkOffsetCommit measures OffsetCommit round trips from kgo clients:
// one iteration is one admin commit (generation -1, one partition) of a
// rising offset. "serial" is one client committing one at a time;
// "parallel64" is 64 clients, each committing to its own group. kcoord is
// an in-process single node (8 shards, every commit a Raft entry); kfake is
// franz-go's in-memory fake cluster as the baseline. Compare commits/s.
//
//	go test ./e2e -run '^$' -bench OffsetCommit -benchtime 2000x
func BenchmarkOffsetCommit(b *testing.B) {
	b.Run("kcoord", func(b *testing.B) {
		benchOffsetCommit(b, startServer(b))
	})
	b.Run("kfake", func(b *testing.B) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		benchOffsetCommit(b, c.ListenAddrs()[0])
	})
}

func benchOffsetCommit(b *testing.B, addr string) {
	const topic = "bench-commits"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	topicID := createTopic(ctx, b, newAdmin(b, addr), topic, 1)

	// The clients live across both runs of each sub-benchmark (N=1, then
	// N=benchtime); every group is committed to once before timing so
	// coordinator lookups and connections are warm.
	clients := make([]*kgo.Client, benchClients)
	for i := range clients {
		clients[i] = newClient(b, addr)
	}
	var offset atomic.Int64
	commit := func(cl *kgo.Client, group string) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset.Add(1), -1
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("commit response has %d topics", len(resp.Topics))
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	group := func(i int) string { return fmt.Sprintf("bench-group-%d", i) }
	var warm sync.WaitGroup
	errs := make([]error, len(clients))
	for i, cl := range clients {
		warm.Go(func() { errs[i] = commit(cl, group(i)) })
	}
	warm.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("warm-up commit to %s: %v", group(i), err)
		}
	}

	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if err := commit(clients[0], group(0)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
	b.Run(fmt.Sprintf("parallel%d", benchClients), func(b *testing.B) {
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((benchClients + procs - 1) / procs)
		var next atomic.Int64
		var firstErr atomic.Pointer[error]
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1)-1) % benchClients
			cl, g := clients[i], group(i)
			for pb.Next() {
				if err := commit(cl, g); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		})
		b.StopTimer()
		if err := firstErr.Load(); err != nil {
			b.Fatal(*err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
}
