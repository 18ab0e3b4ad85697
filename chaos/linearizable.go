package chaos

import (
	"fmt"
	"math"
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
// acknowledged commit happens between its call and return, an unknown one
// at any time after its call or never (its return is the end of time), a
// failed one never; only answered fetches say anything.
func porcupineOps(ops []Op) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range ops {
		call, ret := op.Call.Nanoseconds(), op.Return.Nanoseconds()
		switch {
		case op.Kind == Commit && op.Outcome == OK:
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: regInput{true, op.Value}, Call: call, Return: ret})
		case op.Kind == Commit && op.Outcome == Unknown:
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: regInput{true, op.Value}, Call: call, Return: math.MaxInt64})
		case op.Kind == Fetch && op.Outcome == OK:
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: regInput{}, Output: op.Value, Call: call, Return: ret})
		}
	}
	return out
}

// CheckLinearizable checks every register's history with porcupine. A
// register porcupine could not decide within timeout is reported as
// inconclusive, not as an anomaly. When dir is set, the visualisation of
// every failing register is written there.
func CheckLinearizable(s Snapshot, timeout time.Duration, dir string) CheckResult {
	res := CheckResult{Name: "linearizable"}
	regs, by := byRegister(s.Ops)
	for i, reg := range regs {
		ops := porcupineOps(by[reg])
		res.Checked += len(ops)
		result, info := porcupine.CheckOperationsVerbose(registerModel, ops, timeout)
		switch result {
		case porcupine.Ok:
		case porcupine.Unknown:
			res.Notes = append(res.Notes, fmt.Sprintf("%s: undecided after %v (%d operations)", reg, timeout, len(ops)))
		default:
			a := fmt.Sprintf("%s: %d operations are not linearizable (a fetch saw a value no order of the commits explains)", reg, len(ops))
			if dir != "" {
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
