package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// RunConfig is one run: the workload, an optional fault-free phase to
// count the rebalances the workload causes by itself, and the phase during
// which Faults (if any) runs.
type RunConfig struct {
	Workload WorkloadConfig
	// Baseline is the length of the fault-free phase first (0: none).
	Baseline time.Duration
	// Duration is the length of the main phase.
	Duration time.Duration
	// Faults runs during the main phase, which ends when it returns (or
	// after Duration); it returns once every fault it injected has healed
	// and records each fault in the History. nil for a run against a
	// cluster someone else faults (kcoord verify): the phase lasts
	// Duration.
	Faults func(ctx context.Context, hist *History)
	// LivenessBound is how long groups may take to be Stable again after
	// the main phase.
	LivenessBound time.Duration
	// PorcupineTimeout bounds the linearizability check of one register.
	PorcupineTimeout time.Duration
	// Dir, when set, receives the history, the report and porcupine's
	// visualisations of a run that found anomalies (or of every run, with
	// KeepHistory).
	Dir         string
	KeepHistory bool
	// Progress, when set, gets a line now and then.
	Progress func(format string, args ...any)
}

// Run runs the workload through both phases, stops the load, checks
// liveness, reads every register a last time and runs every checker.
func Run(ctx context.Context, cfg RunConfig) (*Report, error) {
	if cfg.LivenessBound <= 0 {
		cfg.LivenessBound = 60 * time.Second
	}
	if cfg.PorcupineTimeout <= 0 {
		cfg.PorcupineTimeout = 30 * time.Second
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	hist := NewHistory()
	w, err := NewWorkload(cfg.Workload, hist)
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		w.Close()
		return nil, err
	}
	defer w.Close()
	progress("workload started: %d classic and %d KIP-848 consumer groups of %d members, %d register groups, %d raw clients",
		w.cfg.Groups, w.cfg.KIP848Groups, w.cfg.Members, w.cfg.RegisterGroups, w.cfg.Workers)
	if w.skippedKIP848 > 0 {
		progress("warning: %d KIP-848 groups skipped: %s", w.skippedKIP848, w.probe.Absent)
	}
	if cfg.Baseline > 0 {
		progress("fault-free phase: %v", cfg.Baseline)
		sleep(ctx, cfg.Baseline)
	}
	faultStart := hist.Now()
	phaseCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	if cfg.Faults != nil {
		progress("fault phase: at most %v", cfg.Duration)
		cfg.Faults(phaseCtx, hist)
	} else {
		<-phaseCtx.Done()
	}
	cancel()
	faultEnd := hist.Now()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	w.StopLoad()
	progress("load stopped; waiting for every group to be stable (at most %v)", cfg.LivenessBound)
	// Liveness counts from the last heal; without faults of its own (a
	// verify run), from the end of the phase.
	lastHeal := faultEnd
	if faults := hist.Snapshot().Faults; len(faults) > 0 {
		lastHeal = 0
		for _, f := range faults {
			lastHeal = max(lastHeal, f.Healed)
		}
	}
	liveness := CheckLiveness(ctx, w, cfg.LivenessBound, hist.Now()-lastHeal)
	readCtx, cancelReads := context.WithTimeout(ctx, cfg.LivenessBound)
	finalErr := w.FinalReads(readCtx)
	cancelReads()
	w.Close()

	s := hist.Snapshot()
	rep := &Report{Ops: len(s.Ops), Faults: s.Faults, Churn: s.Churn, Duration: hist.Now(), BaselinePerMinute: -1}
	measureRecovery(&s, w.RegisterGroups())
	rep.Faults = s.Faults
	for _, f := range s.Faults {
		if f.Err != "" {
			liveness.Anomalies = append(liveness.Anomalies, fmt.Sprintf("fault %s on %s did not inject or heal cleanly: %s", f.Name, f.Target, f.Err))
		}
	}
	if finalErr != nil {
		liveness.Anomalies = append(liveness.Anomalies, "registers unreadable after the faults healed: "+finalErr.Error())
	}
	var dir string
	if cfg.Dir != "" {
		dir = cfg.Dir
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	progress("checking %d operations", len(s.Ops))
	rep.Checks = []CheckResult{
		CheckLinearizable(s, cfg.PorcupineTimeout, dir),
		CheckDurable(s),
		CheckOwnership(s),
		CheckFencing(s),
		liveness,
	}
	rep.Rebalances = countBetween(s, faultStart, faultEnd)
	if cfg.Baseline > 0 {
		rep.BaselinePerMinute = float64(countBetween(s, 0, faultStart)) / faultStart.Minutes()
		rep.FaultPerMinute = float64(rep.Rebalances) / (faultEnd - faultStart).Minutes()
	} else {
		rep.Rebalances = countBetween(s, 0, faultEnd)
	}
	if dir != "" && (cfg.KeepHistory || rep.Anomalies() > 0) {
		if err := s.WriteFile(filepath.Join(dir, "history.json")); err != nil {
			return rep, err
		}
		if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(rep.String()), 0o644); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// countBetween counts the generations groups entered between from and
// to: every generation first seen in that window, but a group's very
// first one.
func countBetween(s Snapshot, from, to time.Duration) int {
	return countAfterFirst(generationsSeen(s), from, to)
}

// countAfterFirst counts, over every group's numbered rounds (classic
// generations, KIP-848 epochs) and when each was first seen, the rounds
// first seen between from and to, each group's lowest left out.
func countAfterFirst(perGroup map[string]map[int32]time.Duration, from, to time.Duration) int {
	n := 0
	for _, rounds := range perGroup {
		lowest := int32(-1)
		for r := range rounds {
			if lowest < 0 || r < lowest {
				lowest = r
			}
		}
		for r, at := range rounds {
			if r != lowest && at >= from && at < to {
				n++
			}
		}
	}
	return n
}

// measureRecovery sets each fault's Recovery: the longest time any
// register group went without an acknowledged commit, among the gaps that
// overlap the fault (from its injection to its heal). It is how long the
// fault kept writers waiting, election and client rediscovery included.
func measureRecovery(s *Snapshot, groups []string) {
	acks := map[string][]time.Duration{}
	for _, op := range s.Ops {
		if op.Kind == Commit && op.Outcome == OK {
			acks[op.Register.Group] = append(acks[op.Register.Group], op.Return)
		}
	}
	for _, g := range groups {
		slices.Sort(acks[g])
	}
	for i := range s.Faults {
		f := &s.Faults[i]
		for _, g := range groups {
			a := acks[g]
			for k := 1; k < len(a); k++ {
				if a[k] >= f.Start && a[k-1] <= f.Healed {
					f.Recovery = max(f.Recovery, a[k]-a[k-1])
				}
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
