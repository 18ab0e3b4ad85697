package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kcoord/kcoord/chaos/faultfs"
)

// Ports every node listens on, each in its own network namespace.
const (
	kafkaPort  = 9092
	raftPort   = 9093
	gossipPort = 7946
	httpPort   = 9644
)

// ClusterConfig describes a cluster of real `kcoord serve` processes.
type ClusterConfig struct {
	// Binary is the kcoord binary every node runs (until Relaunch or
	// Launch gives one node another).
	Binary string
	// Nodes is the cluster size (3 by default).
	Nodes int
	// Dir holds each node's data directory and log.
	Dir string
	// Shards is offsets.topic.num.partitions (16 by default: enough
	// shards for every node to lead several, few enough for two cores).
	Shards int
	// Extra are more serve arguments for every node.
	Extra []string
	// ReadyBound is how long a started or restarted node may take to be
	// ready (90 s by default).
	ReadyBound time.Duration
	// NoDiskFaults leaves the nodes' data dirs on the plain disk: no FUSE
	// fault file system under them (see faultfs), and the disk nemeses
	// cannot run.
	NoDiskFaults bool
	// Logger gets the cluster's events; nil: none.
	Logger hclog.Logger
}

// Cluster is a cluster of kcoord processes, each in its own network
// namespace, that the nemeses kill, pause, restart and cut off. Its
// methods are called from one goroutine (the nemesis schedule's).
type Cluster struct {
	cfg   ClusterConfig
	net   *network
	nodes []*procNode
}

// procNode is one kcoord process and its state on disk.
type procNode struct {
	id      int
	dataDir string
	// disk is the fault file system the data dir is mounted on (nil with
	// NoDiskFaults).
	disk    *faultfs.FS
	logPath string
	// binary and extra are what the node runs: the cluster's Binary and
	// no arguments of its own until Relaunch or Launch changes them.
	binary string
	extra  []string
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	// stopped says the process is gone because Signal stopped it or
	// WaitExit saw it go; an exit it does not cover is unexpected
	// (Unexpected).
	stopped bool
}

// StartCluster builds the network, starts every node and waits until all
// are ready.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Shards == 0 {
		cfg.Shards = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.ReadyBound == 0 {
		cfg.ReadyBound = 90 * time.Second
	}
	if cfg.Binary == "" || cfg.Dir == "" {
		return nil, errors.New("chaos: a cluster needs a binary and a directory")
	}
	net, err := newNetwork(ctx, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, net: net}
	for i := 1; i <= cfg.Nodes; i++ {
		dir := filepath.Join(cfg.Dir, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			c.Close()
			return nil, err
		}
		n := &procNode{id: i, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "kcoord.log"), binary: cfg.Binary}
		c.nodes = append(c.nodes, n)
		if !cfg.NoDiskFaults {
			if n.disk, err = faultfs.Mount(filepath.Join(dir, "disk"), n.dataDir); err != nil {
				c.Close()
				return nil, fmt.Errorf("chaos: node %d's data dir on a fault file system (NoDiskFaults leaves it out): %w", i, err)
			}
		}
	}
	for i := 1; i <= cfg.Nodes; i++ {
		if err := c.launch(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := 1; i <= cfg.Nodes; i++ {
		if err := c.WaitReady(ctx, i, c.cfg.ReadyBound); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Nodes is the cluster size.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// Brokers are every node's Kafka address.
func (c *Cluster) Brokers() []string {
	var out []string
	for i := range c.nodes {
		out = append(out, c.addr(i+1, kafkaPort))
	}
	return out
}

func (c *Cluster) addr(i, port int) string { return net.JoinHostPort(c.net.IP(i), strconv.Itoa(port)) }

func (c *Cluster) node(i int) *procNode { return c.nodes[i-1] }

// launch starts node i's process, without waiting for it to be ready.
func (c *Cluster) launch(i int) error {
	n := c.node(i)
	var seeds []string
	for j := 1; j <= len(c.nodes); j++ {
		if j != i {
			seeds = append(seeds, c.addr(j, gossipPort))
		}
	}
	args := []string{n.binary, "serve",
		"--node-id", strconv.Itoa(i),
		"--data-dir", n.dataDir,
		"--kafka-addr", c.addr(i, kafkaPort),
		"--raft-addr", c.addr(i, raftPort),
		"--gossip-addr", c.addr(i, gossipPort),
		"--http-addr", c.addr(i, httpPort),
		"--bootstrap-expect", strconv.Itoa(len(c.nodes)),
		"--join", strings.Join(seeds, ","),
		"--fault-injection",
		"-c", "offsets.topic.num.partitions=" + strconv.Itoa(c.cfg.Shards),
		"-c", "group.initial.rebalance.delay.ms=500",
		// KIP-848 members get the session the workload gives classic
		// ones (10 s, not Kafka's 45 s), so a fenced member frees its
		// partitions within the liveness bound, and heartbeat as often.
		"-c", "group.consumer.min.session.timeout.ms=10000",
		"-c", "group.consumer.session.timeout.ms=10000",
		"-c", "group.consumer.min.heartbeat.interval.ms=1000",
		"-c", "group.consumer.heartbeat.interval.ms=1500",
	}
	args = append(args, c.cfg.Extra...)
	args = append(args, n.extra...)
	argv := c.net.exec(i, args...)
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "----- start %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(append([]string{n.binary}, n.extra...), " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = cleanEnv()
	// The node dies with this process, whatever happens to it (`ip netns
	// exec` execs kcoord, which keeps the signal), and only the nemeses
	// signal it: in a process group of its own, a Ctrl-C or timeout(1)
	// aimed at the suite does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("chaos: start node %d: %w", i, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited, n.paused, n.stopped = cmd, exited, false, false
	c.cfg.Logger.Debug("node started", "node", i, "pid", cmd.Process.Pid, "binary", n.binary)
	return nil
}

// Running says whether node i's process is alive (paused counts).
func (c *Cluster) Running(i int) bool {
	n := c.node(i)
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

// WaitReady waits until node i's /readyz answers 200.
func (c *Cluster) WaitReady(ctx context.Context, i int, bound time.Duration) error {
	return c.waitReady(ctx, i, bound, false)
}

// waitReady is WaitReady; with watchAll it also fails as soon as any node
// exits unexpectedly (a node that cannot be ready without it would
// otherwise wait out the bound).
func (c *Cluster) waitReady(ctx context.Context, i int, bound time.Duration, watchAll bool) error {
	n := c.node(i)
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	url := "http://" + c.addr(i, httpPort) + "/readyz"
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if watchAll {
			if err := c.CheckExits(); err != nil {
				return err
			}
		}
		select {
		case <-n.exited:
			return fmt.Errorf("chaos: node %d exited before it was ready (log: %s)", i, n.logPath)
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("chaos: waiting for node %d: %w", i, parent.Err())
			}
			return fmt.Errorf("chaos: node %d not ready after %v (log: %s)", i, bound, n.logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Ready says whether node i's /readyz answers 200 now (one probe).
func (c *Cluster) Ready(ctx context.Context, i int) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr(i, httpPort)+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitAllReady waits until every node is ready.
func (c *Cluster) WaitAllReady(ctx context.Context, bound time.Duration) error {
	for i := 1; i <= len(c.nodes); i++ {
		if err := c.WaitReady(ctx, i, bound); err != nil {
			return err
		}
	}
	return nil
}

// Signal sends sig to node i and, for SIGKILL and SIGTERM, waits until
// the process is gone.
func (c *Cluster) Signal(i int, sig syscall.Signal) error {
	n := c.node(i)
	if !c.Running(i) {
		return fmt.Errorf("chaos: node %d is not running", i)
	}
	if n.paused && (sig == syscall.SIGTERM) {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return err
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		n.stopped = true
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	case syscall.SIGKILL, syscall.SIGTERM:
		select {
		case <-n.exited:
		case <-time.After(60 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
			return fmt.Errorf("chaos: node %d still running 60 s after %v", i, sig)
		}
		// A planned stop must finish cleanly: a node that ran into its
		// shutdown timeout exits 1 ("shutdown: context deadline
		// exceeded"), and clients waited on it meanwhile.
		if code := n.cmd.ProcessState.ExitCode(); sig == syscall.SIGTERM && code != 0 {
			return fmt.Errorf("chaos: node %d did not stop cleanly on SIGTERM: exit status %d (log: %s)", i, code, n.logPath)
		}
	}
	return nil
}

// Restart starts node i again on its data and waits until it is ready.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if err := c.launch(i); err != nil {
		return err
	}
	return c.WaitReady(ctx, i, c.cfg.ReadyBound)
}

// Launch starts node i, which must be down, on its data dir with binary
// and extra (serve arguments of its own, after the cluster's Extra),
// without waiting for it to be ready: for a node that is expected to
// refuse to start (WaitExit). Later restarts keep binary and extra.
func (c *Cluster) Launch(i int, binary string, extra []string) error {
	if c.Running(i) {
		return fmt.Errorf("chaos: node %d is still running", i)
	}
	n := c.node(i)
	n.binary, n.extra = binary, slices.Clone(extra)
	return c.launch(i)
}

// Relaunch is Launch, then waits until node i is ready; it fails as soon
// as node i or any other node exits unexpectedly (CheckExits), as an
// incompatible node does.
func (c *Cluster) Relaunch(ctx context.Context, i int, binary string, extra []string) error {
	if err := c.Launch(i, binary, extra); err != nil {
		return err
	}
	return c.waitReady(ctx, i, c.cfg.ReadyBound, true)
}

// Binary is the binary node i runs, or last ran.
func (c *Cluster) Binary(i int) string { return c.node(i).binary }

// HTTPAddr is node i's --http-addr (its admin API).
func (c *Cluster) HTTPAddr(i int) string { return c.addr(i, httpPort) }

// KafkaAddr is node i's Kafka address.
func (c *Cluster) KafkaAddr(i int) string { return c.addr(i, kafkaPort) }

// WaitExit waits up to bound for node i's process to exit by itself and
// returns its exit code (-1 for a signal). The exit is expected: neither
// Unexpected nor CheckExits reports it. After bound the process is left
// running, with an error.
func (c *Cluster) WaitExit(ctx context.Context, i int, bound time.Duration) (int, error) {
	n := c.node(i)
	if n.exited == nil {
		return 0, fmt.Errorf("chaos: node %d was never started", i)
	}
	if !c.Running(i) { // gone already: even with no time left
		n.stopped = true
		return n.cmd.ProcessState.ExitCode(), nil
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-n.exited:
		n.stopped = true
		return n.cmd.ProcessState.ExitCode(), nil
	case <-t.C:
		return 0, fmt.Errorf("chaos: node %d still running after %v", i, bound)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// ErrUnexpectedExit marks a node process that exited though nothing
// stopped it: a crash, a panic or a refusal to start.
var ErrUnexpectedExit = errors.New("chaos: a node exited unexpectedly")

// Unexpected lists the nodes whose process exited though neither Signal
// nor WaitExit stopped it.
func (c *Cluster) Unexpected() []int {
	var out []int
	for i, n := range c.nodes {
		if n.exited != nil && !n.stopped && !c.Running(i+1) {
			out = append(out, i+1)
		}
	}
	return out
}

// CheckExits is nil while no node exited unexpectedly, and otherwise an
// ErrUnexpectedExit naming each such node, its binary and exit status.
func (c *Cluster) CheckExits() error {
	var exits []string
	for _, i := range c.Unexpected() {
		exits = append(exits, fmt.Sprintf("node %d (%s) %s (log: %s)", i, c.Binary(i), c.ExitStatus(i), c.LogPath(i)))
	}
	if len(exits) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnexpectedExit, strings.Join(exits, "; "))
}

// ExitStatus is how node i's last process ended ("exit status 2",
// "signal: killed"), or "running".
func (c *Cluster) ExitStatus(i int) string {
	n := c.node(i)
	if n.cmd == nil || c.Running(i) {
		return "running"
	}
	return n.cmd.ProcessState.String()
}

// LogPath is the file node i's processes write their output to, one
// after another.
func (c *Cluster) LogPath(i int) string { return c.node(i).logPath }

// LogTail is the last lines of the file at path (at most its last 64
// KiB), or what went wrong reading it.
func LogTail(path string, lines int) string {
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

// Watch waits d, or until ctx ends, and fails as soon as a node exits
// unexpectedly (CheckExits), checking every 100 ms.
func (c *Cluster) Watch(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if err := c.CheckExits(); err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return ctx.Err()
		}
		sleep(ctx, min(left, 100*time.Millisecond))
	}
}

// raftFaults posts a Raft fault to node i's fault-injection endpoint.
func (c *Cluster) raftFaults(ctx context.Context, i int, body string) error {
	method, rd := http.MethodPost, strings.NewReader(body)
	if body == "" {
		method = http.MethodDelete
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.addr(i, httpPort)+"/debug/faults/raft", rd)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("chaos: node %d: %s /debug/faults/raft: %s", i, method, resp.Status)
	}
	return nil
}

// Coordinator is the node id FindCoordinator names for group, asked of
// the running nodes in turn.
func (c *Cluster) Coordinator(ctx context.Context, group string) (int, error) {
	var last error = errors.New("no node running")
	for i := 1; i <= len(c.nodes); i++ {
		if !c.Running(i) || c.node(i).paused {
			continue
		}
		addr, err := findCoordinatorID(ctx, c.addr(i, kafkaPort), group)
		if err == nil {
			return addr, nil
		}
		last = err
	}
	return 0, last
}

// Close kills every node, unmounts their fault file systems and removes
// the network, rules included.
func (c *Cluster) Close() {
	for i, n := range c.nodes {
		if n.disk != nil {
			n.disk.Heal() // a stalled node must be able to die
		}
		if c.Running(i + 1) {
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.exited
		}
	}
	for i, n := range c.nodes {
		if n.disk != nil {
			if err := n.disk.Unmount(); err != nil {
				c.cfg.Logger.Warn("unmounting a node's fault file system failed", "node", i+1, "error", err)
			}
		}
	}
	c.net.close()
}

// Disk is node i's fault file system, or an error when the cluster runs
// without them.
func (c *Cluster) Disk(i int) (*faultfs.FS, error) {
	if d := c.node(i).disk; d != nil {
		return d, nil
	}
	return nil, errors.New("chaos: the cluster runs without fault file systems (NoDiskFaults)")
}

// cleanEnv is the environment without KCOORD_ variables, so a developer's
// settings cannot change the nodes' flags.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KCOORD_") {
			env = append(env, kv)
		}
	}
	return env
}
