package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
)

// SuiteConfig is a chaos run over a cluster of real processes.
type SuiteConfig struct {
	// Binary is the kcoord binary the nodes run.
	Binary string
	// Dir receives the nodes' data and logs, and the histories of a run
	// that found anomalies.
	Dir string
	// Nodes and Shards size the cluster (3 and 16 by default).
	Nodes, Shards int
	// Nemeses names the faults to cycle through (all when empty), Cycles
	// times over (2 by default), with Rest between faults (4 s).
	Nemeses []string
	Cycles  int
	Rest    time.Duration
	// Baseline is a fault-free phase first, to count the rebalances the
	// workload causes by itself (0: none).
	Baseline time.Duration
	// Bound is the most the fault phase may take (10 minutes by default).
	Bound time.Duration
	// ReadyBound is how long a restarted node may take to be ready (90 s
	// by default); LivenessBound how long groups may take to be Stable
	// after the last fault (RunConfig's default).
	ReadyBound, LivenessBound time.Duration
	// Extra are more serve arguments for every node (the planted bug:
	// --unsafe-ack-before-commit).
	Extra []string
	// KeepHistory saves the history and report even when the run is
	// clean.
	KeepHistory bool
	// Workload shapes the load; its brokers are the cluster's.
	Workload WorkloadConfig
	Logger   hclog.Logger
	Progress func(format string, args ...any)
}

// RunSuite starts the cluster, runs the workload through the nemesis
// schedule, checks the history and tears the cluster and its network
// down, even when the run fails.
func RunSuite(ctx context.Context, cfg SuiteConfig) (*Report, error) {
	if cfg.Cycles == 0 {
		cfg.Cycles = 2
	}
	if cfg.Rest == 0 {
		cfg.Rest = 4 * time.Second
	}
	if cfg.Bound == 0 {
		cfg.Bound = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if entries, err := os.ReadDir(filepath.Join(cfg.Dir, "cluster")); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("chaos: %s holds an earlier run's cluster; give a new folder", cfg.Dir)
	}
	// The data dirs go on fault file systems when a disk nemesis runs, and
	// whenever FUSE works, so every fault meets the same disks.
	needDisks := len(cfg.Nemeses) == 0 || slices.ContainsFunc(cfg.Nemeses, diskNemesis)
	noDisks := false
	if err := FaultFSSupported(); err != nil {
		if needDisks {
			return nil, fmt.Errorf("%w (choose other nemeses with --nemesis)", err)
		}
		noDisks = true
	}
	c, err := StartCluster(ctx, ClusterConfig{
		Binary: cfg.Binary, Nodes: cfg.Nodes, Shards: cfg.Shards, Dir: filepath.Join(cfg.Dir, "cluster"),
		Extra: cfg.Extra, Logger: cfg.Logger.Named("cluster"), NoDiskFaults: noDisks, ReadyBound: cfg.ReadyBound,
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	progress("%d nodes ready at %v", c.Nodes(), c.Brokers())
	wcfg := cfg.Workload
	wcfg.Brokers = c.Brokers()
	if err := wcfg.Validate(); err != nil {
		return nil, err
	}
	schedule, err := c.Schedule(cfg.Nemeses, cfg.Cycles, cfg.Rest, wcfg.Prefix+"-r0")
	if err != nil {
		return nil, err
	}
	rep, err := Run(ctx, RunConfig{
		Workload: wcfg, Baseline: cfg.Baseline, Duration: cfg.Bound, Faults: schedule, LivenessBound: cfg.LivenessBound,
		Dir: filepath.Join(cfg.Dir, "histories"), KeepHistory: cfg.KeepHistory, Progress: progress,
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: run: %w (node logs in %s)", err, filepath.Join(cfg.Dir, "cluster"))
	}
	return rep, nil
}
