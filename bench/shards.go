package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"
)

// ShardsConfig is one run of the shard-count study (Shards): every node
// count with every shard count, one in-process cluster each.
type ShardsConfig struct {
	// Dir holds the in-process nodes' data; it should be on the disk a
	// deployment would use (fsync costs are measured there).
	Dir string
	// Shards are the values of offsets.topic.num.partitions tried, Nodes
	// the cluster sizes; each pair is one configuration, run in the order
	// Nodes × Shards.
	Shards, Nodes []int
	// Clients commit at once (Commits) for Commits after Warmup.
	Clients         int
	Commits, Warmup time.Duration
	// Idle is how long the idle cluster's CPU is measured, after 2 s of
	// quiet.
	Idle time.Duration
	// Phase bounds each wait of a configuration: the cluster ready and its
	// leadership spread, the failover, the added node's share, the
	// drain.
	Phase time.Duration
	// Logger receives the study's progress, one line per phase (Info);
	// NodeLogger the nodes' own logs. hclog.NewNullLogger() drops either.
	Logger, NodeLogger hclog.Logger
	// Procs says how the process sets GOMAXPROCS, for the section's
	// paragraph; empty prints the value at the end of the run.
	Procs string
}

// DefaultShardsConfig is issue 35's study: 8, 16 and 50 shards on 3 and 5
// nodes, 64 clients committing for 5 s after 2 s of warm-up, 5 s of idle
// CPU, and up to 3 minutes for each wait.
func DefaultShardsConfig(dir string) ShardsConfig {
	return ShardsConfig{
		Dir:        dir,
		Shards:     []int{8, 16, 50},
		Nodes:      []int{3, 5},
		Clients:    64,
		Commits:    5 * time.Second,
		Warmup:     2 * time.Second,
		Idle:       5 * time.Second,
		Phase:      3 * time.Minute,
		Logger:     hclog.NewNullLogger(),
		NodeLogger: hclog.NewNullLogger(),
	}
}

// ErrBadShardsConfig is what Validate wraps.
var ErrBadShardsConfig = errors.New("bench: bad shards configuration")

// Validate reports a configuration Shards cannot run: no shard or node
// count, fewer than 3 nodes (a failover needs a quorum of replication
// factor 3 left), a shard count below 1, or a duration not positive.
func (c ShardsConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadShardsConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case len(c.Shards) == 0 || len(c.Nodes) == 0:
		return bad("no shard count or no node count")
	case c.Clients < 1:
		return bad("%d clients; at least 1", c.Clients)
	case c.Commits <= 0 || c.Idle <= 0 || c.Phase <= 0 || c.Warmup < 0:
		return bad("durations must be positive (the warm-up may be 0)")
	}
	for _, s := range c.Shards {
		if s < 1 {
			return bad("%d shards; at least 1", s)
		}
	}
	for _, n := range c.Nodes {
		if n < shardsRF {
			return bad("%d nodes; at least %d (replication factor %d, and a failover keeps a quorum)", n, shardsRF, shardsRF)
		}
	}
	return nil
}

// shardsRF is the replication factor of every configuration: Kafka's
// offsets.topic.replication.factor default.
const shardsRF = 3

// ShardsResult is what one configuration measured.
type ShardsResult struct {
	Nodes, Shards int
	// Ready is from the first node's start until every node is ready;
	// Spread from then until every node leads floor or ceil of
	// Shards/Nodes group shards (WaitLeadersSpread). LeadMin and LeadMax
	// are the fewest and most shards a node led then.
	Ready, Spread    time.Duration
	LeadMin, LeadMax int
	// Commits is Clients committing (Commits) to the spread cluster.
	Commits CommitsResult
	// IdleCPU is the process's CPU over Idle, as a percentage of one
	// core: every node of the configuration, nothing else running.
	IdleCPU float64
	// Failover is the kill of the node leading the most shards.
	Failover ShardsFailover
	// Add is a fresh node joining (after the killed node restarted);
	// Drain is a remove-node of one of the original nodes after it.
	Add   AddResult
	Drain DrainResult
}

// ShardsFailover is the kill of one node, without leadership transfer.
type ShardsFailover struct {
	// Node is the node killed; Shards how many group shards it led.
	Node   int32
	Shards int
	// P50 and Max are over those shards, of the time from the kill until
	// a commit to a group of the shard was acknowledged (by its new
	// leader, through a client that looked its coordinator up again).
	P50, Max time.Duration
}

// AddResult is one fresh node joining the cluster.
type AddResult struct {
	Node int32
	// Target is its share: floor(shards × RF / nodes, the new one among
	// them). Share is from its start until it votes in Target shards or
	// placement settled with it holding replicas, whichever came first;
	// Settled until placement settled (no shard moving, queued or
	// under-replicated, on the metadata leader). Replicas is how many
	// shards it voted in then.
	Target, Replicas int
	Share, Settled   time.Duration
}

// DrainResult is one remove-node.
type DrainResult struct {
	// Node is the node drained; Replicas how many shards it voted in
	// before.
	Node     int32
	Replicas int
	// Took is from the remove-node until the cluster's status reports the
	// node drained (no shard's configuration names it a voter).
	Took time.Duration
}

// Shards runs the study: for each node count, for each shard count, an
// in-process cluster (replication factor 3, production Raft timings, data
// under Dir) is started and measured in this order, each step bounded by
// Phase:
//  1. ready, then leadership spread;
//  2. Clients committing (Commits);
//  3. the idle process's CPU;
//  4. failover: the node leading the most shards is killed, and a commit
//     to each shard it led is timed until acknowledged;
//  5. the killed node restarts; a fresh node joins and is timed until
//     placement gave it its share;
//  6. one of the original nodes is removed (drained) and timed until it
//     holds no replica.
//
// Every node is killed at the end of its configuration, on error too.
// It returns the results of the configurations that completed, and the
// first error. Call it from one goroutine; it blocks for minutes.
func Shards(ctx context.Context, cfg ShardsConfig) ([]ShardsResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.NodeLogger == nil {
		cfg.NodeLogger = hclog.NewNullLogger()
	}
	var results []ShardsResult
	for _, nodes := range cfg.Nodes {
		for _, shards := range cfg.Shards {
			r, err := runShardsConfig(ctx, cfg, nodes, shards)
			if err != nil {
				return results, fmt.Errorf("%d nodes, %d shards: %w", nodes, shards, err)
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// runShardsConfig measures one configuration (Shards' steps 1–6) in a
// cluster of its own under a directory of its own, removed after.
func runShardsConfig(ctx context.Context, cfg ShardsConfig, nodes, shards int) (ShardsResult, error) {
	r := ShardsResult{Nodes: nodes, Shards: shards}
	log := cfg.Logger.With("nodes", nodes, "shards", shards)
	dir, err := os.MkdirTemp(cfg.Dir, fmt.Sprintf("kcoord-shards-%dn-%ds-", nodes, shards))
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	c := &shardsCluster{dir: dir, shards: shards, logger: cfg.NodeLogger}
	defer c.killAll()

	if err := c.startAll(ctx, nodes, cfg.Phase, &r); err != nil {
		return r, err
	}
	log.Info("cluster ready and leadership spread", "ready", r.Ready, "spread", r.Spread, "leads_min", r.LeadMin, "leads_max", r.LeadMax)

	cc := DefaultCommitsConfig()
	cc.Brokers, cc.Clients, cc.Duration, cc.Warmup = c.brokers(), cfg.Clients, cfg.Commits, cfg.Warmup
	cc.Topic, cc.Prefix = shardsTopic, shardsTopic
	if r.Commits, err = Commits(ctx, cc); err != nil {
		return r, fmt.Errorf("commits: %w", err)
	}
	log.Info("commits measured", "result", r.Commits.String())

	if r.IdleCPU, err = idleCPU(ctx, cfg.Idle); err != nil {
		return r, fmt.Errorf("idle: %w", err)
	}
	log.Info("idle CPU measured", "percent_of_one_core", r.IdleCPU)

	if r.Failover, err = c.failover(ctx, cfg.Phase); err != nil {
		return r, fmt.Errorf("failover: %w", err)
	}
	log.Info("failover measured", "killed", r.Failover.Node, "shards", r.Failover.Shards, "p50", r.Failover.P50, "max", r.Failover.Max)

	if err := c.restart(ctx, r.Failover.Node, cfg.Phase); err != nil {
		return r, fmt.Errorf("restart of node %d: %w", r.Failover.Node, err)
	}
	log.Info("killed node restarted, placement settled", "node", r.Failover.Node)

	if r.Add, err = c.addNode(ctx, cfg.Phase); err != nil {
		return r, fmt.Errorf("add: %w", err)
	}
	log.Info("node added", "node", r.Add.Node, "share", r.Add.Share, "settled", r.Add.Settled, "replicas", r.Add.Replicas, "target", r.Add.Target)

	if r.Drain, err = c.drainNode(ctx, cfg.Phase); err != nil {
		return r, fmt.Errorf("drain: %w", err)
	}
	log.Info("node drained", "node", r.Drain.Node, "replicas", r.Drain.Replicas, "took", r.Drain.Took)
	return r, nil
}

// shardsTopic is the topic the study's groups commit to.
const shardsTopic = "kcoord-shards"

// WriteShards writes the study's markdown section: a heading, one table
// row per result, and a paragraph saying what was measured.
func WriteShards(w io.Writer, cfg ShardsConfig, results []ShardsResult) error {
	fmt.Fprintf(w, "## How many Raft groups\n\n")
	fmt.Fprintf(w, "| nodes | shards | ready; spread | leads per node | commits/s | p50 | p99 | errors | idle CPU | failover p50 / max | add: share / settled | drain |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(w, "| %d | %d | %s; %s | %d–%d | %.0f | %s | %s | %d | %.1f%% | %s / %s (%d shards) | %s / %s (%d replicas, share %d) | %s (%d replicas) |\n",
			r.Nodes, r.Shards, secs(r.Ready), secs(r.Spread), r.LeadMin, r.LeadMax,
			r.Commits.PerSecond(), ms(r.Commits.P50), ms(r.Commits.P99), r.Commits.Errors, r.IdleCPU,
			secs(r.Failover.P50), secs(r.Failover.Max), r.Failover.Shards,
			secs(r.Add.Share), secs(r.Add.Settled), r.Add.Replicas, r.Add.Target,
			secs(r.Drain.Took), r.Drain.Replicas)
	}
	_, err := fmt.Fprintf(w, "\n"+shardsParagraph+"\n",
		time.Now().UTC().Format("2006-01-02"), procsOf(cfg.Procs), shardsRF, cfg.Clients, cfg.Commits, cfg.Warmup, cfg.Idle)
	return err
}

// shardsParagraph says what WriteShards' table measured; its verbs are
// the date, GOMAXPROCS, the replication factor, clients, commit duration,
// warm-up and idle window.
const shardsParagraph = "`kcoord bench shards` on %s (%s): one in-process cluster per row, every node in this process on one disk, " +
	"`offsets.topic.num.partitions` group shards (each its own Raft group), replication factor %d, production Raft timings. " +
	"In order: the nodes start (*ready*: until all are ready; *spread*: then until each leads floor or ceil of shards/nodes, the fewest and most shards led in *leads per node*); " +
	"%d clients commit for %v after %v of warm-up, each to its own group (groups land on shards by Kafka's partitionFor); " +
	"the process's CPU over %v, 2 s after the load, as a share of one core (every node together); " +
	"*failover*: the node leading the most shards is killed without handing over, and a commit to a group of each shard it led is retried (20 ms apart) until acknowledged by the new leader, p50 and max over those shards; " +
	"the killed node restarts and placement settles; *add*: a fresh node joins, *share* until it votes in floor(shards × %[3]d / nodes) shards or placement settled, *settled* until no shard is moving, queued or under-replicated; " +
	"*drain*: `remove-node` of one of the original nodes, until the cluster's status reports it drained. " +
	"Replicas move at most `kcoord.placement.max.concurrent.moves` (4) shards at a time, so add and drain grow with the replicas that move."

// procsOf is the GOMAXPROCS policy to print: procs, or the value now.
func procsOf(procs string) string {
	if procs != "" {
		return procs
	}
	return fmt.Sprintf("GOMAXPROCS %d", runtime.GOMAXPROCS(0))
}

// secs prints a duration in seconds, two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
