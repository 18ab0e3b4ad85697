package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/kcoord/kcoord/bench"
)

// newBenchShardsCmd returns "kcoord bench shards": how many Raft groups
// (offsets.topic.num.partitions) a cluster should run, measured on this
// machine (issue 35). It runs on the command's goroutine; progress goes to
// stderr, the markdown section to stdout only once every configuration
// completed.
func newBenchShardsCmd() *cobra.Command {
	var (
		dir      string
		logNodes bool
	)
	cfg := bench.DefaultShardsConfig("")
	cfg.Procs = procsPolicy()
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "Measure clusters of each shard count and size, and print a markdown section",
		Long: `For each --nodes count and each --shards count (offsets.topic.num.partitions,
one Raft group each), starts an in-process cluster (replication factor 3,
production Raft timings, data under --dir) and measures, in order: the time
until every node is ready and leadership is spread, and the spread; --clients
clients committing for --duration (commits/s, p50, p99); the idle process's
CPU over --idle; the failover of the node leading the most shards (killed,
then a commit to each shard it led retried until acknowledged); with that
node restarted, a fresh node joining until placement gave it its share; and a
remove-node of an original node until it is drained. Prints the section
"## How many Raft groups" of docs/benchmarks.md (make benchmarks appends it
to the report). Each wait is bounded by --phase-timeout. Every configuration
takes about --warmup + --duration + --idle + a minute or two (more shards and
nodes move more replicas).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			d, err := os.MkdirTemp(dir, "kcoord-bench-shards-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			cfg.Dir = d
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "bench-shards", Output: cmd.ErrOrStderr(), Level: hclog.Info})
			if logNodes {
				cfg.NodeLogger = hclog.New(&hclog.LoggerOptions{Name: "kcoord", Output: cmd.ErrOrStderr(), Level: hclog.Warn})
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			results, err := bench.Shards(ctx, cfg)
			if err != nil {
				return err
			}
			return bench.WriteShards(cmd.OutOrStdout(), cfg, results)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "where the nodes keep their data (default the system's temp dir; use the disk a deployment would)")
	f.IntSliceVar(&cfg.Shards, "shards", cfg.Shards, "shard counts (offsets.topic.num.partitions) to measure")
	f.IntSliceVar(&cfg.Nodes, "nodes", cfg.Nodes, "cluster sizes to measure, each at least 3")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "clients committing at once, each to its own group")
	f.DurationVar(&cfg.Commits, "duration", cfg.Commits, "how long commits are timed in each configuration")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "how long the clients commit before timing starts")
	f.DurationVar(&cfg.Idle, "idle", cfg.Idle, "how long the idle cluster's CPU is measured")
	f.DurationVar(&cfg.Phase, "phase-timeout", cfg.Phase, "the longest any one wait may take (ready, spread, failover, add, drain)")
	f.BoolVar(&logNodes, "log-nodes", false, "write the nodes' warnings and errors to stderr")
	return cmd
}
