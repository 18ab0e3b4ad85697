package assignors

import "slices"

// Range returns Kafka's RangeAssignor ("range"). Per topic, the members
// subscribed to it, in member order, get consecutive ranges of partitions;
// the first ones get one partition more when the partitions do not divide
// evenly. 4 partitions over 2 members: p0,p1 / p2,p3; 10 over 3: 0–3 / 4–6
// / 7–9.
//
// With racks (KIP-881), as Kafka 3.5+: when a topic's partitions are not
// replicated on every member's rack, members first take partitions with a
// replica in their rack, up to their share; topics with the same members
// and partition count are matched partition by partition, so co-partitioned
// topics stay co-located. The rest is then dealt as above.
func Range() Assignor { return rangeAssignor{} }

type rangeAssignor struct{}

func (rangeAssignor) Name() string                          { return "range" }
func (rangeAssignor) Protocol() RebalanceProtocol           { return Eager }
func (rangeAssignor) SubscriptionUserData(JoinState) []byte { return nil }
func (rangeAssignor) OnAssignment(Assignment, int32)        {}
func (r rangeAssignor) Assign(g *Group) ([]Assignment, error) {
	return assignWith(r, g)
}
func (rangeAssignor) claimMode() claimMode { return claimsNone }

// rangeTopic is Kafka's RangeAssignor.TopicAssignmentState.
type rangeTopic struct {
	first, n     int32   // the topic's partitions are first .. first+n-1
	consumers    []int32 // subscribed members, in member order
	assigned     []int32 // partitions given to each consumer so far
	per, extra   int32   // partitions per consumer; consumers still to get one more
	left         int32   // partitions not assigned yet
	consumerRack bool    // some consumer has a rack
	rackAware    bool    // needsRackAwareAssignment
}

// maxAssignable is how many more partitions consumer i may take.
func (s *rangeTopic) maxAssignable(i int) int32 {
	m := s.per - s.assigned[i]
	if s.extra > 0 {
		m++
	}
	return max(0, m)
}

func (s *rangeTopic) assign(owner []int32, i int, p int32) {
	owner[p] = s.consumers[i]
	s.assigned[i]++
	if s.assigned[i] == s.per+1 {
		s.extra--
	}
	s.left--
}

func (rangeAssignor) plan(in *input) []int32 {
	owner := in.newPlan()
	lo, subscribers := in.subscribers()
	states := make([]rangeTopic, len(in.topics))
	rackAware := false
	for t := range states {
		s := &states[t]
		s.first, s.n = in.base[t], in.base[t+1]-in.base[t]
		s.consumers = subscribers[lo[t]:lo[t+1]]
		if len(s.consumers) == 0 {
			continue
		}
		s.assigned = make([]int32, len(s.consumers))
		s.per, s.extra = s.n/int32(len(s.consumers)), s.n%int32(len(s.consumers))
		s.left = s.n
		if in.racks.on {
			s.consumerRack, s.rackAware = rangeNeedsRacks(in, s)
			rackAware = rackAware || s.rackAware
		}
	}
	if rackAware {
		rangeByRack(in, states, owner)
	}
	for t := range states {
		if s := &states[t]; len(s.consumers) > 0 {
			rangeFill(in, s, owner, false)
		}
	}
	return owner
}

// rangeNeedsRacks reports whether some consumer of the topic has a rack, and
// Kafka's useRackAwareAssignment: some consumer rack holds a replica, and
// not every partition is replicated on the same racks.
func rangeNeedsRacks(in *input, s *rangeTopic) (consumerRack, needed bool) {
	consumerRacks := map[int32]bool{}
	for _, m := range s.consumers {
		if r := in.members[m].rack; r >= 0 {
			consumerRacks[r] = true
		}
	}
	if len(consumerRacks) == 0 {
		return false, false
	}
	all := map[int32]bool{}
	for p := s.first; p < s.first+s.n; p++ {
		for _, r := range in.racks.of(p) {
			all[r] = true
		}
	}
	overlap := false
	for r := range consumerRacks {
		overlap = overlap || all[r]
	}
	if !overlap {
		return true, false
	}
	for p := s.first; p < s.first+s.n; p++ {
		if len(in.racks.of(p)) != len(all) {
			return true, true
		}
	}
	return true, false
}

// racksMatch is Kafka's: a consumer without a rack matches every partition.
func racksMatch(in *input, m, p int32) bool {
	r := in.members[m].rack
	return r < 0 || in.racks.local(p, r)
}

// rangeByRack is Kafka's assignWithRackMatching: topics are grouped by their
// consumers and, when a consumer has a rack, their partition count. Groups
// of several topics are matched partition by partition; a lone topic that
// needs it is ranged over rack-local partitions.
func rangeByRack(in *input, states []rangeTopic, owner []int32) {
	groups := map[uint64][]int32{}
	var order []uint64
	for t := range states {
		s := &states[t]
		if len(s.consumers) == 0 {
			continue
		}
		key := uint64(14695981039346656037)
		for _, m := range s.consumers {
			key = (key ^ uint64(m)) * 1099511628211
		}
		if s.consumerRack {
			key ^= uint64(s.n) * 0x9e3779b97f4a7c15
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], int32(t))
	}
	for _, key := range order {
		// Hash collisions split back into exact groups here.
		for rest := groups[key]; len(rest) > 0; {
			lead := &states[rest[0]]
			same, other := rest[:0:0], rest[:0:0]
			for _, t := range rest {
				s := &states[t]
				if slices.Equal(s.consumers, lead.consumers) && s.consumerRack == lead.consumerRack && (!s.consumerRack || s.n == lead.n) {
					same = append(same, t)
				} else {
					other = append(other, t)
				}
			}
			rest = other
			switch {
			case len(same) > 1:
				if lead.consumerRack {
					rangeCoPartitioned(in, states, same, owner)
				}
			case lead.rackAware:
				rangeFill(in, lead, owner, true)
			}
		}
	}
}

// rangeCoPartitioned is Kafka's assignCoPartitionedWithRackMatching: each
// partition number of the topics goes, in every topic at once, to the first
// consumer that matches all of their racks and may take more.
func rangeCoPartitioned(in *input, states []rangeTopic, topics []int32, owner []int32) {
	lead := &states[topics[0]]
	remaining := make([]int, len(lead.consumers)) // consumer positions, in order
	for i := range remaining {
		remaining[i] = i
	}
	for i := int32(0); i < lead.n && len(remaining) > 0; i++ {
		for at, c := range remaining {
			m := lead.consumers[c]
			ok := true
			for _, t := range topics {
				s := &states[t]
				if !racksMatch(in, m, s.first+i) || s.maxAssignable(c) == 0 {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			more := false
			for _, t := range topics {
				s := &states[t]
				s.assign(owner, c, s.first+i)
				more = more || s.maxAssignable(c) > 0
			}
			if !more {
				remaining = slices.Delete(remaining, at, at+1)
			}
			break
		}
	}
}

// rangeFill is Kafka's assignRanges: each consumer in turn takes the first
// unassigned partitions it may, up to what it may still take; byRack, it
// may take those its racks match. Consumers of one rack match alike, so a
// cursor per rack remembers how far the search went: partitions it passed
// are assigned or not local, and stay so.
func rangeFill(in *input, s *rangeTopic, owner []int32, byRack bool) {
	cursors := map[int32]int32{}
	for i, m := range s.consumers {
		if s.left == 0 {
			return
		}
		k := s.maxAssignable(i)
		if k == 0 {
			continue
		}
		rack := int32(-1)
		if byRack {
			rack = in.members[m].rack
		}
		p := cursors[rack] + s.first
		for ; p < s.first+s.n && k > 0; p++ {
			if owner[p] == unassigned && (rack < 0 || in.racks.local(p, rack)) {
				s.assign(owner, i, p)
				k--
			}
		}
		cursors[rack] = p - s.first
	}
}
