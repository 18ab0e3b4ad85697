package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kcoord/kcoord/cluster"
)

// ProcsConfig is a cluster of `kcoord serve` processes on loopback
// (StartProcs).
type ProcsConfig struct {
	// Binary is the kcoord binary every node runs.
	Binary string
	// Dir holds, in a directory of its own per cluster, each node's data
	// directory and log.
	Dir string
	// Nodes is the cluster size (3 by default).
	Nodes int
	// Extra are more serve arguments for every node. Leave them empty to
	// measure what `kcoord serve` does by default.
	Extra []string
	// ReadyBound is how long a started or restarted node may take to be
	// ready (2 minutes by default).
	ReadyBound time.Duration
	// Logger gets the cluster's events; nil: none.
	Logger hclog.Logger
}

// Sentinel errors of the process launcher.
var (
	// ErrNoBinary means no kcoord binary was given to run.
	ErrNoBinary = errors.New("bench: no kcoord binary to run")
	// ErrProcExited marks a kcoord process that exited though nothing
	// stopped it (a refusal to start, a crash).
	ErrProcExited = errors.New("bench: a kcoord process exited")
	// ErrNotRunning means a node's process is not running.
	ErrNotRunning = errors.New("bench: the node's process is not running")
)

// Procs is a cluster of `kcoord serve` processes on 127.0.0.1, each with
// its own ports, data directory and log file, bootstrapped together
// (--bootstrap-expect with every node, --join the others' gossip
// addresses) and otherwise with serve's defaults: production Raft timings
// and serve's offsets.topic.num.partitions. Nodes are numbered from 1, as
// their --node-id. Its methods are called from one goroutine, except
// Brokers, KafkaAddr, HTTPAddr and Status, which only read and may run
// on others, though not while AddNode adds a node.
type Procs struct {
	cfg ProcsConfig
	dir string
	// nodes are the processes: the first cfg.Nodes started together
	// (--bootstrap-expect), those AddNode adds after them joining alone.
	nodes []*proc
}

// proc is one node: its addresses, files and current process.
type proc struct {
	id                        int
	dataDir, logPath          string
	kafka, raft, gossip, http string
	cmd                       *exec.Cmd
	exited                    chan struct{} // closed once cmd has been waited for
}

// procsStartAttempts is how many times StartProcs picks new ports when a
// node could not bind one (another program took it between the check and
// the bind).
const procsStartAttempts = 3

// StartProcs starts cfg.Nodes kcoord processes and waits until every one
// is ready (/readyz answers 200). On any error every process it started is
// killed before it returns; the error names the failing node and ends with
// the last lines of its log.
func StartProcs(ctx context.Context, cfg ProcsConfig) (*Procs, error) {
	if cfg.Binary == "" {
		return nil, ErrNoBinary
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.ReadyBound == 0 {
		cfg.ReadyBound = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	var err error
	for range procsStartAttempts {
		var p *Procs
		if p, err = startProcsOnce(ctx, cfg); err == nil {
			return p, nil
		}
		if !errors.Is(err, errPortTaken) {
			return nil, err
		}
		cfg.Logger.Warn("a port was taken; starting the cluster again on others", "error", err)
	}
	return nil, err
}

// errPortTaken marks a start that failed because a node could not bind
// one of its ports.
var errPortTaken = errors.New("a port was taken")

// startProcsOnce is one StartProcs attempt on freshly picked ports and
// data directories.
func startProcsOnce(ctx context.Context, cfg ProcsConfig) (*Procs, error) {
	dir, err := os.MkdirTemp(cfg.Dir, "kcoord-procs-")
	if err != nil {
		return nil, err
	}
	p := &Procs{cfg: cfg, dir: dir}
	for range cfg.Nodes {
		if err := p.newProc(); err != nil {
			return nil, err
		}
	}
	for i := 1; i <= cfg.Nodes; i++ {
		if err := p.launch(i); err != nil {
			p.Stop()
			return nil, err
		}
	}
	for i := 1; i <= cfg.Nodes; i++ {
		if _, err := p.WaitReady(ctx, i); err != nil {
			p.Stop()
			if strings.Contains(logTail(p.node(i).logPath, 40), "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return nil, err
		}
	}
	cfg.Logger.Info("kcoord processes ready", "nodes", cfg.Nodes, "dir", dir)
	return p, nil
}

// newProc adds the next node's directory and free ports, not started.
func (p *Procs) newProc() error {
	i := len(p.nodes) + 1
	nodeDir := filepath.Join(p.dir, fmt.Sprintf("node%d", i))
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		return err
	}
	n := &proc{id: i, dataDir: filepath.Join(nodeDir, "data"), logPath: filepath.Join(nodeDir, "kcoord.log")}
	var err error
	if n.kafka, err = FreeLoopbackAddr(false); err == nil {
		if n.raft, err = FreeLoopbackAddr(false); err == nil {
			if n.gossip, err = FreeLoopbackAddr(true); err == nil {
				n.http, err = FreeLoopbackAddr(false)
			}
		}
	}
	if err != nil {
		return err
	}
	p.nodes = append(p.nodes, n)
	return nil
}

// AddNode starts one more node, as an operator adds one: `kcoord serve
// --join` the others' gossip addresses, without --bootstrap-expect, on a
// fresh data directory. It returns the node's id once it is ready; placement
// then moves its share of replicas to it. Stop stops it with the rest.
func (p *Procs) AddNode(ctx context.Context) (int, error) {
	if err := p.newProc(); err != nil {
		return 0, err
	}
	i := len(p.nodes)
	if err := p.launch(i); err != nil {
		p.nodes = p.nodes[:i-1] // never started: not a node of the cluster
		return i, err
	}
	if _, err := p.WaitReady(ctx, i); err != nil {
		return i, err
	}
	p.cfg.Logger.Info("kcoord process added", "node", i)
	return i, nil
}

func (p *Procs) node(i int) *proc { return p.nodes[i-1] }

// Nodes is the cluster size.
func (p *Procs) Nodes() int { return len(p.nodes) }

// Brokers are every node's Kafka address.
func (p *Procs) Brokers() []string {
	var out []string
	for _, n := range p.nodes {
		out = append(out, n.kafka)
	}
	return out
}

// KafkaAddr is node i's Kafka address; HTTPAddr its /readyz and admin
// API's.
func (p *Procs) KafkaAddr(i int) string { return p.node(i).kafka }

// HTTPAddr is node i's HTTP address (/readyz, the admin API).
func (p *Procs) HTTPAddr(i int) string { return p.node(i).http }

// LogPath is the file node i's processes write to, one after another.
func (p *Procs) LogPath(i int) string { return p.node(i).logPath }

// launch starts node i's process on its data directory without waiting
// for it to be ready.
func (p *Procs) launch(i int) error {
	n := p.node(i)
	if p.Running(i) {
		return fmt.Errorf("bench: node %d is already running", i)
	}
	var seeds []string
	for _, o := range p.nodes {
		if o.id != i {
			seeds = append(seeds, o.gossip)
		}
	}
	args := []string{"serve",
		"--node-id", strconv.Itoa(i),
		"--data-dir", n.dataDir,
		"--kafka-addr", n.kafka,
		"--raft-addr", n.raft,
		"--gossip-addr", n.gossip,
		"--http-addr", n.http,
		"--join", strings.Join(seeds, ","),
	}
	if i <= p.cfg.Nodes {
		args = append(args, "--bootstrap-expect", strconv.Itoa(p.cfg.Nodes))
	}
	args = append(args, p.cfg.Extra...)
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "----- start %s %s %s\n", time.Now().Format(time.RFC3339Nano), p.cfg.Binary, strings.Join(args, " "))
	cmd := exec.Command(p.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = withoutKcoordEnv(os.Environ())
	// The node dies with this process whatever happens to it, and only
	// Procs signals it: in a process group of its own, a Ctrl-C aimed at
	// `kcoord bench report` reaches the report, which kills the nodes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("bench: start node %d: %w", i, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
	p.cfg.Logger.Debug("kcoord process started", "node", i, "pid", cmd.Process.Pid)
	return nil
}

// withoutKcoordEnv is env without KCOORD_ variables, so that a
// developer's settings cannot change the nodes' flags.
func withoutKcoordEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "KCOORD_") {
			out = append(out, kv)
		}
	}
	return out
}

// Running says whether node i's process is alive.
func (p *Procs) Running(i int) bool {
	n := p.node(i)
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Pid is node i's process id, or an ErrNotRunning.
func (p *Procs) Pid(i int) (int, error) {
	if !p.Running(i) {
		return 0, fmt.Errorf("%w: node %d", ErrNotRunning, i)
	}
	return p.node(i).cmd.Process.Pid, nil
}

// exitError is an ErrProcExited for node i, with how it ended and the
// last lines of its log.
func (p *Procs) exitError(i int) error {
	n := p.node(i)
	return fmt.Errorf("%w: node %d, %v; last lines of %s:\n%s", ErrProcExited, i, n.cmd.ProcessState, n.logPath, logTail(n.logPath, 20))
}

// CheckRunning is nil while every node's process runs, and otherwise an
// ErrProcExited for the first that does not.
func (p *Procs) CheckRunning() error {
	for i := range p.nodes {
		if !p.Running(i + 1) {
			if p.node(i+1).exited == nil {
				return fmt.Errorf("%w: node %d", ErrNotRunning, i+1)
			}
			return p.exitError(i + 1)
		}
	}
	return nil
}

// WaitReady waits, up to ReadyBound, until node i's /readyz answers 200,
// and returns how long that took. It fails at once if the process exits.
func (p *Procs) WaitReady(ctx context.Context, i int) (time.Duration, error) {
	n := p.node(i)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ReadyBound)
	defer cancel()
	for {
		if p.Ready(ctx, i) {
			return time.Since(t0), nil
		}
		select {
		case <-n.exited:
			return 0, p.exitError(i)
		case <-ctx.Done():
			return 0, fmt.Errorf("bench: node %d not ready after %v: %w; last lines of %s:\n%s",
				i, time.Since(t0).Round(time.Millisecond), ctx.Err(), n.logPath, logTail(n.logPath, 20))
		case <-time.After(readyPoll):
		}
	}
}

// readyPoll is how often WaitReady asks /readyz: the restart times the
// report gives are this precise.
const readyPoll = 20 * time.Millisecond

// Ready says whether node i's /readyz answers 200 now (one request).
func (p *Procs) Ready(ctx context.Context, i int) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.node(i).http+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Kill sends node i SIGKILL and waits until its process is gone.
func (p *Procs) Kill(i int) error {
	if !p.Running(i) {
		return fmt.Errorf("%w: node %d", ErrNotRunning, i)
	}
	n := p.node(i)
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-n.exited // SIGKILL cannot be caught: the wait is short
	p.cfg.Logger.Debug("kcoord process killed", "node", i)
	return nil
}

// Restart starts node i, which must be down, again on its data directory
// and ports, and returns how long it took from the start until its
// /readyz answered 200.
func (p *Procs) Restart(ctx context.Context, i int) (time.Duration, error) {
	t0 := time.Now()
	if err := p.launch(i); err != nil {
		return 0, err
	}
	if _, err := p.WaitReady(ctx, i); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// Stop kills every running node and waits until each process is gone.
// It may be called more than once, and after a failed start.
func (p *Procs) Stop() {
	for i, n := range p.nodes {
		if p.Running(i + 1) {
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.exited
		}
	}
}

// statusTimeout bounds one status call (the node gathers every live
// node's report, each within the server's own admin timeout).
const statusTimeout = 15 * time.Second

// Status is the cluster's status (GET /v1/cluster/status) from the first
// running node that answers.
func (p *Procs) Status(ctx context.Context) (cluster.ClusterStatus, error) {
	err := fmt.Errorf("%w: no node", ErrNotRunning)
	for i := range p.nodes {
		if !p.Running(i + 1) {
			continue
		}
		var st cluster.ClusterStatus
		if st, err = p.statusFrom(ctx, i+1); err == nil {
			return st, nil
		}
	}
	return cluster.ClusterStatus{}, err
}

func (p *Procs) statusFrom(ctx context.Context, i int) (cluster.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	var st cluster.ClusterStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.node(i).http+"/v1/cluster/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return st, fmt.Errorf("bench: node %d: status: %s: %s", i, resp.Status, strings.TrimSpace(string(b)))
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("bench: node %d: status: %w", i, err)
	}
	return st, nil
}

// GroupShards is the number of group shards (offsets.topic.num.partitions)
// in a status: every shard but the metadata group's.
func GroupShards(st cluster.ClusterStatus) int {
	n := 0
	for _, sh := range st.Shards {
		if sh.Shard != cluster.MetaShard {
			n++
		}
	}
	return n
}

// leadersSpread says whether every node reported, every group shard has a
// leader and every node leads floor or ceil of the group shards over the
// nodes, as leadership balance leaves them (WaitLeadersSpread's test, on
// a status).
func leadersSpread(st cluster.ClusterStatus, nodes int) bool {
	shards := GroupShards(st)
	if shards == 0 || len(st.Nodes) != nodes {
		return false
	}
	for _, sh := range st.Shards {
		if sh.Leader < 0 {
			return false
		}
	}
	lo, hi := shards/nodes, (shards+nodes-1)/nodes
	for _, n := range st.Nodes {
		if !n.Reported || n.Leads < lo || n.Leads > hi {
			return false
		}
	}
	return true
}

// WaitLeadersSpread waits until every node is running and reported,
// every group shard has a leader and leadership is spread over the nodes
// (floor or ceil of the shards each), or ctx ends. It fails at once if a
// process exits.
func (p *Procs) WaitLeadersSpread(ctx context.Context) error {
	var last string
	for {
		if err := p.CheckRunning(); err != nil {
			return err
		}
		st, err := p.Status(ctx)
		if err == nil && leadersSpread(st, len(p.nodes)) {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = leadsString(st)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: leadership of the processes not spread (%s): %w", last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// leadsString is each node's count of led group shards: "1:20 2:13 3:17".
func leadsString(st cluster.ClusterStatus) string {
	var parts []string
	for _, n := range st.Nodes {
		parts = append(parts, fmt.Sprintf("%d:%d", n.ID, n.Leads))
	}
	return "leads " + strings.Join(parts, " ")
}

// logTail is the last lines of the file at path (from at most its last
// 64 KiB), or what went wrong reading it.
func logTail(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	const most = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > most {
		_, _ = f.Seek(st.Size()-most, io.SeekStart)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
