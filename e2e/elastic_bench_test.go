package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/bench"
	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/server"
)

// BenchmarkReplicaMoves measures what adding and draining a node costs a
// loaded cluster: three in-process nodes with 50 shards hold 10 k groups ×
// 10 partitions of committed offsets (100 k offsets) while 8 clients keep
// committing; a fourth node joins with Join alone, then is removed again.
// It reports the time until placement settles after each (no shard moving
// or under-replicated) and the commits' p99 in a fault-free baseline phase
// beside the p99 while replicas move. One iteration is the whole scenario:
//
//	go test ./e2e -run '^$' -bench ReplicaMoves -benchtime 1x
func BenchmarkReplicaMoves(b *testing.B) {
	const (
		shards     = 50
		groups     = 10_000
		partitions = 10
		committers = 8
		baseline   = 10 * time.Second
	)
	for b.Loop() {
		mutate := func(c *server.Config) {
			c.OffsetsTopicNumPartitions = shards
		}
		servers := server.StartTestCluster(b, 3, func(_ int, c *server.Config) { mutate(c) })
		seeds := []string{servers[0].KafkaAddr().String(), servers[1].KafkaAddr().String(), servers[2].KafkaAddr().String()}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		const topic = "moves"
		topicID := createTopic(ctx, b, newAdmin(b, seeds[0]), topic, partitions)
		commit := func(cl *kgo.Client, group string, offset int64) error {
			resp, err := bench.FillRequest(group, topic, topicID, partitions, offset).RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return err
					}
				}
			}
			return nil
		}
		group := func(i int) string { return fmt.Sprintf("moves-%d", i) }

		// Fill.
		fillStart := time.Now()
		var fill sync.WaitGroup
		for w := range 16 {
			cl := newClient(b, seeds[0], kgo.SeedBrokers(seeds...))
			fill.Go(func() {
				for i := w; i < groups; i += 16 {
					// A node's copy of the topic registry may lag the
					// creation by a moment.
					err := commit(cl, group(i), 1)
					for try := 0; errors.Is(err, kerr.UnknownTopicOrPartition) && try < 50; try++ {
						time.Sleep(100 * time.Millisecond)
						err = commit(cl, group(i), 1)
					}
					if err != nil {
						b.Errorf("fill %s: %v", group(i), err)
						return
					}
				}
			})
		}
		fill.Wait()
		b.Logf("filled %d groups × %d partitions in %v", groups, partitions, time.Since(fillStart).Round(time.Millisecond))

		// Commits go on throughout, each latency tagged with the phase.
		var mu sync.Mutex
		phase := "baseline"
		lat := map[string][]time.Duration{}
		stop := make(chan struct{})
		var load sync.WaitGroup
		for range committers {
			cl := newClient(b, seeds[0], kgo.SeedBrokers(seeds...), kgo.RetryTimeout(30*time.Second))
			load.Go(func() {
				for off := int64(2); ; off++ {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					if err := commit(cl, group(rand.IntN(groups)), off); err != nil {
						b.Errorf("commit: %v", err)
						return
					}
					d := time.Since(start)
					mu.Lock()
					lat[phase] = append(lat[phase], d)
					mu.Unlock()
				}
			})
		}
		setPhase := func(p string) { mu.Lock(); phase = p; mu.Unlock() }
		time.Sleep(baseline)

		setPhase("adding")
		addStart := time.Now()
		fourth := server.AddTestNode(b, servers, 4, mutate)
		all := append(slices.Clone(servers), fourth)
		waitPlacementSettled(ctx, b, all, func(id int32, st cluster.PlacementStats) bool { return id != 4 || st.Replicas > 0 })
		added := time.Since(addStart)
		held := fourth.Node().PlacementStats().Replicas

		setPhase("draining")
		drainStart := time.Now()
		removeNode(ctx, b, servers[0], 4)
		waitPlacementSettled(ctx, b, all, func(id int32, st cluster.PlacementStats) bool { return id != 4 || st.Replicas == 0 })
		drained := time.Since(drainStart)
		setPhase("after")
		time.Sleep(time.Second)
		close(stop)
		load.Wait()
		cancel()

		p99 := func(p string) time.Duration {
			l := slices.Clone(lat[p])
			slices.Sort(l)
			if len(l) == 0 {
				return 0
			}
			return l[len(l)*99/100]
		}
		b.Logf("node 4 took %d replicas in %v and gave them up in %v; commit p99 %v baseline, %v adding (%.2f×), %v draining (%.2f×); %d, %d, %d commits",
			held, added.Round(time.Millisecond), drained.Round(time.Millisecond),
			p99("baseline"), p99("adding"), float64(p99("adding"))/float64(p99("baseline")),
			p99("draining"), float64(p99("draining"))/float64(p99("baseline")),
			len(lat["baseline"]), len(lat["adding"]), len(lat["draining"]))
		b.ReportMetric(added.Seconds(), "add-s")
		b.ReportMetric(drained.Seconds(), "drain-s")
		b.ReportMetric(float64(p99("baseline").Microseconds())/1000, "p99-baseline-ms")
		b.ReportMetric(float64(p99("adding").Microseconds())/1000, "p99-adding-ms")
		b.ReportMetric(float64(p99("draining").Microseconds())/1000, "p99-draining-ms")
	}
}
