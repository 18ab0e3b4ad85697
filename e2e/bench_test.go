package e2e

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/bench"
	"github.com/kcoord/kcoord/server"
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
	b.Run("kcoord-3nodes", func(b *testing.B) {
		servers := server.StartTestCluster(b, 3, nil)
		benchOffsetCommit(b, servers[0].KafkaAddr().String(), servers[1].KafkaAddr().String(), servers[2].KafkaAddr().String())
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

func benchOffsetCommit(b *testing.B, addr string, more ...string) {
	const topic = "bench-commits"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	topicID := createTopic(ctx, b, newAdmin(b, addr), topic, 1)

	// The clients live across both runs of each sub-benchmark (N=1, then
	// N=benchtime); every group is committed to once before timing so
	// coordinator lookups and connections are warm.
	clients := make([]*kgo.Client, benchClients)
	for i := range clients {
		clients[i] = newClient(b, addr, kgo.SeedBrokers(append([]string{addr}, more...)...))
	}
	var offset atomic.Int64
	commit := func(cl *kgo.Client, group string) error {
		return bench.CommitOffset(ctx, cl, group, topic, topicID, offset.Add(1))
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

	benchRoundTrips(b, "commits/s", func(i int) error { return commit(clients[i], group(i)) })
}

// benchRoundTrips runs the two variants of a round-trip benchmark: "serial"
// is op(0) one at a time; "parallelN" is benchClients goroutines, the i-th
// calling op(i) (its own client and group). It reports the rate as rate
// and the round trips' p50 and p99.
func benchRoundTrips(b *testing.B, rate string, op func(i int) error) {
	b.Run("serial", func(b *testing.B) {
		var lat []time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			if err := op(0); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		reportRoundTrips(b, rate, lat)
	})
	b.Run(fmt.Sprintf("parallel%d", benchClients), func(b *testing.B) {
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((benchClients + procs - 1) / procs)
		var next atomic.Int64
		var firstErr atomic.Pointer[error]
		var latMu sync.Mutex
		var lat []time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1)-1) % benchClients
			var mine []time.Duration
			for pb.Next() {
				start := time.Now()
				if err := op(i); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				mine = append(mine, time.Since(start))
			}
			latMu.Lock()
			lat = append(lat, mine...)
			latMu.Unlock()
		})
		b.StopTimer()
		if err := firstErr.Load(); err != nil {
			b.Fatal(*err)
		}
		reportRoundTrips(b, rate, lat)
	})
}

// reportRoundTrips reports the rate of b's iterations and the p50 and p99
// of the round trips measured.
func reportRoundTrips(b *testing.B, rate string, lat []time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), rate)
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkFailover measures how long a group is without a coordinator when
// the node leading its shard dies: one iteration starts a three-node
// in-process cluster, commits to a group, kills the group's coordinator
// (no leadership transfer) and times until a surviving node's answer
// routes a commit to the new leader and it is accepted. Reported as
// failover-ms (mean); Raft timings are server.TestClusterConfig's (500ms
// heartbeat and election timeouts).
//
//	go test ./e2e -run '^$' -bench Failover -benchtime 5x
func BenchmarkFailover(b *testing.B) {
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		servers := server.StartTestCluster(b, 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		group := fmt.Sprintf("failover-bench-%d", i)
		createTopic(ctx, b, newAdmin(b, servers[0].KafkaAddr().String()), "t", 1)
		var victim int
		for {
			if err := tryRawCommit(ctx, servers[0].KafkaAddr().String(), group, "", -1, "t", 0); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		leader, _ := servers[0].Node().LeaderOf(servers[0].ShardFor(group))
		victim = int(leader.NodeID - 1)
		survivor := servers[(victim+1)%3].KafkaAddr().String()
		b.StartTimer()
		start := time.Now()
		_ = servers[victim].Kill()
		for tryRawCommit(ctx, survivor, group, "", -1, "t", 0) != nil {
			if ctx.Err() != nil {
				b.Fatal("no failover")
			}
			time.Sleep(5 * time.Millisecond)
		}
		total += time.Since(start)
		b.StopTimer()
		cancel()
		for _, s := range servers {
			_ = s.Kill()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "failover-ms")
}
