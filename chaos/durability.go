package chaos

import (
	"fmt"
	"time"
)

// CheckDurable checks that no acknowledged commit was lost: the offset
// each register holds at the end (its last final read) must be the value
// of a commit that no acknowledged commit followed before that read. Commit values are
// unique, so the final value names the commit that wrote it; if an
// acknowledged commit began after that commit had returned, the cluster
// acknowledged a write and then lost it. A register with acknowledged
// commits and no offset at the end lost them all.
func CheckDurable(s Snapshot) CheckResult {
	res := CheckResult{Name: "durable"}
	regs, by := byRegister(s.Ops)
	lost := 0
	for _, reg := range regs {
		ops := by[reg]
		var final *Op
		writes := map[int64]Op{}
		var acked []Op
		for i := range ops {
			op := ops[i]
			switch {
			case op.Kind == Fetch && op.Final && op.Outcome == OK:
				if final == nil || op.Call > final.Call {
					final = &ops[i]
				}
			case op.Kind == Commit && op.Outcome != Failed:
				writes[op.Value] = op
				if op.Outcome == OK {
					acked = append(acked, op)
					res.Checked++
				}
			}
		}
		if len(acked) == 0 {
			continue
		}
		if final == nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: no final read answered", reg))
			continue
		}
		if final.Value == -1 {
			lost += len(acked)
			res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s: %d acknowledged commits, none left at the end (the last acknowledged %d at %v)",
				reg, len(acked), acked[len(acked)-1].Value, acked[len(acked)-1].Return.Round(time.Millisecond)))
			continue
		}
		w, ok := writes[final.Value]
		if !ok {
			res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s: ends at %d, which no commit wrote", reg, final.Value))
			continue
		}
		if w.Outcome != OK {
			// An unknown commit may have landed at any time: nothing
			// can be said about what it overwrote.
			continue
		}
		// Lost: acknowledged commits that began after w returned and
		// returned before the final read began, so they are ordered
		// between w and the read in every linearization.
		var after []Op
		for _, a := range acked {
			if a.Call > w.Return && a.Return < final.Call {
				after = append(after, a)
			}
		}
		if len(after) > 0 {
			lost += len(after)
			latest := after[0]
			for _, a := range after {
				if a.Return > latest.Return {
					latest = a
				}
			}
			res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s: ends at %d (committed %v–%v), yet %d later commits were acknowledged, the last %d at %v",
				reg, final.Value, w.Call.Round(time.Millisecond), w.Return.Round(time.Millisecond), len(after), latest.Value, latest.Return.Round(time.Millisecond)))
		}
	}
	res.Summary = fmt.Sprintf("%d acknowledged commits on %d registers, %d lost", res.Checked, len(regs), lost)
	return res
}
