package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// procsRowName is the processes' line in the OffsetCommit table.
const procsRowName = "kcoord, 3 processes, RF 3"

// procsFigures is what Report measured on three `kcoord serve` processes.
type procsFigures struct {
	// shards is the cluster's offsets.topic.num.partitions, as the status
	// API reports it.
	shards   int
	par, ser CommitsResult
	// idle is the processes' CPU together, % of one core.
	idle     float64
	failover FailoverResult
	fillCfg  FillConfig
	fill     FillResult
	// rssMB is each node's VmRSS after the fill, by node id - 1.
	rssMB []float64
	// restarted is the node killed after the fill; restart how long it
	// then took from its start until /readyz answered 200.
	restarted int
	restart   time.Duration
}

const (
	// procsSpreadBound bounds the wait until leadership of the processes
	// is spread (leadership balance moves a few shards every 5 s).
	procsSpreadBound = 3 * time.Minute
	// fillSettle is how long the processes rest after the fill before
	// their memory is read: followers apply the last entries.
	fillSettle = 5 * time.Second
)

// measureProcs starts three `kcoord serve` processes of cfg.Binary with
// data under cfg.Dir and measures, in this order: Commits with 64 clients
// and 1, idle CPU, failover (cfg.FailoverTrials), the fill, each node's
// resident memory, and the restart of the node leading the most shards
// after a SIGKILL. Every process is killed before it returns.
func measureProcs(ctx context.Context, cfg ReportConfig) (procsFigures, error) {
	var f procsFigures
	p, err := StartProcs(ctx, ProcsConfig{Binary: cfg.Binary, Dir: cfg.Dir, Nodes: 3, Logger: cfg.Logger.Named("procs")})
	if err != nil {
		return f, err
	}
	defer p.Stop()
	if err := waitSpread(ctx, p); err != nil {
		return f, err
	}
	st, err := p.Status(ctx)
	if err != nil {
		return f, err
	}
	f.shards = GroupShards(st)
	if f.par, f.ser, err = measureCommits(ctx, p.Brokers(), cfg.Duration); err != nil {
		return f, err
	}
	if f.idle, err = procsIdleCPU(ctx, p, cfg.Idle); err != nil {
		return f, fmt.Errorf("idle: %w", err)
	}
	if f.failover, err = ProcsFailover(ctx, p, FailoverConfig{Trials: cfg.FailoverTrials, SpreadBound: procsSpreadBound}); err != nil {
		return f, fmt.Errorf("failover: %w", err)
	}
	if err := fillAndRestart(ctx, cfg, p, &f); err != nil {
		return f, fmt.Errorf("fill: %w", err)
	}
	return f, nil
}

// waitSpread is p.WaitLeadersSpread within procsSpreadBound.
func waitSpread(ctx context.Context, p *Procs) error {
	ctx, cancel := context.WithTimeout(ctx, procsSpreadBound)
	defer cancel()
	return p.WaitLeadersSpread(ctx)
}

// fillAndRestart fills the processes, reads every node's resident memory
// fillSettle later, then SIGKILLs the node leading the most shards,
// starts it again and times it until it is ready.
func fillAndRestart(ctx context.Context, cfg ReportConfig, p *Procs, f *procsFigures) error {
	f.fillCfg = DefaultFillConfig()
	f.fillCfg.Brokers = p.Brokers()
	f.fillCfg.Groups, f.fillCfg.Partitions, f.fillCfg.Committers = cfg.FillGroups, cfg.FillPartitions, cfg.FillCommitters
	var err error
	if f.fill, err = Fill(ctx, f.fillCfg); err != nil {
		return err
	}
	if f.fill.Groups == 0 {
		return fmt.Errorf("no group stored: %v", f.fill)
	}
	cfg.Logger.Info("filled the processes", "result", f.fill.String())
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(fillSettle):
	}
	if f.rssMB, err = residentMBs(p); err != nil {
		return err
	}
	f.restarted, f.restart, err = restartBusiest(ctx, p)
	return err
}

// restartBusiest SIGKILLs the node leading the most group shards, starts
// it again and returns it and how long it took from its start until
// /readyz answered 200.
func restartBusiest(ctx context.Context, p *Procs) (int, time.Duration, error) {
	st, err := p.Status(ctx)
	if err != nil {
		return 0, 0, err
	}
	node, _ := busiest(st)
	if node < 1 {
		return 0, 0, fmt.Errorf("bench: no node leads a group shard to restart (%s)", leadsString(st))
	}
	if err := p.Kill(node); err != nil {
		return node, 0, err
	}
	took, err := p.Restart(ctx, node)
	if err != nil {
		return node, 0, fmt.Errorf("restart: %w", err)
	}
	return node, took, nil
}

// residentMBs is every node's VmRSS, by node id - 1.
func residentMBs(p *Procs) ([]float64, error) {
	var out []float64
	for i := 1; i <= p.Nodes(); i++ {
		pid, err := p.Pid(i)
		if err != nil {
			return nil, errorsJoinRunning(err, p)
		}
		mb, err := ResidentMB(pid)
		if err != nil {
			return nil, err
		}
		out = append(out, mb)
	}
	return out, nil
}

// errorsJoinRunning adds to err why a process is not running, if one
// exited.
func errorsJoinRunning(err error, p *Procs) error {
	if e := p.CheckRunning(); e != nil {
		return fmt.Errorf("%w (%w)", err, e)
	}
	return err
}

// writeProcsSections writes the processes' sections of the report: idle
// CPU (beside inIdle, the in-process nodes') and failover, then the fill.
func writeProcsSections(w io.Writer, cfg ReportConfig, f procsFigures, inIdle float64) {
	fmt.Fprintf(w, "\n## Three processes\n\n")
	fmt.Fprintf(w, "Three `kcoord serve` processes of the same binary on 127.0.0.1, each with its own ports and data directory in `--dir`, started as a user would (`--bootstrap-expect 3`, `--join` the others, no other setting): %d shards (offsets.topic.num.partitions, serve's default, as the status API reports it), replication factor 3, production Raft timings. Their commits are the row \"%s\" above.\n\n", f.shards, procsRowName)
	fmt.Fprintf(w, "| cluster | idle CPU, %% of one core, together | failover p50 | failover max | shards timed |\n|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| %s | %.1f%% | %s | %s | %d in %s |\n", procsRowName, f.idle, seconds(f.failover.P50), seconds(f.failover.Max), len(f.failover.Shards), plural(f.failover.Trials, "trial"))
	fmt.Fprintf(w, "| kcoord, 3 nodes in one process, RF 3 | %.1f%% | | | |\n\n", inIdle)
	fmt.Fprintf(w, "Idle: no client, %v after the commit measurements ended, leadership spread; the three processes' user and system CPU time (utime + stime of `/proc/<pid>/stat`) over %v, summed: **%.1f%% of one core** together.\n\n", idleSettle, cfg.Idle, f.idle)
	fmt.Fprintf(w, "Failover: in each trial the node leading the most group shards (%s) is killed with SIGKILL; for each shard it led, the time from the kill until a commit to a group of that shard (Kafka's partitionFor) succeeds through a new client seeded with the two survivors, one try per client, %v apart. The node is then restarted, and the next trial waits until it is ready and leadership is spread again. The time covers the survivors noticing the loss, the shard's election, the new leader's gossip, and the client's FindCoordinator and commit.\n",
		victims(f.failover.Victims), failoverPause)

	fc := f.fillCfg
	fmt.Fprintf(w, "\n## Filling %s groups\n\n", countLabel(fc.Groups))
	fmt.Fprintf(w, "The same three processes: %d committers, one client each, take the next of %d group ids and commit offsets for %d partitions of one topic to it in one OffsetCommit (an admin commit: generation -1, no member), one request in flight each; %d offsets in all, stored on every node.\n\n",
		fc.Committers, fc.Groups, fc.Partitions, fc.Groups*fc.Partitions)
	fmt.Fprintf(w, "| group commits/s | offsets/s | took | errors | groups lost | resident memory per node | node %d restarted after SIGKILL: ready after |\n|---|---|---|---|---|---|---|\n", f.restarted)
	var rss []string
	for _, mb := range f.rssMB {
		rss = append(rss, strconv.FormatFloat(mb, 'f', 0, 64))
	}
	fmt.Fprintf(w, "| %.0f | %.0f | %s | %d | %d | %s MiB | %s |\n\n", f.fill.PerSecond(), f.fill.PerSecond()*float64(fc.Partitions),
		seconds(f.fill.Elapsed), f.fill.Errors, f.fill.Lost, strings.Join(rss, " / "), seconds(f.restart))
	fmt.Fprintf(w, "Resident memory is each process's VmRSS (`/proc/<pid>/status`), node 1 / 2 / 3, %v after the last commit. Then the node leading the most shards is killed with SIGKILL and started again on its data: the time from its start until its `/readyz` answers 200 (every shard it replicates has a known leader and it serves).\n", fillSettle)
}

// seconds is d in seconds, to the hundredth: "1.52 s".
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s" }

// countLabel is n as the report's titles write it: "100 k" for 100000,
// "250" for 250.
func countLabel(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return strconv.Itoa(n/1000) + " k"
	}
	return strconv.Itoa(n)
}

// victims names the nodes killed: "node 3", "nodes 3, 1 and 2 in turn".
func victims(ids []int) string {
	var s []string
	for _, i := range ids {
		s = append(s, strconv.Itoa(i))
	}
	switch len(s) {
	case 0:
		return "no node"
	case 1:
		return "node " + s[0]
	default:
		return "nodes " + strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1] + " in turn"
	}
}

// plural is "1 trial", "3 trials".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
