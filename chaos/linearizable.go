package chaos

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// registerModel is a register holding one committed offset; -1 is "no
// offset", what OffsetFetch answers before the first commit.
var registerModel = porcupine.Model{
	Init: func() any { return int64(-1) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.write {
			return true, in.value
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.write {
			return fmt.Sprintf("commit %d", in.value)
		}
		return fmt.Sprintf("fetch → %d", output.(int64))
	},
}

type regInput struct {
	write bool
	value int64
}

// byRegister groups the operations of a snapshot by register, in a
// stable order.
func byRegister(ops []Op) ([]Register, map[Register][]Op) {
	m := map[Register][]Op{}
	for _, op := range ops {
		m[op.Register] = append(m[op.Register], op)
	}
	regs := make([]Register, 0, len(m))
	for r := range m {
		regs = append(regs, r)
	}
	slices.SortFunc(regs, func(a, b Register) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return regs, m
}

// porcupineOps turns one register's operations into porcupine's: an
// acknowledged commit happens between its call and return, a failed one
// never, and only answered fetches say anything. An unknown commit may
// happen at any time after its call, or never; two facts bound it without
// changing the answer, since commit values are unique:
//   - if no fetch returned its value, it is left out: it can always be
//     placed after every other operation, where nothing observes it;
//   - if fetches did, it happened before the first of them returned, so
//     that is its return.
//
// Without them every unknown commit would stay open to the end of the
// history, and after a few faults porcupine could not split a long
// history into the independent stretches that keep its search small.
func porcupineOps(ops []Op) []porcupine.Operation {
	firstSeen := map[int64]int64{} // value → the earliest return of a fetch that saw it
	for _, op := range ops {
		if op.Kind == Fetch && op.Outcome == OK {
			if r, ok := firstSeen[op.Value]; !ok || op.Return.Nanoseconds() < r {
				firstSeen[op.Value] = op.Return.Nanoseconds()
			}
		}
	}
	var out []porcupine.Operation
	for _, op := range ops {
		call, ret := op.Call.Nanoseconds(), op.Return.Nanoseconds()
		switch {
		case op.Kind == Commit && op.Outcome == OK:
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: regInput{true, op.Value}, Call: call, Return: ret})
		case op.Kind == Commit && op.Outcome == Unknown:
			seen, ok := firstSeen[op.Value]
			if !ok {
				continue
			}
			// A fetch that saw the value before the commit was even
			// sent cannot be explained; keep the commit after its call
			// so porcupine says so.
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: regInput{true, op.Value}, Call: call, Return: max(seen, call+1)})
		case op.Kind == Fetch && op.Outcome == OK:
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: regInput{}, Output: op.Value, Call: call, Return: ret})
		}
	}
	return out
}

// CheckLinearizable checks every register's history with porcupine. A
// register porcupine could not decide within timeout is an anomaly too:
// correct histories are decided quickly, and it is the search for a
// linearization of a wrong one that runs long. When dir is set, the
// visualisation of every failing register is written there.
func CheckLinearizable(s Snapshot, timeout time.Duration, dir string) CheckResult {
	res := CheckResult{Name: "linearizable"}
	regs, by := byRegister(s.Ops)
	for i, reg := range regs {
		ops := porcupineOps(by[reg])
		res.Checked += len(ops)
		result := porcupine.CheckOperationsTimeout(registerModel, ops, timeout)
		switch result {
		case porcupine.Ok:
		case porcupine.Unknown:
			res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s: porcupine could not decide %d operations in %v", reg, len(ops), timeout))
		default:
			a := fmt.Sprintf("%s: %d operations are not linearizable (a fetch saw a value no order of the commits explains)", reg, len(ops))
			if dir != "" {
				// The verbose check again, only for a register that failed.
				_, info := porcupine.CheckOperationsVerbose(registerModel, ops, timeout)
				path := filepath.Join(dir, fmt.Sprintf("linearizability-%02d.html", i))
				if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
					a += "; see " + path
				}
			}
			res.Anomalies = append(res.Anomalies, a)
		}
	}
	res.Summary = fmt.Sprintf("%d registers, %d operations", len(regs), res.Checked)
	return res
}

func (r Register) String() string { return fmt.Sprintf("%s %s[%d]", r.Group, r.Topic, r.Partition) }
