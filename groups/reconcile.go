package groups

import (
	"maps"
	"slices"
)

// This file is the per-member reconciliation of consumer-protocol groups
// (KIP-848), Kafka's CurrentAssignmentBuilder: how a member moves from
// what it was given towards its part of the group's target assignment,
// one heartbeat at a time, without a partition ever being given to two
// members at once. It is pure: the consumer group's heartbeat handler
// calls reconcile under the group's lock, and the result is what it
// writes through Raft, so every replica derives nothing on its own.

// topicID is a topic's id, as the consumer protocol names topics.
type topicID = [16]byte

// topicPartitions are partitions by topic: each topic's ascending, with no
// duplicates, and no topic without partitions. nil is none.
type topicPartitions map[topicID][]int32

// contains reports whether p of topic t is in tp.
func (tp topicPartitions) contains(t topicID, p int32) bool {
	_, ok := slices.BinarySearch(tp[t], p)
	return ok
}

// empty reports whether tp holds no partition.
func (tp topicPartitions) empty() bool { return len(tp) == 0 }

// add puts partitions of topic t into tp (a new map when tp is nil) and
// returns it.
func (tp topicPartitions) add(t topicID, parts []int32) topicPartitions {
	if len(parts) == 0 {
		return tp
	}
	if tp == nil {
		tp = topicPartitions{}
	}
	merged := append(slices.Clone(tp[t]), parts...)
	slices.Sort(merged)
	tp[t] = slices.Compact(merged)
	return tp
}

// reconcileState is where a member of a consumer group stands in its
// reconciliation (Kafka's MemberState). The numbers are stored: append only.
type reconcileState uint8

const (
	// reconcileStable: the member has its whole share of the target of its
	// epoch, and nothing to give back.
	reconcileStable reconcileState = 0
	// reconcileUnrevoked: the member must give back
	// pendingRevocation before it moves to the next epoch; it keeps its
	// epoch until a heartbeat's owned partitions no longer hold any of them.
	reconcileUnrevoked reconcileState = 1
	// reconcileUnreleased: the member is at the target epoch but some of
	// its target partitions are still owned by other members, which must
	// give them back first; it gets them on a later heartbeat.
	reconcileUnreleased reconcileState = 2
)

func (s reconcileState) String() string {
	switch s {
	case reconcileStable:
		return "STABLE"
	case reconcileUnrevoked:
		return "UNREVOKED_PARTITIONS"
	case reconcileUnreleased:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// reconciled is the part of a consumer-group member that reconciliation
// moves.
type reconciled struct {
	state reconcileState
	// epoch is the member epoch; previousEpoch the one before the last
	// change (a commit or heartbeat at previousEpoch is still accepted
	// while the member's answer to that change may be in flight).
	epoch, previousEpoch int32
	// assigned is what the member may consume now; pendingRevocation what
	// it still owns and must give back.
	assigned, pendingRevocation topicPartitions
}

// reconcileInput is what one reconciliation step reads besides the member.
type reconcileInput struct {
	// targetEpoch is the epoch of the group's target assignment, and target
	// the member's part of it.
	targetEpoch int32
	target      topicPartitions
	// owned is what the member's heartbeat says it owns, or nil when the
	// heartbeat left it out (null in Kafka's request: unchanged, so
	// nothing pending counts as revoked). An empty, non-nil map is owning
	// nothing.
	owned topicPartitions
	// ownerEpoch returns the epoch of another member that has partition p
	// of topic t assigned or pending revocation, or -1 when no other
	// member has it. The member's own partitions do not count. (Kafka's
	// currentPartitionEpoch counts them too; the only difference is a
	// partition the member just gave back and gets again in the same
	// step, which Kafka hands back one heartbeat later. Both are safe: the
	// member gets it only once its heartbeat no longer owns it.)
	ownerEpoch func(t topicID, p int32) int32
}

// reconcile returns the member's next state. A member that is stable at
// the target epoch, or that still owns partitions it must give back, is
// returned as it is. For a state this version does not know (a newer
// coordinator's, after a downgrade) it returns ErrFencedMemberEpoch unless
// the member owns nothing, as Kafka does: the member then rejoins with no
// partitions and reconciles from scratch.
func reconcile(m reconciled, in reconcileInput) (reconciled, error) {
	switch m.state {
	case reconcileStable:
		if m.epoch == in.targetEpoch {
			return m, nil
		}
		return nextAssignment(m, m.epoch, in), nil
	case reconcileUnrevoked:
		if in.ownsAny(m.pendingRevocation) {
			return m, nil
		}
		return nextAssignment(m, m.epoch+1, in), nil
	case reconcileUnreleased:
		return nextAssignment(m, m.epoch, in), nil
	}
	if in.owned == nil || !in.owned.empty() {
		return m, ErrFencedMemberEpoch
	}
	return nextAssignment(m, in.targetEpoch, in), nil
}

// ownsAny reports whether the heartbeat's owned partitions hold any of
// tp; a heartbeat that did not say holds them all.
func (in *reconcileInput) ownsAny(tp topicPartitions) bool {
	if in.owned == nil {
		return true
	}
	for t, parts := range in.owned {
		for _, p := range parts {
			if tp.contains(t, p) {
				return true
			}
		}
	}
	return false
}

// nextAssignment is one step towards the target, from the member's
// assigned partitions at epoch:
//   - what it keeps is assigned ∩ target;
//   - what it must give back is assigned minus that;
//   - what it may get is target minus what it keeps, less the partitions
//     another member still has (unreleased).
//
// With something to give back that the member still owns, it stays at
// epoch and waits for the revocation (unrevoked). Otherwise it moves to
// the target epoch with what it keeps and what it may get, stable or
// waiting for the unreleased rest.
func nextAssignment(m reconciled, epoch int32, in reconcileInput) reconciled {
	var kept, revoke, gain topicPartitions
	unreleased := false
	topics := slices.Collect(maps.Keys(in.target))
	for t := range m.assigned {
		if _, ok := in.target[t]; !ok {
			topics = append(topics, t)
		}
	}
	for _, t := range topics {
		target, current := in.target[t], m.assigned[t]
		var keep, drop, get []int32
		for _, p := range current {
			if _, ok := slices.BinarySearch(target, p); ok {
				keep = append(keep, p)
			} else {
				drop = append(drop, p)
			}
		}
		for _, p := range target {
			if _, ok := slices.BinarySearch(current, p); ok {
				continue
			}
			if in.ownerEpoch(t, p) != -1 {
				unreleased = true
				continue
			}
			get = append(get, p)
		}
		kept, revoke, gain = kept.add(t, keep), revoke.add(t, drop), gain.add(t, get)
	}

	next := m
	if !revoke.empty() && in.ownsAny(revoke) {
		next.state = reconcileUnrevoked
		next.previousEpoch, next.epoch = m.epoch, epoch
		next.assigned, next.pendingRevocation = kept, revoke
		return next
	}
	for t, parts := range gain {
		kept = kept.add(t, parts)
	}
	next.state = reconcileStable
	if unreleased {
		next.state = reconcileUnreleased
	}
	next.previousEpoch, next.epoch = m.epoch, in.targetEpoch
	next.assigned, next.pendingRevocation = kept, nil
	return next
}
