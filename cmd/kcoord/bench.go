package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kcoord/kcoord/assignors/assignbench"
	"github.com/kcoord/kcoord/bench"
)

// newBenchCmd returns "kcoord bench", the benchmarks that compare kcoord
// with other implementations on this machine.
func newBenchCmd() *cobra.Command {
	bench := &cobra.Command{
		Use:   "bench",
		Short: "Run benchmarks",
		Args:  cobra.NoArgs,
	}
	bench.AddCommand(newBenchAssignCmd(), newBenchCommitsCmd(), newBenchReportCmd())
	bench.AddCommand(newBenchShardsCmd(), newBenchLoadCmd())
	return bench
}

// newBenchReportCmd returns "kcoord bench report": docs/benchmarks.md's
// figures, measured on this machine.
func newBenchReportCmd() *cobra.Command {
	var dir string
	cfg := bench.DefaultReportConfig("")
	cfg.Procs = procsPolicy()
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Measure kcoord beside kfake on this machine and print docs/benchmarks.md",
		Long: `Starts, one after the other and in this process, franz-go's in-memory kfake,
a kcoord node and a three-node kcoord cluster (the default shard count, replication factor
3, production Raft timings), runs "kcoord bench commits" against each with 64
clients and with 1, and measures the three idle nodes' CPU. Then it starts
three "kcoord serve" processes of this binary on 127.0.0.1 with serve's
defaults and measures the same on them, their failover (--failover-trials
kills of the node leading the most shards), a fill of --fill-groups groups
of --fill-partitions partitions through --fill-committers clients, their
resident memory after it, and how long a node killed then takes to be ready
again. It prints the figures as markdown, with kcoord's as ratios of kfake's
and of the disk's fdatasync p50 in --dir. It takes about --duration × 8 +
--idle × 2 + the fill + a few minutes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Duration <= 0 || cfg.Idle <= 0 {
				return errors.New("--duration and --idle must be positive")
			}
			if cfg.FailoverTrials < 1 || cfg.FillGroups < 1 || cfg.FillPartitions < 1 || cfg.FillCommitters < 1 {
				return errors.New("--failover-trials, --fill-groups, --fill-partitions and --fill-committers must be positive")
			}
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("the kcoord binary to start as processes: %w", err)
			}
			cfg.Binary = bin
			d, err := os.MkdirTemp(dir, "kcoord-bench-report-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			cfg.Dir = d
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return bench.Report(ctx, cmd.OutOrStdout(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "where the nodes keep their data (default the system's temp dir; use the disk a deployment would)")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long each commit measurement is timed")
	f.DurationVar(&cfg.Idle, "idle", cfg.Idle, "how long the idle clusters' CPU is measured")
	f.IntVar(&cfg.FailoverTrials, "failover-trials", cfg.FailoverTrials, "how many times a process is killed to time failover")
	f.IntVar(&cfg.FillGroups, "fill-groups", cfg.FillGroups, "groups the fill of the processes commits to")
	f.IntVar(&cfg.FillPartitions, "fill-partitions", cfg.FillPartitions, "partitions per group of the fill, all in one OffsetCommit")
	f.IntVar(&cfg.FillCommitters, "fill-committers", cfg.FillCommitters, "clients of the fill, one request in flight each")
	return cmd
}

// newBenchCommitsCmd returns "kcoord bench commits": the OffsetCommit
// benchmark against any Kafka-compatible server.
func newBenchCommitsCmd() *cobra.Command {
	var bootstrap string
	cfg := bench.DefaultCommitsConfig()
	cmd := &cobra.Command{
		Use:   "commits",
		Short: "Measure OffsetCommit throughput and latency of any Kafka-compatible server",
		Long: `Runs --clients franz-go clients against --bootstrap-server, each committing a
rising offset of one partition to its own consumer group (as an admin does:
generation -1, no member), one commit in flight per client, for --duration
after --warmup. Prints commits per second and the p50, p99 and max latency
of acknowledged commits; errors (after the client's own retries) are
counted apart. It creates the topic --topic if it is not there, and uses
the groups --topic-0, --topic-1, ...: one per client, or --groups groups
that the clients share, each client committing its own partition (as
members of a group do; the topic then has clients/groups partitions).

Run it against kcoord and, in the same session, against the server you
compare with (Kafka, Redpanda, kfake), and compare the two.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			brokers, err := bootstrapServers(cmd, bootstrap)
			if err != nil {
				return err
			}
			cfg.Brokers = brokers
			if cfg.Duration <= 0 || cfg.Warmup < 0 {
				return errors.New("--duration must be positive and --warmup not negative")
			}
			cfg.Prefix = cfg.Topic
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			r, err := bench.Commits(ctx, cfg)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), r)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&bootstrap, "bootstrap-server", "127.0.0.1:9092", "the server's brokers, host:port,... [$KCOORD_BOOTSTRAP_SERVER]")
	f.IntVar(&cfg.Clients, "clients", cfg.Clients, "clients committing at once, each with its own connection")
	f.IntVar(&cfg.Groups, "groups", cfg.Groups, "groups the clients share, each client committing its own partition (0: a group per client)")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long commits are timed")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "how long the clients commit before timing starts")
	f.StringVar(&cfg.Topic, "topic", cfg.Topic, "the topic committed to, and the prefix of the groups")
	return cmd
}

// newBenchAssignCmd returns "kcoord bench assign": kcoord's
// cooperative-sticky assignor against franz-go's on the same groups, the
// whole leader path each (JoinGroup metadata in, SyncGroup assignments out).
func newBenchAssignCmd() *cobra.Command {
	var (
		cases []string
		runs  int
	)
	cmd := &cobra.Command{
		Use:   "assign",
		Short: "Compare kcoord's cooperative-sticky assignor with franz-go's",
		Long: `Balances the same consumer groups with kcoord's cooperative-sticky assignor
and franz-go's and prints, per case: time and allocations per balance, the
plan's spread (most minus fewest partitions per member), moves (partitions
taken from members still in the group), and the rebalances needed to assign
everything. Cases: ` + strings.Join(assignbench.CaseNames, ", ") + `.
The large cases hold a million partitions; each takes some seconds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runs < 1 {
				return fmt.Errorf("--runs must be at least 1")
			}
			if len(cases) == 0 {
				cases = assignbench.CaseNames
			}
			var results []assignbench.Result
			for _, name := range cases { // one case in memory at a time
				built, err := assignbench.Cases(name)
				if err != nil {
					return err
				}
				r, err := assignbench.Run(&built[0], assignbench.Contenders(), runs)
				if err != nil {
					return err
				}
				results = append(results, r...)
			}
			return assignbench.WriteTable(cmd.OutOrStdout(), results)
		},
	}
	cmd.Flags().StringSliceVar(&cases, "cases", nil, "cases to run, comma separated (default all)")
	cmd.Flags().IntVar(&runs, "runs", 3, "balances timed per case and assignor")
	return cmd
}
