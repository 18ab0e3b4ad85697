package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/kcoord/kcoord/chaos/faultfs"
)

// Nemesis is one kind of fault. Inject breaks something and returns what
// it hit and how to heal it; heal must work even after ctx ended.
type Nemesis struct {
	Name string
	// Hold is how long the fault lasts before it is healed.
	Hold   time.Duration
	Inject func(ctx context.Context, c *Cluster, leader int) (target string, heal func(context.Context) error, err error)
}

// Nemeses are every fault the suite injects into a process cluster (the
// disk ones through each node's fault file system, disknemesis.go). The
// "leader" is the coordinator of the workload's first register group at
// the time of the fault; a "follower" is any other node. A node's clock
// is not among them: kcoord's FSM reads no clock (leaders stamp times into
// commands), so skew can only move timeouts, which the pause covers.
func Nemeses() []Nemesis {
	return []Nemesis{
		{Name: "kill-leader", Hold: 3 * time.Second, Inject: killNode(true)},
		{Name: "kill-follower", Hold: 3 * time.Second, Inject: killNode(false)},
		{Name: "pause-leader", Hold: 3 * time.Second, Inject: pauseNode},
		{Name: "isolate-leader", Hold: 6 * time.Second, Inject: isolate(true)},
		{Name: "isolate-follower", Hold: 6 * time.Second, Inject: isolate(false)},
		{Name: "bridge", Hold: 6 * time.Second, Inject: bridge},
		{Name: "one-way-leader", Hold: 6 * time.Second, Inject: oneWay},
		{Name: "raft-loss", Hold: 8 * time.Second, Inject: raftLoss},
		{Name: "raft-delay", Hold: 8 * time.Second, Inject: raftDelay},
		{Name: "rolling-restart", Inject: rollingRestart},
		{Name: "restart-all", Hold: time.Second, Inject: restartAll},
		{Name: "disk-stall-leader", Hold: 8 * time.Second, Inject: diskStall(true)},
		{Name: "disk-stall-follower", Hold: 8 * time.Second, Inject: diskStall(false)},
		{Name: "disk-slow-leader", Hold: 8 * time.Second, Inject: diskSlow},
		{Name: "disk-eio-leader", Hold: 4 * time.Second, Inject: diskFail((*faultfs.FS).FailSyncs)},
		{Name: "disk-full-leader", Hold: 4 * time.Second, Inject: diskFail((*faultfs.FS).Full)},
		{Name: "power-loss", Hold: time.Second, Inject: powerLoss},
	}
}

// NemesisNames lists the names of Nemeses.
func NemesisNames() []string {
	var out []string
	for _, n := range Nemeses() {
		out = append(out, n.Name)
	}
	return out
}

func nodeName(i int) string { return fmt.Sprintf("node %d", i) }

func others(c *Cluster, i int) []int {
	var out []int
	for j := 1; j <= c.Nodes(); j++ {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

func pick(c *Cluster, leader int, wantLeader bool) int {
	if wantLeader {
		return leader
	}
	os := others(c, leader)
	return os[rand.IntN(len(os))]
}

func killNode(wantLeader bool) func(context.Context, *Cluster, int) (string, func(context.Context) error, error) {
	return func(ctx context.Context, c *Cluster, leader int) (string, func(context.Context) error, error) {
		i := pick(c, leader, wantLeader)
		if err := c.Signal(i, syscall.SIGKILL); err != nil {
			return nodeName(i), nil, err
		}
		return nodeName(i), func(ctx context.Context) error { return c.Restart(ctx, i) }, nil
	}
}

// pauseNode stops the leader with SIGSTOP, longer than an election takes:
// it wakes up believing it still leads.
func pauseNode(ctx context.Context, c *Cluster, leader int) (string, func(context.Context) error, error) {
	if err := c.Signal(leader, syscall.SIGSTOP); err != nil {
		return nodeName(leader), nil, err
	}
	return nodeName(leader), func(context.Context) error { return c.Signal(leader, syscall.SIGCONT) }, nil
}

// isolate cuts one node off from the others, both ways (a 1–2 split);
// clients still reach every node.
func isolate(wantLeader bool) func(context.Context, *Cluster, int) (string, func(context.Context) error, error) {
	return func(ctx context.Context, c *Cluster, leader int) (string, func(context.Context) error, error) {
		i := pick(c, leader, wantLeader)
		var errs []error
		for _, j := range others(c, i) {
			errs = append(errs, c.net.cut(ctx, i, j), c.net.cut(ctx, j, i))
		}
		return nodeName(i), c.net.heal, errors.Join(errs...)
	}
}

// bridge cuts the leader from one follower: each still reaches the third
// node, which sees both.
func bridge(ctx context.Context, c *Cluster, leader int) (string, func(context.Context) error, error) {
	other := pick(c, leader, false)
	err := errors.Join(c.net.cut(ctx, leader, other), c.net.cut(ctx, other, leader))
	return fmt.Sprintf("%d↮%d", leader, other), c.net.heal, err
}

// oneWay drops everything the leader sends to its peers, while their
// packets still reach it.
func oneWay(ctx context.Context, c *Cluster, leader int) (string, func(context.Context) error, error) {
	var errs []error
	for _, j := range others(c, leader) {
		errs = append(errs, c.net.cut(ctx, leader, j))
	}
	return nodeName(leader) + "→", c.net.heal, errors.Join(errs...)
}

// raftLoss drops a fifth of the packets between nodes on the Raft port.
func raftLoss(ctx context.Context, c *Cluster, _ int) (string, func(context.Context) error, error) {
	return "raft 20%", c.net.heal, c.net.lose(ctx, raftPort, 0.2)
}

// raftDelay delays every node's outbound Raft traffic by 150 ms, through
// the nodes' fault-injection endpoint (the kernel here has no netem).
func raftDelay(ctx context.Context, c *Cluster, _ int) (string, func(context.Context) error, error) {
	var errs []error
	for i := 1; i <= c.Nodes(); i++ {
		errs = append(errs, c.raftFaults(ctx, i, `{"dir":"outbound","delay_ms":150}`))
	}
	heal := func(ctx context.Context) error {
		var errs []error
		for i := 1; i <= c.Nodes(); i++ {
			errs = append(errs, c.raftFaults(ctx, i, ""))
		}
		return errors.Join(errs...)
	}
	return "raft 150ms", heal, errors.Join(errs...)
}

// rollingRestart stops every node in turn with SIGTERM, as an upgrade
// does, and starts it again once it is down, waiting until it is ready
// before the next. The fault is over when it returns.
func rollingRestart(ctx context.Context, c *Cluster, _ int) (string, func(context.Context) error, error) {
	for i := 1; i <= c.Nodes(); i++ {
		if err := c.Signal(i, syscall.SIGTERM); err != nil {
			return "all", nil, err
		}
		if err := c.Restart(ctx, i); err != nil {
			return "all", nil, err
		}
	}
	return "all", func(context.Context) error { return nil }, nil
}

// restartAll kills every node at once and starts them all again.
func restartAll(ctx context.Context, c *Cluster, _ int) (string, func(context.Context) error, error) {
	for i := 1; i <= c.Nodes(); i++ {
		if err := c.Signal(i, syscall.SIGKILL); err != nil {
			return "all", nil, err
		}
	}
	heal := func(ctx context.Context) error {
		for i := 1; i <= c.Nodes(); i++ {
			if err := c.launch(i); err != nil {
				return err
			}
		}
		return c.WaitAllReady(ctx, c.cfg.ReadyBound)
	}
	return "all", heal, nil
}

// Schedule runs the nemeses named in names (all when empty) one after
// another, cycles times over, with rest between faults, against c while
// the workload runs; leaderOf names the group whose coordinator counts as
// the leader. It records every fault and returns once the last one healed.
// A fault that cannot be injected or healed is recorded with its error
// and ends the schedule (the run's checks still run).
func (c *Cluster) Schedule(names []string, cycles int, rest time.Duration, leaderOf string) (func(context.Context, *History), error) {
	var chosen []Nemesis
	for _, n := range Nemeses() {
		if len(names) == 0 || slices.Contains(names, n.Name) {
			chosen = append(chosen, n)
		}
	}
	for _, name := range names {
		if !slices.Contains(NemesisNames(), name) {
			return nil, fmt.Errorf("chaos: no nemesis %q (have %v)", name, NemesisNames())
		}
	}
	return func(ctx context.Context, hist *History) {
		for cycle := range cycles {
			for _, n := range chosen {
				if ctx.Err() != nil {
					return
				}
				if err := c.WaitAllReady(ctx, c.cfg.ReadyBound); err != nil {
					hist.AddFault(FaultRecord{Name: n.Name, Start: hist.Now(), Healed: hist.Now(), Err: "cluster not ready: " + err.Error()})
					return
				}
				leader, err := c.Coordinator(ctx, leaderOf)
				if err != nil {
					leader = 1 + rand.IntN(c.Nodes())
				}
				f := FaultRecord{Name: n.Name, Start: hist.Now()}
				c.cfg.Logger.Info("fault", "cycle", cycle+1, "nemesis", n.Name, "leader", leader)
				// A fault that restarts nodes as it goes (the rolling
				// restart) finishes even if the phase ends meanwhile.
				ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
				target, heal, err := n.Inject(ictx, c, leader)
				cancel()
				f.Target = target
				if err == nil {
					sleep(ctx, n.Hold)
				}
				if heal != nil {
					// Heal even when the run is ending: nothing may stay
					// broken.
					hctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					if herr := heal(hctx); herr != nil {
						err = errors.Join(err, herr)
					}
					cancel()
				}
				f.Healed = hist.Now()
				if err != nil {
					f.Err = err.Error()
				}
				hist.AddFault(f)
				c.cfg.Logger.Info("healed", "nemesis", n.Name, "target", target, "held", (f.Healed - f.Start).Round(time.Millisecond), "error", err)
				if err != nil {
					return
				}
				sleep(ctx, rest)
			}
		}
	}, nil
}
