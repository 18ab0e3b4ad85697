package assignors

import (
	"cmp"
	"slices"
)

// input is a group to assign, by number rather than by name. Topics are
// numbered in name order and partitions across topics in that order, so
// partition numbers sort the way Kafka sorts topic-partitions. Members are
// numbered in Kafka's member order: static members first by instance id,
// then the others by member id. The built-in assignors plan on an input;
// builder makes one from a Group or straight from JoinGroup metadata.
type input struct {
	topics  []string // topic number → name
	base    []int32  // topic t's partitions are base[t] .. base[t+1]-1
	members []memberInput
	subs    [][]int32 // distinct subscriptions: topic numbers, ascending
	claims  []claim   // what members say they own, members' ranges in order
	racks   racks
}

// memberInput is one member of an input.
type memberInput struct {
	id, instanceID   string
	sub              int32 // index into input.subs
	rack             int32 // index into racks.names, or -1
	gen              int32 // generation of the member's claims, -1 unknown
	claimLo, claimHi int32 // the member's claims are input.claims[claimLo:claimHi]
	caller           int32 // index of the member in the caller's list
}

// claim is a member's claim to own a partition.
type claim struct{ part, topic int32 }

// numPartitions is how many partitions the input's topics have together.
func (in *input) numPartitions() int { return int(in.base[len(in.topics)]) }

// topicOf returns the topic of partition p.
func (in *input) topicOf(p int32) int32 {
	t, found := slices.BinarySearch(in.base, p) // topics all have partitions
	if !found {
		t--
	}
	return int32(t)
}

// subscribes reports whether member m subscribes to topic t.
func (in *input) subscribes(m int, t int32) bool {
	_, ok := slices.BinarySearch(in.subs[in.members[m].sub], t)
	return ok
}

// subscribers returns the members subscribed to each topic, in member
// order: topic t's are members[lo[t]:lo[t+1]].
func (in *input) subscribers() (lo, members []int32) {
	lo = make([]int32, len(in.topics)+1)
	for i := range in.members {
		for _, t := range in.subs[in.members[i].sub] {
			lo[t+1]++
		}
	}
	for t := range in.topics {
		lo[t+1] += lo[t]
	}
	members = make([]int32, lo[len(in.topics)])
	next := slices.Clone(lo[:len(in.topics)])
	for i := range in.members {
		for _, t := range in.subs[in.members[i].sub] {
			members[next[t]] = int32(i)
			next[t]++
		}
	}
	return lo, members
}

// newPlan returns a plan with every partition unassigned.
func (in *input) newPlan() []int32 {
	owner := make([]int32, in.numPartitions())
	for i := range owner {
		owner[i] = unassigned
	}
	return owner
}

// memberOrder is Kafka's member order (ConsumerPartitionAssignor.MemberInfo):
// members with an instance id first, by instance id, then by member id.
func memberOrder(a, b memberInput) int {
	switch {
	case a.instanceID != "" && b.instanceID != "":
		if c := cmp.Compare(a.instanceID, b.instanceID); c != 0 {
			return c
		}
	case a.instanceID != "":
		return -1
	case b.instanceID != "":
		return 1
	}
	return cmp.Compare(a.id, b.id)
}
