package cluster

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
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
