package assignors

import "slices"

// classes groups members with identical subscriptions into member classes,
// and topics whose subscribers are the same member classes into topic
// classes. Members of a class are interchangeable for balance, and so are
// partitions of a topic class: balancing two thousand members subscribed
// to the same five hundred topics is balancing one class over one topic
// class.
type classes struct {
	of       []int32   // member → class, -1 if it subscribes to no partition
	members  [][]int32 // class → its members, in member order
	tcs      [][]int32 // class → the topic classes it subscribes to, ascending
	topic    []int32   // topic → topic class, -1 if nobody subscribes
	size     []int64   // topic class → partitions
	eligible [][]int32 // topic class → the classes subscribing to it, ascending
}

func newClasses(in *input) *classes {
	cl := &classes{of: make([]int32, len(in.members)), topic: make([]int32, len(in.topics))}
	classOfSub := make([]int32, len(in.subs))
	for i := range classOfSub {
		classOfSub[i] = -1
	}
	var subOf []int32 // class → subscription
	for m := range in.members {
		s := in.members[m].sub
		if len(in.subs[s]) == 0 {
			cl.of[m] = -1
			continue
		}
		if classOfSub[s] < 0 {
			classOfSub[s] = int32(len(cl.members))
			cl.members = append(cl.members, nil)
			subOf = append(subOf, s)
		}
		k := classOfSub[s]
		cl.of[m] = k
		cl.members[k] = append(cl.members[k], int32(m))
	}

	// The classes subscribing to each topic, ascending.
	lo := make([]int32, len(in.topics)+1)
	for _, s := range subOf {
		for _, t := range in.subs[s] {
			lo[t+1]++
		}
	}
	for t := range in.topics {
		lo[t+1] += lo[t]
	}
	flat := make([]int32, lo[len(in.topics)])
	next := slices.Clone(lo[:len(in.topics)])
	for k, s := range subOf {
		for _, t := range in.subs[s] {
			flat[next[t]] = int32(k)
			next[t]++
		}
	}
	keys := make(map[uint64][]int32)
	for t := range in.topics {
		subscribers := flat[lo[t]:lo[t+1]]
		if len(subscribers) == 0 {
			cl.topic[t] = -1
			continue
		}
		j := internSub(&cl.eligible, keys, subscribers)
		cl.topic[t] = j
		if int(j) == len(cl.size) {
			cl.size = append(cl.size, 0)
		}
		cl.size[j] += int64(in.base[t+1] - in.base[t])
	}

	cl.tcs = make([][]int32, len(cl.members))
	for k, s := range subOf {
		var tcs []int32
		for _, t := range in.subs[s] {
			tcs = append(tcs, cl.topic[t])
		}
		slices.Sort(tcs)
		cl.tcs[k] = slices.Compact(tcs)
	}
	return cl
}

// uniform reports whether every member that subscribes to anything
// subscribes to the same topics.
func (cl *classes) uniform() bool { return len(cl.members) == 1 }
