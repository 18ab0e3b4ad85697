package chaos

import (
	"fmt"
	"slices"
	"time"
)

// CheckOwnership checks the assignments members received:
//   - in one generation of a group, no partition is assigned to two
//     members;
//   - a partition moves to a new member only after its previous owner
//     finished revoking it (cooperative members revoke what a sync took
//     away before they rejoin; eager ones revoke everything before they
//     rejoin). A previous owner that is in
//     no later generation left or was expelled (its session expired); a
//     handoff from it is counted, not checked, since Kafka gives such a
//     member's partitions away without waiting for it.
func CheckOwnership(s Snapshot) CheckResult {
	res := CheckResult{Name: "ownership"}
	byGroup := map[string][]SyncRecord{}
	for _, r := range s.Syncs {
		byGroup[r.Group] = append(byGroup[r.Group], r)
	}
	releases := map[string][]Release{} // by member id
	for _, r := range s.Releases {
		releases[r.Member] = append(releases[r.Member], r)
	}
	handoffs, fromDeparted := 0, 0
	for _, group := range sortedKeys(byGroup) {
		recs := byGroup[group]
		slices.SortStableFunc(recs, func(a, b SyncRecord) int {
			if a.Generation != b.Generation {
				return int(a.Generation - b.Generation)
			}
			return int(a.At - b.At)
		})
		res.Checked += len(recs)
		// One owner per partition per generation.
		owner := map[int32]map[int32]string{} // generation → partition → member
		for _, r := range recs {
			gen := owner[r.Generation]
			if gen == nil {
				gen = map[int32]string{}
				owner[r.Generation] = gen
			}
			for _, p := range r.Partitions {
				if m, ok := gen[p]; ok && m != r.owner() {
					res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s generation %d: partition %d assigned to both %s and %s",
						group, r.Generation, p, m, r.owner()))
				}
				gen[p] = r.owner()
			}
		}
		// Handoffs wait for the revocation: a cooperative member revokes
		// after the sync that takes a partition away, an eager one all of
		// its partitions before it rejoins.
		gensOf := map[string][]int32{}
		for _, r := range recs {
			gensOf[r.owner()] = append(gensOf[r.owner()], r.Generation)
		}
		last := map[int32]SyncRecord{}
		for _, r := range recs {
			for _, p := range r.Partitions {
				prev, ok := last[p]
				last[p] = r
				if !ok || prev.owner() == r.owner() {
					continue
				}
				handoffs++
				stayed := slices.ContainsFunc(gensOf[prev.owner()], func(g int32) bool { return g > prev.Generation && g <= r.Generation })
				if !stayed {
					fromDeparted++
					continue
				}
				released := time.Duration(-1)
				for _, rel := range releases[prev.Member] {
					if rel.At >= prev.At && slices.Contains(rel.Partitions, p) {
						released = rel.At
						break
					}
				}
				switch {
				case released < 0:
					res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s: partition %d went from %s (generation %d) to %s (generation %d), which never revoked it",
						group, p, prev.Member, prev.Generation, r.Member, r.Generation))
				case released > r.At:
					res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s: partition %d assigned to %s at %v (generation %d), before %s revoked it at %v",
						group, p, r.Member, r.At.Round(time.Millisecond), r.Generation, prev.Member, released.Round(time.Millisecond)))
				}
			}
		}
	}
	res.Summary = fmt.Sprintf("%d assignments in %d groups; %d handoffs, %d of them from members that had left or expired",
		res.Checked, len(byGroup), handoffs, fromDeparted)
	return res
}

// CheckFencing checks that commits from a past generation were refused: a
// member commit acknowledged with generation N and sent after some member
// of its group had received the assignment of a later generation. The
// group was past N when the commit arrived, so Kafka answers
// ILLEGAL_GENERATION.
func CheckFencing(s Snapshot) CheckResult {
	res := CheckResult{Name: "fencing"}
	firstSeen := generationsSeen(s)
	for _, op := range s.Ops {
		if op.Kind != Commit || op.Outcome != OK || op.Generation < 0 {
			continue
		}
		res.Checked++
		for gen, at := range firstSeen[op.Register.Group] {
			if gen > op.Generation && at < op.Call {
				res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s: commit %d by %s with generation %d acknowledged, sent at %v after generation %d was assigned at %v",
					op.Register, op.Value, op.Member, op.Generation, op.Call.Round(time.Millisecond), gen, at.Round(time.Millisecond)))
				break
			}
		}
	}
	res.Summary = fmt.Sprintf("%d member commits acknowledged, none from a past generation", res.Checked)
	if len(res.Anomalies) > 0 {
		res.Summary = fmt.Sprintf("%d member commits acknowledged, %d from a past generation", res.Checked, len(res.Anomalies))
	}
	return res
}

// owner is who holds an assignment: a static member's instance id (a
// static member that restarts comes back under a new member id and takes
// its assignment over in the same generation, fencing the old id), or a
// dynamic member's id.
func (r SyncRecord) owner() string {
	if r.Instance != "" {
		return "instance " + r.Instance
	}
	return r.Member
}

// generationsSeen is, per group, the earliest time members saw each
// generation's assignment.
func generationsSeen(s Snapshot) map[string]map[int32]time.Duration {
	seen := map[string]map[int32]time.Duration{}
	for _, r := range s.Syncs {
		m := seen[r.Group]
		if m == nil {
			m = map[int32]time.Duration{}
			seen[r.Group] = m
		}
		if at, ok := m[r.Generation]; !ok || r.At < at {
			m[r.Generation] = r.At
		}
	}
	return seen
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
