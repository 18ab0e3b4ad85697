package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/kcoord/kcoord/bench"
)

// newBenchLoadCmd returns "kcoord bench load": how a cluster of three
// processes holds a large state (issue 36). It runs on the command's
// goroutine; progress goes to stderr, each size's markdown section to
// stdout once that size completed.
func newBenchLoadCmd() *cobra.Command {
	var (
		dir   string
		sizes []int
	)
	cfg := bench.DefaultLoadConfig()
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Fill three kcoord processes with many groups and measure memory, restart and failover",
		Long: `For each --groups size, starts three "kcoord serve" processes of this binary on
127.0.0.1 with serve's defaults (data under --dir) and measures, in order: the
failover of the empty cluster (--failover-trials kills of the node leading
the most shards, each shard it led timed until a commit to it succeeds); each
node's resident memory; a fill of that many groups of --partitions partitions
through --committers clients, in --segments timed parts, so the rate can be
read as the state grows; each node's resident memory and data directory
after it, and the bytes an offset added; the failover of the full cluster;
how long the node leading the most shards takes to be ready again after
a SIGKILL; and, with --add-node (on by default), a fourth node added while 8 clients keep
committing to the filled groups: the time until it holds its share of
replicas and until placement settles, and the commits' p99 while replicas
move against their p99 in the --move-baseline before. Prints a markdown section "## Scale: N groups × P partitions" per
size (make benchmarks appends them to docs/benchmarks.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(sizes) == 0 {
				return fmt.Errorf("%w: no --groups size", bench.ErrLoadConfig)
			}
			for _, n := range sizes {
				c := cfg
				c.Groups = n
				if err := c.Validate(); err != nil {
					return err
				}
			}
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("the kcoord binary to start as processes: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			logger := hclog.New(&hclog.LoggerOptions{Name: "bench-load", Output: cmd.ErrOrStderr(), Level: hclog.Info})
			for i, n := range sizes {
				d, err := os.MkdirTemp(dir, "kcoord-bench-load-")
				if err != nil {
					return fmt.Errorf("%d groups: %w", n, err)
				}
				c := cfg
				c.Binary, c.Dir, c.Groups, c.Logger = bin, d, n, logger
				r, err := bench.Load(ctx, c)
				os.RemoveAll(d)
				if err != nil {
					return fmt.Errorf("%d groups: %w", n, err)
				}
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				if err := bench.WriteLoad(cmd.OutOrStdout(), r); err != nil {
					return fmt.Errorf("%d groups: %w", n, err)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "where the nodes keep their data (default the system's temp dir; use the disk a deployment would)")
	f.IntSliceVar(&sizes, "groups", []int{cfg.Groups}, "groups to fill, one cluster per size (100000,1000000 measures both)")
	f.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions per group, all in one OffsetCommit")
	f.IntVar(&cfg.Committers, "committers", cfg.Committers, "clients of the fill, one request in flight each")
	f.IntVar(&cfg.Segments, "segments", cfg.Segments, "timed parts of the fill, of equal size")
	f.IntVar(&cfg.FailoverTrials, "failover-trials", cfg.FailoverTrials, "kills timed before and after the fill (0: none)")
	f.BoolVar(&cfg.AddNode, "add-node", cfg.AddNode, "at the end, add a fourth node under a steady commit load and time it until placement settles")
	f.StringArrayVar(&cfg.ServeArgs, "serve-arg", nil, "one more argument for every node's kcoord serve (repeatable), such as -c=leader.replication.throttled.rate=10485760")
	f.DurationVar(&cfg.MoveBaseline, "move-baseline", cfg.MoveBaseline, "how long the steady load runs before the node is added (its commit latency is the baseline)")
	return cmd
}
