package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/kcoord/kcoord/bench"
	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/server"
)

// BenchmarkIdleCPU measures what three idle in-process nodes with 50
// shards (Kafka's default, 0.1.0's) at replication factor 3 cost: the CPU time the process
// uses over a 10 s window with no client connected, after leadership has
// settled, as a share of one core (100 = one core busy). The nodes use
// production Raft timings (server.DefaultConfig's), not the shortened test
// ones, so the figure is what a deployed cluster spends. The baselines:
// "every-heartbeat" sends every Raft heartbeat (HeartbeatReuse off, as
// before heartbeats.go), and "commit-50ms" does that with group shards at
// hashicorp/raft's 50 ms commit timeout too, as before GroupCommitTimeout.
//
//	go test ./e2e -run '^$' -bench IdleCPU -benchtime 1x
func BenchmarkIdleCPU(b *testing.B) {
	for _, bc := range []struct {
		name   string
		mutate func(*cluster.Config)
	}{
		{"default", func(*cluster.Config) {}},
		{"every-heartbeat", func(c *cluster.Config) { c.HeartbeatReuse = -1 }},
		{"commit-50ms", func(c *cluster.Config) { c.HeartbeatReuse, c.GroupCommitTimeout = -1, 50*time.Millisecond }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				benchIdleCPU(b, bc.mutate)
			}
		})
	}
}

func benchIdleCPU(b *testing.B, mutate func(*cluster.Config)) {
	const window = 10 * time.Second
	servers := server.StartTestCluster(b, 3, func(_ int, c *server.Config) {
		c.OffsetsTopicNumPartitions = 50
		c.Raft = mutate // production Raft and gossip timings otherwise
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bench.WaitLeadersSpread(ctx, servers); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the last transfers' aftermath
	start, t0 := bench.ProcessCPU(), time.Now()
	time.Sleep(window)
	used, wall := bench.ProcessCPU()-start, time.Since(t0)
	share := 100 * used.Seconds() / wall.Seconds()
	b.Logf("three idle nodes, 50 shards, RF 3: %.1f%% of one core (%v CPU in %v)", share, used.Round(time.Millisecond), wall.Round(time.Millisecond))
	b.ReportMetric(share, "cpu%")
	for _, s := range servers {
		_ = s.Kill()
	}
}
