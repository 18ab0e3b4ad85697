package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// LoadConfig is one scale measurement (Load, `kcoord bench load`): three
// `kcoord serve` processes filled with Groups groups of Partitions
// partitions each.
type LoadConfig struct {
	// Binary is the kcoord binary the nodes run; Dir holds their data.
	Binary, Dir string
	// Groups, Partitions and Committers are the fill's (100 000, 10 and
	// 64 by default).
	Groups, Partitions, Committers int
	// Segments splits the fill into this many parts of equal size, each
	// timed on its own, so the rate can be read as the state grows (10
	// by default; at most Groups).
	Segments int
	// FailoverTrials is how many failovers are timed on the empty cluster
	// and again on the full one (3 by default; 0 skips both).
	FailoverTrials int
	// AddNode adds a fourth node to the full cluster under a steady
	// commit load, after MoveBaseline of that load alone (on, and 10 s,
	// by default).
	AddNode      bool
	MoveBaseline time.Duration
	// ServeArgs are more `kcoord serve` arguments for every node (a Kafka
	// config such as -c leader.replication.throttled.rate=N, --pprof);
	// none measures serve's defaults.
	ServeArgs []string
	// Logger gets progress; nil: none.
	Logger hclog.Logger
}

// DefaultLoadConfig is 100 k groups × 10 partitions through 64
// committers, timed in 10 segments, with 3 failovers before and after.
func DefaultLoadConfig() LoadConfig {
	f := DefaultFillConfig()
	return LoadConfig{Groups: f.Groups, Partitions: f.Partitions, Committers: f.Committers, Segments: 10, FailoverTrials: 3,
		AddNode: true, MoveBaseline: 10 * time.Second}
}

// ErrLoadConfig means a scale measurement's sizes do not fit together.
var ErrLoadConfig = errors.New("bench: a load needs positive groups, partitions and committers, 1 to groups segments, and a positive baseline before a node is added")

// Validate checks the sizes.
func (c LoadConfig) Validate() error {
	if c.Groups < 1 || c.Partitions < 1 || c.Committers < 1 || c.Segments < 1 || c.Segments > c.Groups || c.FailoverTrials < 0 || c.AddNode && c.MoveBaseline <= 0 {
		return fmt.Errorf("%w: %d groups × %d partitions through %d committers in %d segments, %d failovers",
			ErrLoadConfig, c.Groups, c.Partitions, c.Committers, c.Segments, c.FailoverTrials)
	}
	return nil
}

// LoadResult is what Load measured.
type LoadResult struct {
	Config LoadConfig
	// Segments is each part of the fill, in order; Fill is all of them.
	Segments []FillResult
	Fill     FillResult
	// RSSBeforeMB and RSSAfterMB are each node's VmRSS (node id - 1)
	// before the fill and fillSettle after it; DataMB the size of each
	// node's data directory then.
	RSSBeforeMB, RSSAfterMB, DataMB []float64
	// Empty and Full are the failovers timed before the fill and after
	// it (zero when FailoverTrials is 0).
	Empty, Full FailoverResult
	// Restarted is the node SIGKILLed after the fill; Restart how long it
	// took from its start until /readyz answered 200.
	Restarted int
	Restart   time.Duration
	// Added is the node added last, under load (zero without AddNode).
	Added AddNodeResult
}

// Offsets is how many offsets the fill stored: its groups' partitions.
// Every node holds all of them (three nodes, replication factor 3).
func (r LoadResult) Offsets() int { return r.Fill.Groups * r.Config.Partitions }

// BytesPerOffset is node i's (from 1) resident memory the fill added,
// per stored offset.
func (r LoadResult) BytesPerOffset(i int) float64 {
	if r.Offsets() == 0 || i < 1 || i > len(r.RSSAfterMB) {
		return 0
	}
	return (r.RSSAfterMB[i-1] - r.RSSBeforeMB[i-1]) * (1 << 20) / float64(r.Offsets())
}

// Load starts three `kcoord serve` processes and measures, in order: the
// failover of the empty cluster, each node's resident memory, the fill of
// cfg.Groups groups of cfg.Partitions partitions in cfg.Segments timed
// parts, each node's resident memory and data directory fillSettle later,
// the failover of the full cluster, and the restart of the node leading
// the most shards after a SIGKILL. Every process is killed before it
// returns.
func Load(ctx context.Context, cfg LoadConfig) (LoadResult, error) {
	r := LoadResult{Config: cfg}
	if err := cfg.Validate(); err != nil {
		return r, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	p, err := StartProcs(ctx, ProcsConfig{Binary: cfg.Binary, Dir: cfg.Dir, Nodes: 3, Extra: cfg.ServeArgs, Logger: cfg.Logger.Named("procs")})
	if err != nil {
		return r, err
	}
	defer p.Stop()
	if err := waitSpread(ctx, p); err != nil {
		return r, err
	}
	if cfg.FailoverTrials > 0 {
		if r.Empty, err = ProcsFailover(ctx, p, FailoverConfig{Trials: cfg.FailoverTrials, SpreadBound: procsSpreadBound}); err != nil {
			return r, fmt.Errorf("failover of the empty cluster: %w", err)
		}
	}
	if r.RSSBeforeMB, err = residentMBs(p); err != nil {
		return r, err
	}
	if err := loadFill(ctx, cfg, p, &r); err != nil {
		return r, fmt.Errorf("fill: %w", errorsJoinRunning(err, p))
	}
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(fillSettle):
	}
	if r.RSSAfterMB, err = residentMBs(p); err != nil {
		return r, err
	}
	for i := 1; i <= p.Nodes(); i++ {
		mb, err := dirMB(p.node(i).dataDir)
		if err != nil {
			return r, err
		}
		r.DataMB = append(r.DataMB, mb)
	}
	if cfg.FailoverTrials > 0 {
		if r.Full, err = ProcsFailover(ctx, p, FailoverConfig{Trials: cfg.FailoverTrials, SpreadBound: procsSpreadBound}); err != nil {
			return r, fmt.Errorf("failover of the full cluster: %w", err)
		}
	}
	r.Restarted, r.Restart, err = restartBusiest(ctx, p)
	if err != nil {
		return r, err
	}
	if cfg.AddNode {
		if r.Added, err = loadAddNode(ctx, cfg, p); err != nil {
			return r, fmt.Errorf("add a node under load: %w", err)
		}
	}
	return r, nil
}

// loadFill runs the fill in cfg.Segments parts, the groups of part s
// named load-s-0, load-s-1, ..., and sums them into r.Fill.
func loadFill(ctx context.Context, cfg LoadConfig, p *Procs, r *LoadResult) error {
	for s := range cfg.Segments {
		fc := DefaultFillConfig()
		fc.Brokers, fc.Topic = p.Brokers(), loadTopic
		fc.Groups = segmentGroups(cfg, s)
		fc.Partitions, fc.Committers = cfg.Partitions, cfg.Committers
		fc.Prefix = loadPrefix(s)
		res, err := Fill(ctx, fc)
		if err != nil {
			return err
		}
		r.Segments = append(r.Segments, res)
		r.Fill.Groups += res.Groups
		r.Fill.Lost += res.Lost
		r.Fill.Errors += res.Errors
		r.Fill.Elapsed += res.Elapsed
		cfg.Logger.Info("filled a segment", "segment", s+1, "of", cfg.Segments, "result", res.String())
	}
	if r.Fill.Groups == 0 {
		return fmt.Errorf("no group stored: %v", r.Fill)
	}
	return nil
}

// segmentGroups is how many groups the fill's segment s holds.
func segmentGroups(cfg LoadConfig, s int) int {
	return cfg.Groups/cfg.Segments + btoi(s < cfg.Groups%cfg.Segments)
}

// loadTopic is the topic the load commits to.
const loadTopic = "kcoord-load"

// loadPrefix names the groups of the fill's segment s.
func loadPrefix(s int) string { return fmt.Sprintf("load-%d", s) }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dirMB is the size of the regular files under dir, in MiB. The node
// runs meanwhile: a file it removes during the walk is not counted.
func dirMB(dir string) (float64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a running node renamed or removed it (a snapshot)
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return float64(n) / (1 << 20), err
}

// WriteLoad writes the markdown section of one scale measurement.
func WriteLoad(w io.Writer, r LoadResult) error {
	c := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "## Scale: %s groups × %d partitions\n\n", countLabel(c.Groups), c.Partitions)
	serveArgs := ""
	for _, a := range c.ServeArgs {
		serveArgs += " --serve-arg=" + a
	}
	settings := "serve's defaults"
	if len(c.ServeArgs) > 0 {
		settings = "serve's defaults but " + strings.Join(c.ServeArgs, " ")
	}
	fmt.Fprintf(&b, "Generated by `kcoord bench load --groups %d --partitions %d --committers %d --segments %d --failover-trials %d --add-node=%v --move-baseline %v%s` on three `kcoord serve` processes (replication factor 3, %s). %d committers stored %d groups (%d offsets, every node holding all of them) in %d timed segments; %d groups were lost, %d attempts failed.\n\n",
		c.Groups, c.Partitions, c.Committers, c.Segments, c.FailoverTrials, c.AddNode, c.MoveBaseline, serveArgs, settings, c.Committers, r.Fill.Groups, r.Offsets(), len(r.Segments), r.Fill.Lost, r.Fill.Errors)
	fmt.Fprintf(&b, "| | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| fill, whole | %.0f group commits/s in %s |\n", r.Fill.PerSecond(), seconds(r.Fill.Elapsed))
	if n := len(r.Segments); n > 0 {
		first, last := r.Segments[0].PerSecond(), r.Segments[n-1].PerSecond()
		fmt.Fprintf(&b, "| fill, first and last segment | %.0f and %.0f group commits/s (last ÷ first %.2f) |\n", first, last, ratio(last, first))
	}
	for i := range r.RSSAfterMB {
		fmt.Fprintf(&b, "| node %d: resident before → after; data dir | %.0f → %.0f MiB (%.0f bytes an offset); %.0f MiB |\n",
			i+1, r.RSSBeforeMB[i], r.RSSAfterMB[i], r.BytesPerOffset(i+1), r.DataMB[i])
	}
	if c.FailoverTrials > 0 {
		fmt.Fprintf(&b, "| failover p50 / max, empty | %s / %s (%d shards in %s) |\n", seconds(r.Empty.P50), seconds(r.Empty.Max), len(r.Empty.Shards), plural(r.Empty.Trials, "trial"))
		fmt.Fprintf(&b, "| failover p50 / max, full | %s / %s (%d shards in %s; p50 full ÷ empty %.2f) |\n", seconds(r.Full.P50), seconds(r.Full.Max), len(r.Full.Shards), plural(r.Full.Trials, "trial"), ratio(r.Full.P50.Seconds(), r.Empty.P50.Seconds()))
	}
	fmt.Fprintf(&b, "| node %d SIGKILLed, ready again after | %s |\n", r.Restarted, seconds(r.Restart))
	if a := r.Added; c.AddNode {
		fmt.Fprintf(&b, "| node %d added under load: its share (%d replicas), placement settled | %s, %s (it votes in %d shards) |\n",
			a.Node, a.Target, seconds(a.Share), seconds(a.Settled), a.Replicas)
		fmt.Fprintf(&b, "| commit p99 before → while replicas move | %s → %s (%.2f×; p50 %s → %s; %d and %d commits, %d and %d errors) |\n",
			ms(a.Before.P99), ms(a.During.P99), ratio(a.During.P99.Seconds(), a.Before.P99.Seconds()), ms(a.Before.P50), ms(a.During.P50),
			a.Before.Commits, a.During.Commits, a.Before.Errors, a.During.Errors)
		fmt.Fprintf(&b, "| while replicas move: commits to shards that kept their leader, p99; those that met one of the %d leader changes | %s (%.2f× before; %d commits, %d errors); %d commits, %d errors, p50 %s, p99 %s |\n",
			a.LeaderChanges, ms(a.Steady.P99), ratio(a.Steady.P99.Seconds(), a.Before.P99.Seconds()), a.Steady.Commits, a.Steady.Errors, a.Moved.Commits, a.Moved.Errors, ms(a.Moved.P50), ms(a.Moved.P99))
	}
	b.WriteString("\n")
	rates := make([]string, 0, len(r.Segments))
	for _, s := range r.Segments {
		rates = append(rates, fmt.Sprintf("%.0f", s.PerSecond()))
	}
	fmt.Fprintf(&b, "Fill rate by segment, group commits/s: %s. Bytes an offset: the node's VmRSS after the fill (and %v of rest) less before it, over the offsets stored.",
		strings.Join(rates, ", "), fillSettle)
	if c.AddNode {
		fmt.Fprintf(&b, " Node added: `kcoord serve --join` alone, on a fresh data dir, while %d clients commit all partitions of the first segment's groups, one commit in flight each; its share is floor(shards × 3 / 4) replicas, each a snapshot sent to it, at most `kcoord.placement.max.concurrent.moves` shards at a time; p99 of the commits begun in the %v before its start, and of those begun from its start until placement settled.", probeClients, c.MoveBaseline)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// ratio is a ÷ b, 0 when b is.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
