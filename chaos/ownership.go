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
	h, d, groups := checkConsumerProtocolOwnership(s, &res)
	handoffs, fromDeparted = handoffs+h, fromDeparted+d
	res.Summary = fmt.Sprintf("%d assignments in %d groups; %d handoffs, %d of them from members that had left or expired",
		res.Checked, len(byGroup)+groups, handoffs, fromDeparted)
	return res
}

// checkConsumerProtocolOwnership is CheckOwnership for consumer-protocol
// (KIP-848) groups, whose members are handed partitions one heartbeat at
// a time rather than a whole assignment a generation: a partition is
// handed to a member (its assignment callback) only after the member that
// had it gave it up (its revocation callback), unless that member lost it
// (fenced or expired: the coordinator gives its partitions away without
// waiting, and the client learns later, or never, as Kafka's does); one
// that never gave it up counts as departed unless it was handed
// partitions again later. It
// adds to res and returns the handoffs, those from members that had lost
// their partitions, and the groups it checked.
func checkConsumerProtocolOwnership(s Snapshot, res *CheckResult) (handoffs, fromDeparted, groups int) {
	type event struct {
		at     time.Duration
		member string
		parts  []int32
		assign bool
	}
	byGroup := map[string][]event{}
	for _, a := range s.Assigns {
		byGroup[a.Group] = append(byGroup[a.Group], event{a.At, a.Member, a.Partitions, true})
	}
	released := map[[2]string][]Release{} // by group and member
	assignedAt := map[[2]string][]time.Duration{}
	for _, a := range s.Assigns {
		key := [2]string{a.Group, a.Member}
		assignedAt[key] = append(assignedAt[key], a.At)
	}
	for _, r := range s.Releases {
		if _, ok := byGroup[r.Group]; ok {
			byGroup[r.Group] = append(byGroup[r.Group], event{r.At, r.Member, r.Partitions, false})
			key := [2]string{r.Group, r.Member}
			released[key] = append(released[key], r)
		}
	}
	for _, group := range sortedKeys(byGroup) {
		evs := byGroup[group]
		slices.SortStableFunc(evs, func(a, b event) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			if a.assign == b.assign {
				return 0
			}
			if a.assign {
				return 1 // a release and an assignment at once: the release first
			}
			return -1
		})
		holder, last := map[int32]string{}, map[int32]string{}
		for _, ev := range evs {
			if !ev.assign {
				for _, p := range ev.parts {
					if holder[p] == ev.member {
						delete(holder, p)
					}
				}
				continue
			}
			res.Checked++
			for _, p := range ev.parts {
				if prev, ok := last[p]; ok && prev != ev.member {
					handoffs++
				}
				last[p] = ev.member
				prev, held := holder[p]
				holder[p] = ev.member
				if !held || prev == ev.member {
					continue
				}
				// prev still held p: it must have lost it, not revoked it
				// later.
				var gaveUp *Release
				for i, r := range released[[2]string{group, prev}] {
					if r.At >= ev.at && slices.Contains(r.Partitions, p) {
						gaveUp = &released[[2]string{group, prev}][i]
						break
					}
				}
				stayed := slices.ContainsFunc(assignedAt[[2]string{group, prev}], func(at time.Duration) bool { return at > ev.at })
				switch {
				case gaveUp == nil && stayed:
					res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s: partition %d assigned to %s at %v while %s, still a member, never gave it up",
						group, p, ev.member, ev.at.Round(time.Millisecond), prev))
					continue
				case gaveUp == nil || gaveUp.Lost:
					fromDeparted++
					continue
				}
				res.Anomalies = append(res.Anomalies, fmt.Sprintf("%s: partition %d assigned to %s at %v, before %s revoked it at %v",
					group, p, ev.member, ev.at.Round(time.Millisecond), prev, gaveUp.At.Round(time.Millisecond)))
			}
		}
		groups++
	}
	return handoffs, fromDeparted, groups
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
	seen := firstSeen{}
	for _, r := range s.Syncs {
		seen.note(r.Group, r.Generation, r.At)
	}
	return seen
}

// firstSeen is, per group, the earliest time each numbered round
// (generation, member epoch) was seen.
type firstSeen map[string]map[int32]time.Duration

func (f firstSeen) note(group string, round int32, at time.Duration) {
	m := f[group]
	if m == nil {
		m = map[int32]time.Duration{}
		f[group] = m
	}
	if first, ok := m[round]; !ok || at < first {
		m[round] = at
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
