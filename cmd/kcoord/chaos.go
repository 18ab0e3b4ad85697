package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/kcoord/kcoord/chaos"
)

func newChaosCmd() *cobra.Command {
	var (
		cfg      = chaos.SuiteConfig{Workload: chaos.DefaultWorkloadConfig()}
		out      string
		planted  bool
		noFsync  bool
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Fault a three-node cluster of this binary under a workload and check it (needs root)",
		Long: `Start a cluster of this kcoord binary, each node in a network namespace of
its own behind a router namespace, run the verify workload against it and
cycle through every nemesis (kill -9 and restart of a leader and a follower,
SIGSTOP/SIGCONT, isolating a leader or a follower, a bridge, a one-way
partition, packet loss and delay on the Raft port, a rolling restart, a
restart of every node at once, and the disk nemeses: a leader's or a
follower's disk stalled, a slow disk, fsync EIO, a full disk and a power
loss of every node), --cycles times over, after a fault-free --baseline.
Then run verify's checks. Partitions and loss are iptables rules inside the
router namespace; nothing touches this machine's own firewall, and the
namespaces are removed at the end, even when the run fails. Each node's data
dir is a FUSE file system this process serves over a folder of --out (it
needs /dev/fuse), through which the disk nemeses act; it is unmounted at the
end.

The last line is "chaos: N ops, F faults, A anomalies"; the exit status is 1
when A > 0, and the run's histories and node logs stay in --out.
--unsafe-ack-before-commit starts the nodes with a planted bug (commits
acknowledged before Raft commits them) to show the checks catch it;
--unsafe-skip-fsync with another (log writes acknowledged without fdatasync),
which the power-loss nemesis must catch.

"kcoord chaos upgrade" runs the mixed-version test instead: a cluster of the
previous release upgraded to this binary node by node under the same
workload.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Binary = bin
			if out == "" {
				out = filepath.Join(os.TempDir(), "kcoord-chaos-"+time.Now().UTC().Format("20060102T150405"))
			}
			if cfg.Dir, err = filepath.Abs(out); err != nil {
				return err
			}
			if planted {
				cfg.Extra = append(cfg.Extra, "--unsafe-ack-before-commit")
			}
			if noFsync {
				cfg.Extra = append(cfg.Extra, "--unsafe-skip-fsync")
			}
			lvl := hclog.LevelFromString(logLevel)
			if lvl == hclog.NoLevel {
				return fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", logLevel)
			}
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "chaos", Level: lvl, Output: cmd.ErrOrStderr()})
			cfg.Workload.Logger = cfg.Logger.Named("workload")
			cfg.Progress = func(format string, args ...any) {
				fmt.Fprintf(cmd.ErrOrStderr(), "chaos: "+format+"\n", args...)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			rep, err := chaos.RunSuite(ctx, cfg)
			if err != nil {
				return err
			}
			rep.Write(cmd.OutOrStdout())
			if rep.Anomalies() > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "chaos: histories and node logs are in %s\n", cfg.Dir)
				return errAnomalies
			}
			if !cmd.Flags().Changed("out") && !cfg.KeepHistory {
				_ = os.RemoveAll(cfg.Dir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "where node data, logs and the histories of a failing run go (default: a new folder in $TMPDIR, removed after a clean run)")
	f.IntVar(&cfg.Cycles, "cycles", 2, "times through every nemesis")
	f.StringSliceVar(&cfg.Nemeses, "nemesis", nil, "nemeses to run (default all): "+fmt.Sprint(chaos.NemesisNames()))
	f.DurationVar(&cfg.Baseline, "baseline", 30*time.Second, "fault-free phase first, to count the workload's own rebalances")
	f.DurationVar(&cfg.Rest, "rest", 4*time.Second, "pause between faults")
	f.DurationVar(&cfg.Bound, "bound", 9*time.Minute, "the most the fault phase may last")
	f.IntVar(&cfg.Shards, "shards", 16, "offsets.topic.num.partitions of the cluster")
	f.IntVar(&cfg.Workload.Groups, "groups", cfg.Workload.Groups, "consumer groups")
	f.IntVar(&cfg.Workload.KIP848Groups, "kip848-groups", cfg.Workload.KIP848Groups, "consumer groups on the consumer protocol (KIP-848)")
	f.BoolVar(&planted, "unsafe-ack-before-commit", false, "plant the ack-before-commit bug in every node")
	f.BoolVar(&noFsync, "unsafe-skip-fsync", false, "plant the skipped-fsync bug in every node (the power-loss nemesis must catch it)")
	f.StringVar(&logLevel, "log-level", "info", "the suite's log level")
	f.BoolVar(&cfg.KeepHistory, "keep-history", false, "save the history and report in --out even when the run is clean")
	cmd.AddCommand(newChaosUpgradeCmd())
	return cmd
}

// newChaosUpgradeCmd is `kcoord chaos upgrade`, the mixed-version test
// behind `make upgrade-test` (chaos.RunUpgrade).
func newChaosUpgradeCmd() *cobra.Command {
	var (
		cfg      = chaos.UpgradeConfig{Workload: chaos.DefaultWorkloadConfig()}
		out      string
		plant    bool
		logLevel string
	)
	cfg.Workload.Churn = 0
	cmd := &cobra.Command{
		Use:   "upgrade --from OLD-BINARY",
		Short: "Upgrade a three-node cluster of a previous release to this binary under load, one node at a time, and check it (needs root)",
		Long: `Start three nodes of the --from binary (the previous release; make
upgrade-test builds it from the commit in release/previous-commit), each in
a network namespace of its own as "kcoord chaos" does, run the verify
workload with no member churn, and after a fault-free --baseline replace one
node at a time on its own data dir, waiting until each is ready:
node 1 to this binary and back (a rollback), every node to this binary
(started with kcoord.features.auto.finalize=false), node 3 back and forth
again, then finalize the new feature level by hand with "kcoord cluster
features --finalize". After that the previous release must refuse node 2's
data dir (exit non-zero, never ready); node 2 runs this binary again, and a
topic created through node 1 must be known at once by nodes 2 and 3. Then
verify's checks run, and two more: no node exited unless a step stopped it
(its log's end is quoted), and no rebalance happened during the upgrade
beyond what the baseline shows the workload makes by itself.

The last line is "upgrade: N ops, S steps, A anomalies"; the exit status is
1 when A > 0, and the run's histories and node logs stay in --out. --plant
starts this binary's nodes with --unsafe-ignore-feature-levels (the new
formats written before the level is finalized), which the run must catch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.New = bin
			if cfg.Old == "" {
				return fmt.Errorf("--from: the previous release's binary is required (make upgrade-test builds bin/kcoord-previous)")
			}
			if cfg.Old, err = filepath.Abs(cfg.Old); err != nil {
				return err
			}
			if _, err := os.Stat(cfg.Old); err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			if out == "" {
				out = filepath.Join(os.TempDir(), "kcoord-upgrade-"+time.Now().UTC().Format("20060102T150405"))
			}
			if cfg.Dir, err = filepath.Abs(out); err != nil {
				return err
			}
			if plant {
				cfg.NewExtra = append(cfg.NewExtra, "--unsafe-ignore-feature-levels")
			}
			lvl := hclog.LevelFromString(logLevel)
			if lvl == hclog.NoLevel {
				return fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", logLevel)
			}
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "upgrade", Level: lvl, Output: cmd.ErrOrStderr()})
			cfg.Workload.Logger = cfg.Logger.Named("workload")
			cfg.Progress = func(format string, args ...any) {
				fmt.Fprintf(cmd.ErrOrStderr(), "upgrade: "+format+"\n", args...)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			rep, err := chaos.RunUpgrade(ctx, cfg)
			if err != nil {
				return err
			}
			chaos.WriteUpgrade(cmd.OutOrStdout(), rep)
			if rep.Anomalies() > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "upgrade: histories and node logs are in %s\n", cfg.Dir)
				return errAnomalies
			}
			if !cmd.Flags().Changed("out") && !cfg.KeepHistory {
				_ = os.RemoveAll(cfg.Dir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Old, "from", "", "the previous release's kcoord binary the cluster starts on")
	f.DurationVar(&cfg.Bound, "bound", 6*time.Minute, "the most the upgrade steps may take; not done by then is an anomaly")
	f.StringVar(&out, "out", "", "where node data, logs and the histories of a failing run go (default: a new folder in $TMPDIR, removed after a clean run)")
	f.DurationVar(&cfg.Baseline, "baseline", 15*time.Second, "fault-free phase on the previous release first, to count the workload's own rebalances")
	f.DurationVar(&cfg.Rest, "rest", 3*time.Second, "pause after every step")
	f.DurationVar(&cfg.Settle, "settle", 10*time.Second, "load on the finalized cluster after the last step")
	f.IntVar(&cfg.Shards, "shards", 16, "offsets.topic.num.partitions of the cluster")
	f.BoolVar(&plant, "plant", false, "start this binary's nodes with --unsafe-ignore-feature-levels: the run must fail")
	f.StringVar(&logLevel, "log-level", "info", "the run's log level")
	f.BoolVar(&cfg.KeepHistory, "keep-history", false, "save the history and report in --out even when the run is clean")
	return cmd
}
