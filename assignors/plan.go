package assignors

import "github.com/twmb/franz-go/pkg/kmsg"

// unassigned is the owner of a partition nobody gets.
const unassigned = -1

// planner is implemented by the built-in assignors: they plan on an input,
// which Balancer decodes straight from JoinGroup metadata. A plan gives each
// partition the member (by input number) it goes to, or unassigned.
type planner interface {
	Assignor
	claimMode() claimMode
	plan(in *input) []int32
}

// assignWith is Assign for a planner.
func assignWith(p planner, g *Group) ([]Assignment, error) {
	in, err := buildGroup(g, p.claimMode())
	if err != nil {
		return nil, err
	}
	return in.assignments(p.plan(in)), nil
}

// byMember groups a plan by member: member m's partitions are
// parts[lo[m]:lo[m+1]], ascending.
func byMember(owner []int32, members int) (lo, parts []int32) {
	lo = make([]int32, members+1)
	for _, m := range owner {
		if m >= 0 {
			lo[m+1]++
		}
	}
	for m := range members {
		lo[m+1] += lo[m]
	}
	parts = make([]int32, lo[members])
	next := make([]int32, members)
	copy(next, lo)
	for p, m := range owner {
		if m >= 0 {
			parts[next[m]] = int32(p)
			next[m]++
		}
	}
	return lo, parts
}

// topicRuns splits a member's ascending partitions into runs of one topic
// each, calling fn with the topic and the partitions' numbers within it
// (written into local, which must be as long as parts).
func (in *input) topicRuns(parts, local []int32, fn func(t int32, partitions []int32)) {
	t, start := int32(-1), 0
	for i, p := range parts {
		if t < 0 || p >= in.base[t+1] {
			if t >= 0 {
				fn(t, local[start:i])
			}
			if next := t + 1; t >= 0 && p < in.base[next+1] {
				t = next // members often hold some of every topic
			} else {
				t = in.topicOf(p)
			}
			start = i
		}
		local[i] = p - in.base[t]
	}
	if t >= 0 {
		fn(t, local[start:])
	}
}

// assignments converts a plan to one Assignment per member, in the order the
// caller gave the members.
func (in *input) assignments(owner []int32) []Assignment {
	lo, parts := byMember(owner, len(in.members))
	local := make([]int32, len(parts))
	runs := 0
	for m := range in.members {
		in.topicRuns(parts[lo[m]:lo[m+1]], local[lo[m]:lo[m+1]], func(int32, []int32) { runs++ })
	}
	tps := make([]TopicPartitions, 0, runs)
	out := make([]Assignment, len(in.members))
	for m := range in.members {
		start := len(tps)
		in.topicRuns(parts[lo[m]:lo[m+1]], local[lo[m]:lo[m+1]], func(t int32, ps []int32) {
			tps = append(tps, TopicPartitions{Topic: in.topics[t], Partitions: ps[:len(ps):len(ps)]})
		})
		if len(tps) > start {
			out[in.members[m].caller].Partitions = tps[start:len(tps):len(tps)]
		}
	}
	return out
}

// syncAssignments encodes a plan as SyncGroup assignments, one per member
// in input order, each a ConsumerMemberAssignment v0. All of them share one
// buffer, sized exactly up front.
func (in *input) syncAssignments(owner []int32) []kmsg.SyncGroupRequestGroupAssignment {
	lo, parts := byMember(owner, len(in.members))
	local := make([]int32, len(parts))
	size := 0
	maxRuns := 0
	for m := range in.members {
		size += 2 + 4 + 4 // version, topic count, null user data
		runs := 0
		in.topicRuns(parts[lo[m]:lo[m+1]], local[lo[m]:lo[m+1]], func(t int32, ps []int32) {
			size += 2 + len(in.topics[t]) + 4 + 4*len(ps)
			runs++
		})
		maxRuns = max(maxRuns, runs)
	}
	buf := make([]byte, 0, size)
	topics := make([]kmsg.ConsumerMemberAssignmentTopic, 0, maxRuns)
	out := make([]kmsg.SyncGroupRequestGroupAssignment, len(in.members))
	for m := range in.members {
		topics = topics[:0]
		in.topicRuns(parts[lo[m]:lo[m+1]], local[lo[m]:lo[m+1]], func(t int32, ps []int32) {
			topics = append(topics, kmsg.ConsumerMemberAssignmentTopic{Topic: in.topics[t], Partitions: ps})
		})
		a := kmsg.NewConsumerMemberAssignment()
		a.Topics = topics
		start := len(buf)
		buf = a.AppendTo(buf)
		s := kmsg.NewSyncGroupRequestGroupAssignment()
		s.MemberID = in.members[m].id
		s.MemberAssignment = buf[start:len(buf):len(buf)]
		out[m] = s
	}
	return out
}
