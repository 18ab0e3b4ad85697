package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
)

// BenchmarkMetadataPropagation measures how long a follower of the
// metadata group takes to apply a change after its leader applied it:
// b.N topics are created one after the other through the metadata leader
// of a three-node in-process cluster (as CreateTopics does), and every
// node's replica is watched for each, from before the request. It
// reports the delay from the leader's apply to each follower's, p50, p99
// and max over both followers.
//
//	go test ./server -run '^$' -bench MetadataPropagation -benchtime 200x
func BenchmarkMetadataPropagation(b *testing.B) {
	servers := StartTestCluster(b, 3, nil)
	var leader *Server
	for _, s := range servers {
		if s.Node().Shard(cluster.MetaShard).IsLeader() {
			leader = s
		}
	}
	if leader == nil {
		b.Fatal("no metadata leader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var delays []time.Duration
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("propagated-%d", i)
		cmd, err := fsm.Encode(&fsm.TopicCreate{Topic: fsm.Topic{Name: name, Partitions: 1}})
		if err != nil {
			b.Fatal(err)
		}
		seen := make([]time.Time, len(servers))
		var wg sync.WaitGroup
		for j, s := range servers {
			wg.Go(func() {
				for ctx.Err() == nil {
					if _, ok := s.meta.Topic(name); ok {
						seen[j] = time.Now()
						return
					}
					time.Sleep(50 * time.Microsecond)
				}
			})
		}
		if err := leader.Node().ApplyMetadataChange(ctx, cmd, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		var at time.Time
		for j, s := range servers {
			if s == leader {
				at = seen[j]
			}
		}
		for j, s := range servers {
			if s != leader {
				delays = append(delays, max(0, seen[j].Sub(at)))
			}
		}
	}
	b.StopTimer()
	slices.Sort(delays)
	if len(delays) == 0 {
		b.Fatal("no delay measured")
	}
	q := func(f float64) float64 {
		return float64(delays[min(len(delays)-1, int(f*float64(len(delays))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
}
