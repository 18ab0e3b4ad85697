package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// CheckResult is what one checker found.
type CheckResult struct {
	Name      string   `json:"name"`
	Checked   int      `json:"checked"` // operations, commits or assignments looked at
	Summary   string   `json:"summary"`
	Anomalies []string `json:"anomalies,omitempty"`
	Notes     []string `json:"notes,omitempty"` // what could not be checked, and why
}

// Report is the outcome of a run: every checker's result, the counts the
// summary line gives and the fault table.
type Report struct {
	Ops        int           `json:"ops"`
	Faults     []FaultRecord `json:"faults"`
	Checks     []CheckResult `json:"checks"`
	Rebalances int           `json:"rebalances"`
	Churn      int           `json:"churn"`
	Duration   time.Duration `json:"duration"`
	// Baseline is the rebalances per minute of the fault-free phase, when
	// the run had one (-1 otherwise); Rebalances is counted over the fault
	// phase then.
	BaselinePerMinute float64 `json:"baseline_per_minute"`
	FaultPerMinute    float64 `json:"fault_per_minute"`
}

// Anomalies counts the anomalies of every checker.
func (r *Report) Anomalies() int {
	n := 0
	for _, c := range r.Checks {
		n += len(c.Anomalies)
	}
	return n
}

// Summary is the report's last line: `chaos: N ops, F faults, A anomalies`.
func (r *Report) Summary() string {
	return fmt.Sprintf("chaos: %d ops, %d faults, %d anomalies", r.Ops, len(r.Faults), r.Anomalies())
}

// Write prints a short table per checker, the faults, and the summary
// line last.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "%-13s %-8s %s\n", "CHECK", "RESULT", "DETAIL")
	for _, c := range r.Checks {
		result := "ok"
		if len(c.Anomalies) > 0 {
			result = fmt.Sprintf("%d FAIL", len(c.Anomalies))
		}
		fmt.Fprintf(w, "%-13s %-8s %s\n", c.Name, result, c.Summary)
		for _, a := range limit(c.Anomalies, 20) {
			fmt.Fprintf(w, "  anomaly: %s\n", a)
		}
		for _, n := range limit(c.Notes, 10) {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	if r.BaselinePerMinute >= 0 {
		fmt.Fprintf(w, "%-13s %-8s %d in the fault phase (%.1f/min) against %.1f/min without faults; %d member replacements by the workload\n",
			"rebalances", "-", r.Rebalances, r.FaultPerMinute, r.BaselinePerMinute, r.Churn)
	} else {
		fmt.Fprintf(w, "%-13s %-8s %d generations after the first, %d of the workload's own member replacements among their causes\n",
			"rebalances", "-", r.Rebalances, r.Churn)
	}
	if len(r.Faults) > 0 {
		fmt.Fprintf(w, "\n%-22s %-10s %9s %9s %12s\n", "FAULT", "TARGET", "AT", "HELD", "LONGEST-WAIT")
		for _, f := range r.Faults {
			rec := "-"
			if f.Recovery > 0 {
				rec = f.Recovery.Round(10 * time.Millisecond).String()
			}
			name := f.Name
			if f.Err != "" {
				name += " (failed)"
			}
			fmt.Fprintf(w, "%-22s %-10s %9s %9s %12s\n", name, f.Target, f.Start.Round(time.Second),
				(f.Healed - f.Start).Round(100*time.Millisecond), rec)
		}
	}
	if len(r.Faults) > len(r.byNemesis()) {
		fmt.Fprintf(w, "\n%-22s %6s %12s %12s\n", "NEMESIS", "FAULTS", "WAIT-MEDIAN", "WAIT-MAX")
		for _, n := range r.byNemesis() {
			fmt.Fprintf(w, "%-22s %6d %12s %12s\n", n.name, n.count, n.median.Round(10*time.Millisecond), n.max.Round(10*time.Millisecond))
		}
	}
	fmt.Fprintln(w, r.Summary())
}

type nemesisSummary struct {
	name        string
	count       int
	median, max time.Duration
}

// byNemesis sums the faults up per nemesis, in the order first seen: the
// longest wait for an acknowledged commit, median and worst.
func (r *Report) byNemesis() []nemesisSummary {
	var order []string
	waits := map[string][]time.Duration{}
	for _, f := range r.Faults {
		if _, ok := waits[f.Name]; !ok {
			order = append(order, f.Name)
		}
		waits[f.Name] = append(waits[f.Name], f.Recovery)
	}
	var out []nemesisSummary
	for _, name := range order {
		ws := waits[name]
		slices.Sort(ws)
		out = append(out, nemesisSummary{name: name, count: len(ws), median: ws[len(ws)/2], max: ws[len(ws)-1]})
	}
	return out
}

func limit(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("… and %d more", len(s)-n))
}

// String is the whole report.
func (r *Report) String() string {
	var b strings.Builder
	r.Write(&b)
	return b.String()
}
