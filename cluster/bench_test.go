package cluster

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// BenchmarkApply measures Raft applies on a single node, 64 writers spread
// over the shards, with the node-wide log store (group commit) beside
// raft-boltdb's file per shard as the baseline. One iteration is one
// committed, applied entry; compare applies/s.
//
//	go test ./cluster -run '^$' -bench Apply -benchtime 5000x
func BenchmarkApply(b *testing.B) {
	for _, shards := range []int32{8, 50} {
		for _, store := range []string{LogStoreNode, LogStoreShard} {
			b.Run(fmt.Sprintf("shards-%d/%s", shards, store), func(b *testing.B) {
				cfg := testConfig(b, b.TempDir(), 1, shards)
				cfg.Logger = hclog.NewNullLogger()
				cfg.LogStore = store
				tn := startTestNode(b, cfg)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := tn.WaitReady(ctx); err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := next.Add(1)
						s := tn.Shard(int32(i % int64(shards)))
						if _, err := s.Apply(ctx, []byte(fmt.Sprintf("set k%d v", i)), 5*time.Second); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
			})
		}
	}
}

// BenchmarkReplicate measures replicated applies on three in-process
// nodes (replication factor 3, 50 shards, the test timings), 64 writers
// spread over the shards' leaders: with every shard's AppendEntries to a
// peer on one append stream (appendhub.go) and, as the baseline, on each
// shard's own NetworkTransport (Config.SeparateAppendStreams). One
// iteration is one committed entry; compare applies/s and the process's
// CPU time per apply (cpu-us/apply).
//
//	go test ./cluster -run '^$' -bench Replicate -benchtime 20000x -count 3
func BenchmarkReplicate(b *testing.B) {
	for _, tc := range []struct {
		name     string
		separate bool
	}{{"append-stream", false}, {"separate-streams", true}} {
		b.Run(tc.name, func(b *testing.B) {
			benchReplicate(b, func(c *Config) { c.SeparateAppendStreams = tc.separate })
		})
	}
}

// BenchmarkReplicatePipeline is BenchmarkReplicate on the append stream
// with each shard leader's AppendEntries pipelined to its followers
// (Config.PipelineAppends) and, as the baseline in the same run, sent one
// at a time and waited for (the default). It also reports the
// AppendEntries the append stream carried (appends/apply) and those the
// pipelines sent again after they overtook one on the follower
// (resent/apply).
//
//	go test ./cluster -run '^$' -bench ReplicatePipeline -benchtime 20000x -count 3
func BenchmarkReplicatePipeline(b *testing.B) {
	for _, tc := range []struct {
		name     string
		pipeline bool
	}{{"pipeline", true}, {"stop-and-wait", false}} {
		b.Run(tc.name, func(b *testing.B) {
			benchReplicate(b, func(c *Config) { c.PipelineAppends = tc.pipeline })
		})
	}
}

// benchReplicate is the body of the replication benchmarks: three
// in-process nodes with 50 shards configured by mutate, 64 writers over
// the shards' leaders.
func benchReplicate(b *testing.B, mutate func(*Config)) {
	const shards = 50
	nodes := startTestCluster(b, 3, shards, func(c *Config) {
		c.Logger = hclog.NewNullLogger()
		mutate(c)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leaders := make([]*Shard, shards)
	eventually(b, 10*time.Second, "a leader for every shard", func() bool {
		for id := range int32(shards) {
			leaders[id] = nil
			for _, tn := range nodes {
				if s := tn.Shard(id); s.IsLeader() {
					leaders[id] = s
				}
			}
			if leaders[id] == nil {
				return false
			}
		}
		return true
	})
	var resent0, appends0 uint64
	for _, tn := range nodes {
		resent0 += tn.hubs.PipelineStats().Resent
		appends0 += tn.hubs.Stats().Appends
	}
	var next atomic.Int64
	b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			if _, err := leaders[i%shards].Apply(ctx, fmt.Appendf(nil, "set k%d v", i), 5*time.Second); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/apply")
	var resent, appends uint64
	for _, tn := range nodes {
		resent += tn.hubs.PipelineStats().Resent
		appends += tn.hubs.Stats().Appends
	}
	b.ReportMetric(float64(appends-appends0)/float64(b.N), "appends/apply")
	b.ReportMetric(float64(resent-resent0)/float64(b.N), "resent/apply")
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
