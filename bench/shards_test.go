package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kcoord/kcoord/groups"
)

func TestShardsMeasuresEveryStepOfAConfiguration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster, kills, restarts, adds and drains nodes")
	}
	if raceOn {
		t.Skip("runs without the race detector (make test's second step): see raceOn")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := DefaultShardsConfig(t.TempDir())
	cfg.Shards, cfg.Nodes = []int{8}, []int{3}
	cfg.Clients, cfg.Commits, cfg.Warmup, cfg.Idle = 16, 500*time.Millisecond, 200*time.Millisecond, 500*time.Millisecond
	cfg.Phase = time.Minute
	results, err := Shards(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	r := results[0]
	t.Logf("%+v", r)
	if r.Nodes != 3 || r.Shards != 8 {
		t.Errorf("configuration %d nodes, %d shards", r.Nodes, r.Shards)
	}
	if r.Ready <= 0 || r.Spread < 0 || r.LeadMin < 2 || r.LeadMax > 3 {
		t.Errorf("ready %v, spread %v, leads %d–%d (want 2–3 of 8 shards on 3 nodes)", r.Ready, r.Spread, r.LeadMin, r.LeadMax)
	}
	if r.Commits.Commits == 0 || r.Commits.P50 <= 0 || r.Commits.P99 < r.Commits.P50 {
		t.Errorf("commits %s", r.Commits)
	}
	if r.IdleCPU <= 0 || r.IdleCPU > 100*float64(8) {
		t.Errorf("idle CPU %.1f%%", r.IdleCPU)
	}
	if f := r.Failover; f.Node < 1 || f.Node > 3 || f.Shards < 1 || f.P50 <= 0 || f.Max < f.P50 || f.Max > cfg.Phase {
		t.Errorf("failover %+v", f)
	}
	if a := r.Add; a.Node != 4 || a.Target != 6 || a.Replicas < 1 || a.Share <= 0 || a.Settled < a.Share || a.Settled > cfg.Phase {
		t.Errorf("add %+v (want node 4, target 8×3/4 = 6)", a)
	}
	if d := r.Drain; d.Node < 1 || d.Node > 3 || d.Replicas < 1 || d.Took <= 0 || d.Took > cfg.Phase {
		t.Errorf("drain %+v", d)
	}

	var out bytes.Buffer
	if err := WriteShards(&out, cfg, results); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	t.Log(md)
	for _, want := range []string{"## How many Raft groups\n\n| nodes | shards |", "\n| 3 | 8 | ", "(6 replicas", "`kcoord bench shards` on "} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q", want)
		}
	}
}

func TestWriteShardsPrintsOneRowPerConfiguration(t *testing.T) {
	cfg := DefaultShardsConfig("")
	cfg.Procs = "GOMAXPROCS 2"
	results := []ShardsResult{
		{
			Nodes: 3, Shards: 16, Ready: 1500 * time.Millisecond, Spread: 4 * time.Second, LeadMin: 5, LeadMax: 6,
			Commits:  CommitsResult{Commits: 20000, Errors: 2, Elapsed: 5 * time.Second, P50: 12340 * time.Microsecond, P99: 40 * time.Millisecond},
			IdleCPU:  6.25,
			Failover: ShardsFailover{Node: 2, Shards: 6, P50: 1100 * time.Millisecond, Max: 1250 * time.Millisecond},
			Add:      AddResult{Node: 4, Target: 12, Replicas: 13, Share: 20 * time.Second, Settled: 31 * time.Second},
			Drain:    DrainResult{Node: 3, Replicas: 12, Took: 25500 * time.Millisecond},
		},
		{Nodes: 5, Shards: 50},
	}
	var out bytes.Buffer
	if err := WriteShards(&out, cfg, results); err != nil {
		t.Fatal(err)
	}
	want := "| 3 | 16 | 1.50 s; 4.00 s | 5–6 | 4000 | 12.34 ms | 40.00 ms | 2 | 6.2% | 1.10 s / 1.25 s (6 shards) | 20.00 s / 31.00 s (13 replicas, share 12) | 25.50 s (12 replicas) |\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("section:\n%s\nlacks the row\n%s", out.String(), want)
	}
	if !strings.Contains(out.String(), "\n| 5 | 50 | ") {
		t.Errorf("section lacks the second row:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "(GOMAXPROCS 2)") || !strings.Contains(out.String(), "64 clients commit for 5s after 2s of warm-up") {
		t.Errorf("the paragraph does not say the run's settings:\n%s", out.String())
	}
}

func TestProbeGroupsLandOnTheirShards(t *testing.T) {
	for _, shards := range []int32{1, 8, 16, 50} {
		probes, err := probeGroups(shards)
		if err != nil {
			t.Fatal(err)
		}
		if len(probes) != int(shards) {
			t.Errorf("%d shards: %d probe groups", shards, len(probes))
		}
		for sh, g := range probes {
			if got := groups.PartitionFor(g, shards); got != sh {
				t.Errorf("%d shards: group %q is on shard %d, not %d", shards, g, got, sh)
			}
		}
	}
}

func TestShardsConfigRefusesWhatCannotRun(t *testing.T) {
	for name, mutate := range map[string]func(c *ShardsConfig){
		"two nodes":        func(c *ShardsConfig) { c.Nodes = []int{3, 2} },
		"no shard":         func(c *ShardsConfig) { c.Shards = []int{0} },
		"no shard count":   func(c *ShardsConfig) { c.Shards = nil },
		"no commit window": func(c *ShardsConfig) { c.Commits = 0 },
		"no phase bound":   func(c *ShardsConfig) { c.Phase = 0 },
		"no client":        func(c *ShardsConfig) { c.Clients = 0 },
	} {
		cfg := DefaultShardsConfig(t.TempDir())
		mutate(&cfg)
		if _, err := Shards(context.Background(), cfg); !errors.Is(err, ErrBadShardsConfig) {
			t.Errorf("%s: %v, want ErrBadShardsConfig", name, err)
		}
	}
	if err := DefaultShardsConfig("").Validate(); err != nil {
		t.Errorf("the default: %v", err)
	}
}
