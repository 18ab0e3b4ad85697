package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/release"
	"github.com/kcoord/kcoord/transport"
)

// UpgradeConfig is the mixed-version run behind `kcoord chaos upgrade` and
// `make upgrade-test`: a cluster of the previous release upgraded in
// place, one node at a time, to this one under the chaos workload, with
// rollbacks before the new feature level is finalized.
type UpgradeConfig struct {
	// Old is the previous release's binary, New this release's.
	Old, New string
	// Dir receives the nodes' data and logs, and the histories of a run
	// that found anomalies.
	Dir string
	// Shards is offsets.topic.num.partitions (16 by default).
	Shards int
	// Baseline is the fault-free phase on the old release before the first
	// step (15 s by default), which also measures the rebalances the
	// workload makes by itself.
	Baseline time.Duration
	// Rest is the pause after every step (3 s by default); Settle how long
	// the workload runs on the finalized cluster at the end (10 s).
	Rest, Settle time.Duration
	// Bound is the most the upgrade steps may take (6 minutes by
	// default): a run that has not finished them by then fails.
	Bound time.Duration
	// RefuseBound is how long the previous release may take to refuse a
	// finalized data dir and exit (20 s by default).
	RefuseBound time.Duration
	// ReadyBound is how long a relaunched node may take to be ready (90 s
	// by default); LivenessBound how long groups may take to be Stable
	// after the last step (RunConfig's default).
	ReadyBound, LivenessBound time.Duration
	// NewExtra are more serve arguments for the nodes on the new binary,
	// after -c kcoord.features.auto.finalize=false (the planted
	// incompatibility: --unsafe-ignore-feature-levels).
	NewExtra []string
	// KeepHistory saves the history and report even when the run is
	// clean.
	KeepHistory bool
	// Workload shapes the load (DefaultWorkloadConfig with no churn when
	// zero); its brokers are the cluster's.
	Workload WorkloadConfig
	Logger   hclog.Logger
	Progress func(format string, args ...any)
}

// The feature every kcoord since 0.2.0 supports levels of, as the new
// binary's `kcoord cluster features --json` names it, and the level the
// run finalizes: the highest this binary (the new one) supports.
const (
	upgradeFeature = "kcoord.version"
	upgradeLevel   = int(release.MaxLevel)
)

// noAutoFinalize keeps the new nodes from finalizing the new level by
// themselves once every node supports it: the run finalizes it by hand,
// after the rollbacks.
var noAutoFinalize = []string{"-c", "kcoord.features.auto.finalize=false"}

// upgrade is one run of RunUpgrade. Its methods are called from one
// goroutine, RunUpgrade's: Run calls the steps as its Faults on it, and
// the checks follow once Run returned.
type upgrade struct {
	cfg      UpgradeConfig
	c        *Cluster
	topic    string // the metadata agreement step's topic
	progress func(format string, args ...any)

	hist       *History
	phaseStart time.Duration
	phaseEnd   time.Duration
	// anomalies are what the steps found; exits the reports of the nodes
	// that exited unexpectedly, in the order seen (exited says which).
	anomalies []string
	notes     []string
	exits     []string
	exited    map[int]bool
	done      int // steps run so far
	finalized bool
}

// upgradeStep is one step of the scenario: Name is its kind (the fault
// table groups by it), Target what it acts on.
type upgradeStep struct {
	Name, Target string
	run          func(ctx context.Context) error
}

// RunUpgrade starts three nodes of cfg.Old, runs the workload through
// the upgrade steps (each recorded in the History as a fault, so liveness
// counts from the last one), checks the history, and tears the cluster
// and its network down, even when the run fails. The steps:
//
//  1. node 1 to New, then back to Old: a rollback before finalizing;
//  2. node 1, 2, 3 to New, started with auto-finalization off;
//  3. node 3 back to Old with every other node on New, then to New;
//  4. the new level finalized by hand through `kcoord cluster features
//     --finalize` (which must find it not finalized yet), and awaited on
//     every node;
//  5. Old started on node 2's finalized data dir: it must refuse it and
//     exit non-zero without ever being ready; node 2 back on New;
//  6. a topic created through node 1 that nodes 2 and 3 must know at once
//     (metadata agreement), then Settle of load on the finalized cluster.
//
// Every node that exits when no step stopped it is an anomaly, as is any
// rebalance during the steps beyond what the baseline shows the workload
// makes by itself.
func RunUpgrade(ctx context.Context, cfg UpgradeConfig) (*Report, error) {
	if cfg.Old == "" || cfg.New == "" {
		return nil, errors.New("chaos: an upgrade run needs the old and the new binary")
	}
	if cfg.Baseline == 0 {
		cfg.Baseline = 15 * time.Second
	}
	if cfg.Rest == 0 {
		cfg.Rest = 3 * time.Second
	}
	if cfg.Settle == 0 {
		cfg.Settle = 10 * time.Second
	}
	if cfg.Bound == 0 {
		cfg.Bound = 6 * time.Minute
	}
	if cfg.RefuseBound == 0 {
		cfg.RefuseBound = 20 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Workload.Topic == "" {
		cfg.Workload = DefaultWorkloadConfig()
		cfg.Workload.Churn = 0
	}
	u := &upgrade{cfg: cfg, progress: cfg.Progress, exited: map[int]bool{}}
	if u.progress == nil {
		u.progress = func(string, ...any) {}
	}
	if entries, err := os.ReadDir(filepath.Join(cfg.Dir, "cluster")); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("chaos: %s holds an earlier run's cluster; give a new folder", cfg.Dir)
	}
	c, err := StartCluster(ctx, ClusterConfig{
		Binary: cfg.Old, Shards: cfg.Shards, Dir: filepath.Join(cfg.Dir, "cluster"),
		Logger: cfg.Logger.Named("cluster"), NoDiskFaults: true, ReadyBound: cfg.ReadyBound,
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	u.c = c
	u.progress("%d nodes of %s ready at %v", c.Nodes(), cfg.Old, c.Brokers())
	wcfg := cfg.Workload
	wcfg.Brokers = c.Brokers()
	if err := wcfg.Validate(); err != nil {
		return nil, err
	}
	u.topic = wcfg.Prefix + "-agreement"
	dir := filepath.Join(cfg.Dir, "histories")
	rep, err := Run(ctx, RunConfig{
		Workload: wcfg, Baseline: cfg.Baseline, Duration: cfg.Bound, Faults: u.runSteps,
		LivenessBound: cfg.LivenessBound, Dir: dir, KeepHistory: cfg.KeepHistory, Progress: u.progress,
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: run: %w (node logs in %s)", err, filepath.Join(cfg.Dir, "cluster"))
	}
	rep.Checks = append(rep.Checks, u.checkProcesses(), u.checkUpgrade(rep))
	if rep.Anomalies() > 0 || cfg.KeepHistory {
		if err := u.save(dir, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// steps is the scenario, in order (see RunUpgrade).
func (u *upgrade) steps() []upgradeStep {
	oldBin, newBin := u.cfg.Old, u.cfg.New
	return []upgradeStep{
		u.replace(1, newBin), u.replace(1, oldBin),
		u.replace(1, newBin), u.replace(2, newBin), u.replace(3, newBin),
		u.replace(3, oldBin), u.replace(3, newBin),
		{Name: "finalize", Target: fmt.Sprintf("level %d", upgradeLevel), run: u.finalize},
		{Name: "too-old-refused", Target: nodeName(2), run: func(ctx context.Context) error { return u.refuse(ctx, 2) }},
		{Name: "metadata-agreement", Target: "nodes 2, 3", run: u.metadataAgreement},
	}
}

// runSteps is the run's fault phase: every step, with Rest after each,
// then Settle of load on the finalized cluster. It stops at the first
// step that fails or at the first unexpected exit of a node. Called by
// Run from its goroutine.
func (u *upgrade) runSteps(ctx context.Context, hist *History) {
	u.hist, u.phaseStart = hist, hist.Now()
	defer func() { u.phaseEnd = hist.Now() }()
	for _, st := range u.steps() {
		if ctx.Err() != nil {
			u.anomalies = append(u.anomalies, "the steps did not finish within the run's bound")
			return
		}
		f := FaultRecord{Name: st.Name, Target: st.Target, Start: hist.Now()}
		u.cfg.Logger.Info("step", "step", u.done+1, "name", st.Name, "target", st.Target)
		err := st.run(ctx)
		f.Healed = hist.Now()
		hist.AddFault(f)
		u.done++
		took := (f.Healed - f.Start).Round(100 * time.Millisecond)
		if err != nil {
			u.progress("step %d, %s %s: failed after %v: %v", u.done, st.Name, st.Target, took, err)
			u.stepFailed(st, err)
			return
		}
		u.progress("step %d, %s %s: %v", u.done, st.Name, st.Target, took)
		if err := u.c.Watch(ctx, u.cfg.Rest); err != nil {
			u.stepFailed(st, err)
			return
		}
	}
	u.progress("load on the finalized cluster for %v", u.cfg.Settle)
	if err := u.c.Watch(ctx, u.cfg.Settle); err != nil {
		u.stepFailed(upgradeStep{Name: "settle"}, err)
	}
}

// stepFailed records what went wrong in or after st: an unexpected exit
// goes to the processes check (noted once per node, with its log), any
// other error to the upgrade check.
func (u *upgrade) stepFailed(st upgradeStep, err error) {
	if errors.Is(err, ErrUnexpectedExit) {
		u.noteExits()
		return
	}
	u.anomalies = append(u.anomalies, fmt.Sprintf("step %s %s: %v", st.Name, st.Target, err))
	u.noteExits()
}

// noteExits records every node that exited unexpectedly and was not
// recorded yet.
func (u *upgrade) noteExits() {
	for _, i := range u.c.Unexpected() {
		u.noteExit(i, "exited")
	}
}

// noteExit records node i's exit, unless one is recorded already: how it
// went, the release it ran, its exit status and the end of its log.
func (u *upgrade) noteExit(i int, how string) {
	if u.exited[i] {
		return
	}
	u.exited[i] = true
	u.exits = append(u.exits, fmt.Sprintf("%s %s on the %s release (%s): %s; the end of its log, %s:\n%s",
		nodeName(i), how, u.release(u.c.Binary(i)), u.c.Binary(i), u.c.ExitStatus(i), u.c.LogPath(i), indent(LogTail(u.c.LogPath(i), 20))))
}

// stop stops node i with SIGTERM. A node that exits non-zero meanwhile
// (a panic, or its shutdown timeout) crashed on its way out: that is
// recorded as an unexpected exit, and the error wraps ErrUnexpectedExit.
func (u *upgrade) stop(i int) error {
	err := u.c.Signal(i, syscall.SIGTERM)
	if err != nil && !u.c.Running(i) {
		u.noteExit(i, "crashed while it stopped on SIGTERM")
		return fmt.Errorf("%w: %w", ErrUnexpectedExit, err)
	}
	return err
}

// release names the release a binary is: "old" or "new".
func (u *upgrade) release(binary string) string {
	if binary == u.cfg.Old {
		return "old"
	}
	return "new"
}

// extra are the serve arguments of a node on binary.
func (u *upgrade) extra(binary string) []string {
	if binary == u.cfg.Old {
		return nil
	}
	return append(append([]string{}, noAutoFinalize...), u.cfg.NewExtra...)
}

// replace is the step that stops node i with SIGTERM (which must end it
// cleanly) and starts it again on its data dir with binary, waiting until
// it is ready.
func (u *upgrade) replace(i int, binary string) upgradeStep {
	name := "upgrade"
	if binary == u.cfg.Old {
		name = "rollback"
	}
	return upgradeStep{Name: name, Target: fmt.Sprintf("%s→%s", nodeName(i), u.release(binary)), run: func(ctx context.Context) error {
		start := time.Now()
		if err := u.stop(i); err != nil {
			return err
		}
		down := time.Since(start)
		if err := u.c.Relaunch(ctx, i, binary, u.extra(binary)); err != nil {
			return err
		}
		u.cfg.Logger.Info("node replaced", "node", i, "release", u.release(binary),
			"stopped_in", down.Round(time.Millisecond), "ready_in", (time.Since(start) - down).Round(time.Millisecond))
		return nil
	}}
}

// finalize checks that nothing is finalized yet (the new nodes run with
// auto-finalization off), finalizes the highest level every node supports
// through node 1 with the new binary's `cluster features --finalize`, and
// waits until every node reports it finalized.
func (u *upgrade) finalize(ctx context.Context) error {
	before, err := u.features(ctx, 1)
	if err != nil {
		return err
	}
	if got := before.Finalized[upgradeFeature]; got >= upgradeLevel {
		u.anomalies = append(u.anomalies, fmt.Sprintf("%s was already finalized at level %d before the operator finalized it, with auto-finalization off", upgradeFeature, got))
	}
	want, err := before.commonMax()
	if err != nil {
		return err
	}
	if want != upgradeLevel {
		return fmt.Errorf("the nodes support %s up to level %d in common, not %d: %s", upgradeFeature, want, upgradeLevel, before.describe())
	}
	if _, err := u.cli(ctx, "cluster", "features", "--finalize", "--json", "--http-addr", u.c.HTTPAddr(1)); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 1; i <= u.c.Nodes(); i++ {
		for {
			got, err := u.features(ctx, i)
			if err == nil && got.Finalized[upgradeFeature] == want {
				break
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = fmt.Errorf("finalized %d", got.Finalized[upgradeFeature])
				}
				return fmt.Errorf("%s not finalized at level %d on %s 30 s after --finalize: %w", upgradeFeature, want, nodeName(i), err)
			}
			if err := u.c.Watch(ctx, 250*time.Millisecond); err != nil {
				return err
			}
		}
	}
	u.finalized = true
	u.notes = append(u.notes, fmt.Sprintf("finalized %s at level %d by hand (it was %d): %s", upgradeFeature, want, before.Finalized[upgradeFeature], before.describe()))
	return nil
}

// featuresView is what `kcoord cluster features --json` prints.
type featuresView struct {
	Finalized map[string]int `json:"finalized"`
	Nodes     []struct {
		NodeID    int    `json:"node_id"`
		Release   string `json:"release"`
		Supported map[string]struct {
			Min int `json:"min"`
			Max int `json:"max"`
		} `json:"supported"`
	} `json:"nodes"`
}

// commonMax is the highest level of the feature every node supports.
func (v featuresView) commonMax() (int, error) {
	if len(v.Nodes) == 0 {
		return 0, errors.New("cluster features lists no nodes")
	}
	common := -1
	for _, n := range v.Nodes {
		m := n.Supported[upgradeFeature].Max
		if common < 0 || m < common {
			common = m
		}
	}
	return common, nil
}

func (v featuresView) describe() string {
	var parts []string
	for _, n := range v.Nodes {
		r := n.Release
		if r == "" {
			r = "unknown release"
		}
		s := n.Supported[upgradeFeature]
		parts = append(parts, fmt.Sprintf("node %d %s supports %d–%d", n.NodeID, r, s.Min, s.Max))
	}
	return strings.Join(parts, ", ")
}

// features is `kcoord cluster features --json` asked of node i.
func (u *upgrade) features(ctx context.Context, i int) (featuresView, error) {
	var v featuresView
	out, err := u.cli(ctx, "cluster", "features", "--json", "--http-addr", u.c.HTTPAddr(i))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return v, fmt.Errorf("cluster features --json: %w: %q", err, out)
	}
	return v, nil
}

// cli runs the new binary with args and returns its standard output; a
// non-zero exit is an error quoting its standard error.
func (u *upgrade) cli(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, u.cfg.New, append(args, "--timeout", "30s")...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kcoord %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// refuse stops node i and starts the old binary on its finalized data
// dir: it must exit non-zero within RefuseBound and never be ready. Then
// node i runs the new binary again.
func (u *upgrade) refuse(ctx context.Context, i int) error {
	if err := u.stop(i); err != nil {
		return err
	}
	if err := u.c.Launch(i, u.cfg.Old, u.extra(u.cfg.Old)); err != nil {
		return err
	}
	start := time.Now()
	ready := false
	for u.c.Running(i) && time.Since(start) < u.cfg.RefuseBound && ctx.Err() == nil {
		ready = ready || u.c.Ready(ctx, i)
		sleep(ctx, 200*time.Millisecond)
	}
	code, err := u.c.WaitExit(ctx, i, max(0, u.cfg.RefuseBound-time.Since(start)))
	tail := LogTail(u.c.LogPath(i), 3)
	full := LogTail(u.c.LogPath(i), 40)
	switch {
	case err != nil:
		u.anomalies = append(u.anomalies, fmt.Sprintf("the old release still ran on %s's finalized data dir %v after it started (ready: %v); its log ends:\n%s",
			nodeName(i), u.cfg.RefuseBound, ready, indent(tail)))
		if err := u.c.Signal(i, syscall.SIGKILL); err != nil {
			return err
		}
	case code == 0:
		u.anomalies = append(u.anomalies, fmt.Sprintf("the old release exited 0 on %s's finalized data dir; its log ends:\n%s", nodeName(i), indent(tail)))
	case ready:
		u.anomalies = append(u.anomalies, fmt.Sprintf("the old release was ready on %s's finalized data dir before it exited %d", nodeName(i), code))
	case strings.Contains(full, "panic:") || !refusedDataDir(tail):
		// Exiting is not enough: it must refuse the data dir at start,
		// not replay entries it cannot apply and crash.
		u.anomalies = append(u.anomalies, fmt.Sprintf("the old release exited %d on %s's finalized data dir without refusing it; its log ends:\n%s",
			code, nodeName(i), indent(LogTail(u.c.LogPath(i), 20))))
	default:
		u.notes = append(u.notes, fmt.Sprintf("the old release refused %s's finalized data dir in %v, exit status %d: %s",
			nodeName(i), time.Since(start).Round(100*time.Millisecond), code, lastLine(tail)))
		u.progress("old release on %s's data dir exited %d: %s", nodeName(i), code, lastLine(tail))
	}
	return u.c.Relaunch(ctx, i, u.cfg.New, u.extra(u.cfg.New))
}

// refusedDataDir reports whether a log's last lines say the binary
// refused the data dir at start: release 0.1.0's message for a node.json
// of a newer version, or a later release's for a finalized level it does
// not support.
func refusedDataDir(tail string) bool {
	return strings.Contains(tail, "node.json has version") || strings.Contains(tail, "feature level not supported")
}

// indent starts every line of s with four spaces, to set a log apart in
// a report.
func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// lastLine is the last line of s.
func lastLine(s string) string {
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// metadataAgreement creates a topic through node 1 and asks nodes 2 and 3
// for it right after, with one Metadata request each on a connection to
// that node alone: a node that does not know it is an anomaly (a
// metadata change one node acknowledged is served by every node).
func (u *upgrade) metadataAgreement(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(5)
	create.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = u.topic, 1, -1
	create.Topics = append(create.Topics, rt)
	resp, err := requestOne(ctx, u.c.KafkaAddr(1), create)
	if err != nil {
		return fmt.Errorf("CreateTopics %s on %s: %w", u.topic, nodeName(1), err)
	}
	if ts := resp.(*kmsg.CreateTopicsResponse).Topics; len(ts) != 1 || ts[0].ErrorCode != 0 {
		return fmt.Errorf("CreateTopics %s on %s answered %+v", u.topic, nodeName(1), ts)
	}
	for _, i := range []int{2, 3} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(u.topic)
		req.Topics = append(req.Topics, mt)
		resp, err := requestOne(ctx, u.c.KafkaAddr(i), req)
		if err != nil {
			return fmt.Errorf("Metadata %s on %s: %w", u.topic, nodeName(i), err)
		}
		ts := resp.(*kmsg.MetadataResponse).Topics
		switch {
		case len(ts) != 1:
			u.anomalies = append(u.anomalies, fmt.Sprintf("%s answered Metadata for %s with %d topics", nodeName(i), u.topic, len(ts)))
		case ts[0].ErrorCode != 0:
			u.anomalies = append(u.anomalies, fmt.Sprintf("%s did not know topic %s right after %s created it: %v",
				nodeName(i), u.topic, nodeName(1), kerr.ErrorForCode(ts[0].ErrorCode)))
		case len(ts[0].Partitions) != 1:
			u.anomalies = append(u.anomalies, fmt.Sprintf("%s gave topic %s %d partitions, not 1", nodeName(i), u.topic, len(ts[0].Partitions)))
		}
	}
	return nil
}

// requestOne sends req on a new connection to addr alone and returns the
// answer: no retry, no other broker.
func requestOne(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	conn, err := transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetClientID("kcoord-upgrade")
	return conn.Do(ctx, req)
}

// checkProcesses is the processes check: every node that exited when no
// step stopped it, or crashed while one stopped it, during the steps or
// after them, first seen first.
func (u *upgrade) checkProcesses() CheckResult {
	u.noteExits()
	res := CheckResult{Name: "processes", Checked: u.c.Nodes(), Anomalies: u.exits}
	res.Summary = fmt.Sprintf("no node exited unless a step stopped it; %d node restarts", u.restarts())
	if len(res.Anomalies) > 0 {
		res.Summary = fmt.Sprintf("%d of %d nodes exited unexpectedly", len(res.Anomalies), u.c.Nodes())
		res.Notes = append(res.Notes, "a node that exits unexpectedly ends the steps, and the checks that follow fail with it: the first exit is the finding")
	}
	return res
}

// restarts counts the node replacements the steps made.
func (u *upgrade) restarts() int {
	if u.hist == nil {
		return 0
	}
	n := 0
	for _, f := range u.hist.Snapshot().Faults {
		if f.Name == "upgrade" || f.Name == "rollback" || f.Name == "too-old-refused" {
			n++
		}
	}
	return n
}

// checkUpgrade is the upgrade check: every step done, the finalization,
// the metadata agreement, and no rebalance during the steps beyond the
// workload's own.
//
// Rebalances are the classic generations members were given (countBetween)
// and the KIP-848 member epochs members were assigned partitions in
// (epochsBetween), each group's first left out. Measured with this
// workload and no churn: every group formed within 2 s of the start
// (classic groups at generation 1, KIP-848 groups at epochs 1 and 3 as
// their members joined) and none moved again: neither the static members
// nor the KIP-848 groups move a generation by themselves. So the
// baseline's later half, once the groups formed, shows none, and any
// rebalance during the steps is the upgrade's. What that half does show
// is still allowed, scaled to the phase's length, so that a workload
// that rebalances by itself is not blamed on the upgrade.
func (u *upgrade) checkUpgrade(rep *Report) CheckResult {
	res := CheckResult{Name: "upgrade", Checked: u.done, Notes: u.notes, Anomalies: u.anomalies}
	if u.hist == nil {
		res.Summary = "the steps never ran"
		res.Anomalies = append(res.Anomalies, res.Summary)
		return res
	}
	s := u.hist.Snapshot()
	all := len(u.steps())
	if u.done < all && len(res.Anomalies) == 0 && len(u.exits) == 0 {
		res.Anomalies = append(res.Anomalies, fmt.Sprintf("%d of %d steps done", u.done, all))
	}
	half := max(0, u.phaseStart-u.cfg.Baseline/2)
	baseGens, baseEpochs := countBetween(s, half, u.phaseStart), epochsBetween(s, half, u.phaseStart)
	gens, epochs := countBetween(s, u.phaseStart, u.phaseEnd), epochsBetween(s, u.phaseStart, u.phaseEnd)
	// What the workload did by itself in the baseline's second half is
	// allowed once, not scaled to the phase's length: one spontaneous
	// rebalance there must not hide ten the upgrade caused.
	allowed := baseGens + baseEpochs
	if gens+epochs > allowed {
		res.Anomalies = append(res.Anomalies, fmt.Sprintf("%d classic generations and %d KIP-848 epochs during the upgrade (the workload made %d and %d by itself in the baseline's last %v): a rebalance caused by the upgrade",
			gens, epochs, baseGens, baseEpochs, (u.phaseStart-half).Round(time.Second)))
	}
	final := "not finalized"
	if u.finalized {
		final = fmt.Sprintf("finalized level %d", upgradeLevel)
	}
	res.Summary = fmt.Sprintf("%d of %d steps in %v, %s; %d rebalances during the upgrade (%d classic generations, %d KIP-848 epochs; baseline %d)",
		u.done, all, (u.phaseEnd - u.phaseStart).Round(time.Second), final, gens+epochs, gens, epochs, baseGens+baseEpochs)
	return res
}

// epochsBetween counts the KIP-848 member epochs members were first
// assigned partitions in between from and to, each group's lowest left
// out: countBetween for the consumer protocol.
func epochsBetween(s Snapshot, from, to time.Duration) int {
	seen := firstSeen{}
	for _, a := range s.Assigns {
		seen.note(a.Group, a.Epoch, a.At)
	}
	return countAfterFirst(seen, from, to)
}

// save writes the history and the report with the upgrade's checks into
// dir (Run wrote them only when its own checks found something).
func (u *upgrade) save(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if u.hist == nil {
		return nil
	}
	if err := u.hist.Snapshot().WriteFile(filepath.Join(dir, "history.json")); err != nil {
		return err
	}
	var b strings.Builder
	WriteUpgrade(&b, rep)
	return os.WriteFile(filepath.Join(dir, "report.txt"), []byte(b.String()), 0o644)
}

// UpgradeSummary is an upgrade report's last line: `upgrade: N ops, S
// steps, A anomalies`.
func UpgradeSummary(r *Report) string {
	return fmt.Sprintf("upgrade: %d ops, %d steps, %d anomalies", r.Ops, len(r.Faults), r.Anomalies())
}

// WriteUpgrade prints r as Report.Write does (the steps in the fault
// table), with UpgradeSummary as the last line.
func WriteUpgrade(w io.Writer, r *Report) {
	var b strings.Builder
	r.Write(&b)
	body := strings.TrimSuffix(b.String(), r.Summary()+"\n")
	fmt.Fprint(w, body)
	fmt.Fprintln(w, UpgradeSummary(r))
}
