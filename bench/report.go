package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kcoord/kcoord/server"
)

// ReportConfig is one run of the benchmark report (Report).
type ReportConfig struct {
	// Dir holds the in-process nodes' data; it should be on the disk a
	// deployment would use (fsync costs are measured there).
	Dir string
	// Duration is how long each commit measurement is timed; Idle how long
	// the idle cluster's CPU is.
	Duration, Idle time.Duration
	// Logger receives the nodes' logs (hclog.NewNullLogger() to drop them).
	Logger hclog.Logger
	// Procs says how the process sets GOMAXPROCS, for the report's
	// header; empty prints the value at the end of the run.
	Procs string
	// Binary is the kcoord binary the three `kcoord serve` processes run
	// (`kcoord bench report` gives its own).
	Binary string
	// FailoverTrials is how many times a node of the processes is killed
	// to time failover (ProcsFailover).
	FailoverTrials int
	// FillGroups, FillPartitions and FillCommitters size the fill of the
	// processes (Fill).
	FillGroups, FillPartitions, FillCommitters int
}

// DefaultReportConfig times 10 s per commit measurement and 10 s of idle,
// three failover trials, and a fill of 100 k groups × 10 partitions
// through 64 committers.
func DefaultReportConfig(dir string) ReportConfig {
	fill := DefaultFillConfig()
	return ReportConfig{
		Dir: dir, Duration: 10 * time.Second, Idle: 10 * time.Second, Logger: hclog.NewNullLogger(),
		FailoverTrials: 3,
		FillGroups:     fill.Groups, FillPartitions: fill.Partitions, FillCommitters: fill.Committers,
	}
}

// target is one server the report measures.
type target struct {
	name    string
	brokers []string
	stop    func()
	shards  int32 // a kcoord cluster's group shards
}

// commitsRow is one server's line of the OffsetCommit table: Commits with
// 64 clients (par) and with 1 (ser).
type commitsRow struct {
	name     string
	par, ser CommitsResult
}

// inProcess is what Report measured of the servers in its own process.
type inProcess struct {
	rows []commitsRow // kfake's first
	// idle is the three in-process nodes' CPU, % of one core; shards
	// their group shard count.
	idle   float64
	shards int32
}

// Report measures, in one run on this machine, kcoord beside franz-go's
// in-memory kfake and writes the figures as the markdown of
// docs/benchmarks.md:
//   - the disk's fdatasync p50 in Dir (what one durable write costs);
//   - OffsetCommit throughput and latency (Commits) with 64 clients and
//     with 1, against kfake, a kcoord node and a three-node kcoord cluster
//     (the default shard count, replication factor 3, production Raft timings) in this
//     process, and three `kcoord serve` processes of cfg.Binary with
//     serve's defaults;
//   - the three idle in-process nodes' CPU, and the three idle
//     processes', as a share of one core;
//   - failover on the processes (ProcsFailover);
//   - a fill of the processes (Fill), their resident memory after it,
//     and how long a node killed then takes to be ready again.
//
// kfake and the in-process nodes run in this process, so the nodes of
// that cluster share its cores (and its CPU count) as they would share a
// small VM; the processes run after those stopped, each node in its own,
// and this process holds only their clients.
func Report(ctx context.Context, w io.Writer, cfg ReportConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Binary == "" {
		return ErrNoBinary
	}
	fsync, err := fdatasyncP50(cfg.Dir, 200)
	if err != nil {
		return err
	}
	in, err := measureInProcess(ctx, cfg)
	if err != nil {
		return err
	}
	procs, err := measureProcs(ctx, cfg)
	if err != nil {
		return fmt.Errorf("kcoord processes: %w", err)
	}
	writeReport(w, cfg, fsync, in, procs)
	return nil
}

// measureInProcess runs Commits against kfake, one in-process kcoord node
// and three, one after the other, and the three nodes' idle CPU.
func measureInProcess(ctx context.Context, cfg ReportConfig) (inProcess, error) {
	var in inProcess
	starts := []func() (target, error){
		func() (target, error) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				return target{}, err
			}
			return target{name: "kfake, in memory", brokers: c.ListenAddrs(), stop: c.Close}, nil
		},
		func() (target, error) { return startKcoord(ctx, cfg, 1) },
		func() (target, error) { return startKcoord(ctx, cfg, 3) },
	}
	for i, start := range starts {
		t, err := start()
		if err != nil {
			return in, err
		}
		r := commitsRow{name: t.name}
		r.par, r.ser, err = measureCommits(ctx, t.brokers, cfg.Duration)
		if err == nil && i == len(starts)-1 {
			in.idle, err = idleCPU(ctx, cfg.Idle)
			in.shards = t.shards
		}
		t.stop()
		if err != nil {
			return in, fmt.Errorf("%s: %w", t.name, err)
		}
		in.rows = append(in.rows, r)
	}
	return in, nil
}

// measureCommits runs Commits against brokers with 64 clients and then
// with 1, each timed for d.
func measureCommits(ctx context.Context, brokers []string, d time.Duration) (par, ser CommitsResult, err error) {
	measure := func(clients int) (CommitsResult, error) {
		c := DefaultCommitsConfig()
		c.Brokers, c.Clients, c.Duration = brokers, clients, d
		c.Topic = fmt.Sprintf("kcoord-bench-%d", clients)
		c.Prefix = c.Topic
		return Commits(ctx, c)
	}
	if par, err = measure(64); err == nil {
		ser, err = measure(1)
	}
	return par, ser, err
}

// writeReport writes the figures as markdown: the header, the
// OffsetCommit table, the in-process idle CPU, then the processes'
// sections (writeProcsSections).
func writeReport(w io.Writer, cfg ReportConfig, fsync time.Duration, in inProcess, procs procsFigures) {
	rows := append(slices.Clone(in.rows), commitsRow{procsRowName, procs.par, procs.ser})
	kfakeRate := in.rows[0].par.PerSecond()

	fmt.Fprintf(w, "# kcoord benchmarks\n\n")
	procsPolicy := cfg.Procs
	if procsPolicy == "" {
		procsPolicy = fmt.Sprintf("GOMAXPROCS %d", runtime.GOMAXPROCS(0))
	}
	fmt.Fprintf(w, "Generated by `make benchmarks` (`kcoord bench report`) on %s, %d CPUs (%s), %s/%s. kfake and the in-process kcoord nodes run in the report's own process, so the nodes of a cluster share its cores; then three `kcoord serve` processes of the same binary run one node each (with the same GOMAXPROCS policy), the report's process holding only their clients. The data directory's disk has an fdatasync p50 of **%v**.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), procsPolicy, runtime.GOOS, runtime.GOARCH, fsync.Round(time.Microsecond))
	fmt.Fprintf(w, "## OffsetCommit\n\n")
	fmt.Fprintf(w, "`kcoord bench commits` against each: every client commits a rising offset to its own group, one commit in flight, for %v after a warm-up.\n\n", cfg.Duration)
	fmt.Fprintf(w, "| server | 64 clients: commits/s | × kfake | p50 | p99 | 1 client: commits/s | p50 | p50 ÷ fdatasync p50 | errors |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.0f | %.2f× | %v | %v | %.0f | %v | %.1f× | %d |\n", r.name,
			r.par.PerSecond(), r.par.PerSecond()/kfakeRate, ms(r.par.P50), ms(r.par.P99), r.ser.PerSecond(), ms(r.ser.P50),
			float64(r.ser.P50)/float64(fsync), r.par.Errors+r.ser.Errors)
	}
	fmt.Fprintf(w, "\nA kcoord commit is durable on disk before it is answered: on one node a group commit of the node's write-ahead log (one write and one fdatasync, shared with whatever the other shards wrote meanwhile); on three, the leader's and then a follower's, so two on the way. kfake keeps nothing on disk.\n")
	fmt.Fprintf(w, "\n## Idle\n\n")
	fmt.Fprintf(w, "Three kcoord nodes in one process, %d shards, replication factor 3, no client (2 s after the commit measurements ended), leadership settled: **%.1f%% of one core** together, over %v. The same three nodes as three processes: **%.1f%% of one core** together (below).\n", in.shards, in.idle, cfg.Idle, procs.idle)
	writeProcsSections(w, cfg, procs, in.idle)
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms" }

// startKcoord starts n in-process kcoord nodes on loopback with data under
// cfg.Dir, the default shard count and production Raft timings, and waits until all are
// ready and, for a cluster, leadership is spread.
func startKcoord(ctx context.Context, cfg ReportConfig, n int) (target, error) {
	var servers []*server.Server
	stop := func() {
		for _, s := range servers {
			_ = s.Kill()
		}
	}
	for i := range n {
		dir, err := os.MkdirTemp(cfg.Dir, fmt.Sprintf("kcoord-%d-of-%d-", i+1, n))
		if err != nil {
			stop()
			return target{}, err
		}
		c := server.TestClusterConfig(dir, i, n)
		// Production timings and the default shard count, as the
		// processes run.
		c.Raft, c.OffsetsTopicNumPartitions = nil, 0
		if i > 0 {
			c.Join = []string{servers[0].BoundConfig().GossipAddr}
		}
		s, err := server.New(c, cfg.Logger.Named("node"+strconv.Itoa(i+1)), nil)
		if err != nil {
			stop()
			return target{}, err
		}
		servers = append(servers, s) // a failed Start leaves what it started for Kill
		if err := s.Start(); err != nil {
			stop()
			return target{}, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var brokers []string
	for _, s := range servers {
		if err := s.WaitReady(rctx); err != nil {
			stop()
			return target{}, err
		}
		brokers = append(brokers, s.KafkaAddr().String())
	}
	if n > 1 {
		if err := WaitLeadersSpread(rctx, servers); err != nil {
			stop()
			return target{}, err
		}
	}
	name := "kcoord, 1 node"
	if n > 1 {
		name = fmt.Sprintf("kcoord, %d nodes, RF 3", n)
	}
	return target{name, brokers, stop, servers[0].ShardCount()}, nil
}

// WaitLeadersSpread waits until every server leads floor or ceil of the
// group shards over the servers, as leadership balance leaves them.
func WaitLeadersSpread(ctx context.Context, servers []*server.Server) error {
	for {
		shards := len(servers[0].Node().Shards())
		lo, hi := shards/len(servers), (shards+len(servers)-1)/len(servers)
		spread := true
		for _, s := range servers {
			led := 0
			for _, sh := range s.Node().Shards() {
				if sh.IsLeader() {
					led++
				}
			}
			spread = spread && led >= lo && led <= hi
		}
		if spread {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("leadership not spread: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// idleSettle is how long an idle measurement waits first: the commit
// clients' last connections and the transfers after the load end.
const idleSettle = 2 * time.Second

// idleCPU is this process's CPU time over d, as a percentage of one core.
func idleCPU(ctx context.Context, d time.Duration) (float64, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(idleSettle):
	}
	before, t0 := ProcessCPU(), time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	return 100 * (ProcessCPU() - before).Seconds() / time.Since(t0).Seconds(), nil
}

// ProcessCPU is the user and system CPU time this process has used (0 if
// the kernel does not say). BenchmarkIdleCPU measures with it too.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fdatasyncP50 writes a 4 KiB block and fdatasyncs it n times in dir and
// returns the median fdatasync.
func fdatasyncP50(dir string, n int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fdatasync-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	var took []time.Duration
	for i := range n {
		if _, err := f.WriteAt(block, int64(i%16)*4096); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
		took = append(took, time.Since(t0))
	}
	if len(took) == 0 {
		return 0, errors.New("bench: no fdatasync measured")
	}
	slices.Sort(took)
	return took[len(took)/2], nil
}
