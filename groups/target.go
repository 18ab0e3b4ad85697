package groups

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"

	"github.com/kcoord/kcoord/assignors"
)

// This file computes a consumer-protocol group's next target assignment
// (KIP-848), Kafka's TargetAssignmentBuilder: whenever the group epoch
// passes the target's epoch, the group's assignor runs over the members'
// resolved subscriptions and their current targets, and the members whose
// target changed are what the coordinator writes through Raft. It is pure:
// the heartbeat handler calls it under the group's lock.

// targetMember is a consumer-group member as its target reads it.
type targetMember struct {
	id, instanceID, rack string
	// topics are the topic names the member subscribes to, and regex its
	// subscription's regular expression (compiled anchored, see
	// compileSubscriptionRegex), or nil.
	topics []string
	regex  *regexp.Regexp
	// allow, when set, is the topics the regex may match: those the
	// member's principal may describe (Kafka 4.x filters a regex's topics
	// so).
	allow func(topic string) bool
}

// registeredTopic is a topic of the topic registry, as targets use it.
type registeredTopic struct {
	id         topicID
	partitions int32
}

// targetBuild is one computation of a group's target.
type targetBuild struct {
	assignor assignors.ServerAssignor
	// members of the group at the new epoch.
	members []targetMember
	// current is the target so far, by member id; it may hold members that
	// left, whose targets the result drops.
	current map[string]topicPartitions
	// replaces maps the id of a static member that just joined to the id
	// of the departed member with its instance id, whose target it starts
	// from, so a static member that restarts gets its partitions back.
	replaces map[string]string
	// topics is the topic registry by name.
	topics map[string]registeredTopic
}

// targetResult is a computed target.
type targetResult struct {
	// target is every member's part, by member id (nil for a member given
	// nothing).
	target map[string]topicPartitions
	// changed are the members whose part differs from current (a member
	// with no current part and nothing given is not changed), in member
	// order; removed the members of current no longer in the group, sorted.
	changed, removed []string
}

// compileSubscriptionRegex compiles a SubscribedTopicRegex. Kafka matches
// it with RE2/J against whole topic names; Go's regexp is RE2, so it is
// anchored here. The expression is compiled on its own first: only one
// that stands alone may be wrapped, since pasting "foo)|(.*" between the
// anchors would compile into an expression that matches every name. An
// error is Kafka's INVALID_REGULAR_EXPRESSION.
func compileSubscriptionRegex(expr string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(expr); err != nil {
		return nil, err
	}
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// subscribedTopics resolves a member's subscription against the registry:
// the named topics that exist and every registered topic the regex
// matches, sorted, without duplicates. Names not registered are left out,
// as Kafka leaves out names it cannot resolve; they count once created.
func subscribedTopics(m *targetMember, topics map[string]registeredTopic) []string {
	var out []string
	for _, name := range m.topics {
		if _, ok := topics[name]; ok {
			out = append(out, name)
		}
	}
	if m.regex != nil {
		for name := range topics {
			if m.regex.MatchString(name) && (m.allow == nil || m.allow(name)) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// buildTarget runs the assignor and returns the new target. An assignor
// error is returned as it is (Kafka's PartitionAssignorException): the
// group keeps its current target.
func buildTarget(b targetBuild) (targetResult, error) {
	names := make(map[topicID]string, len(b.topics))
	counts := make(map[string]int32, len(b.topics))
	for name, t := range b.topics {
		names[t.id] = name
		counts[name] = t.partitions
	}
	g := &assignors.TargetGroup{Topics: counts, Members: make([]assignors.TargetMember, len(b.members))}
	for i := range b.members {
		m := &b.members[i]
		from := m.id
		if prev, ok := b.replaces[m.id]; ok {
			from = prev
		}
		g.Members[i] = assignors.TargetMember{
			ID: m.id, InstanceID: m.instanceID, Rack: m.rack,
			Topics: subscribedTopics(m, b.topics),
			Target: byName(b.current[from], names),
		}
	}
	plan, err := b.assignor.Target(g)
	if err != nil {
		return targetResult{}, err
	}

	res := targetResult{target: make(map[string]topicPartitions, len(b.members))}
	present := make(map[string]bool, len(b.members))
	for i := range b.members {
		id := b.members[i].id
		present[id] = true
		var next topicPartitions
		for _, tp := range plan[i].Partitions {
			next = next.add(b.topics[tp.Topic].id, tp.Partitions)
		}
		res.target[id] = next
		if !sameTopicPartitions(next, b.current[id]) {
			res.changed = append(res.changed, id)
		}
	}
	for id := range b.current {
		if !present[id] {
			res.removed = append(res.removed, id)
		}
	}
	slices.Sort(res.removed)
	return res, nil
}

// byName converts a target to the assignors' form, dropping topics no
// longer registered (a topic deleted, or deleted and created again under a
// new id). Topics come sorted by name.
func byName(tp topicPartitions, names map[topicID]string) []assignors.TopicPartitions {
	var out []assignors.TopicPartitions
	for id, parts := range tp {
		if name, ok := names[id]; ok {
			out = append(out, assignors.TopicPartitions{Topic: name, Partitions: parts})
		}
	}
	slices.SortFunc(out, func(a, b assignors.TopicPartitions) int { return cmp.Compare(a.Topic, b.Topic) })
	return out
}

// sameTopicPartitions reports whether a and b hold the same partitions
// (nil and empty alike).
func sameTopicPartitions(a, b topicPartitions) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]int32])
}

// preferredAssignor is the assignor a consumer group's target is computed
// with (Kafka's ConsumerGroup.preferredServerAssignor): the one most
// members name, ties going to the first name in order (Kafka leaves ties
// to its map's order; a replica-independent choice needs a rule), or def
// when no member names one. names has one entry per member, "" for a
// member that names none.
func preferredAssignor(names []string, def string) string {
	counts := make(map[string]int, 2)
	for _, n := range names {
		if n != "" {
			counts[n]++
		}
	}
	best, most := def, 0
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		if counts[n] > most {
			best, most = n, counts[n]
		}
	}
	return best
}

// subscriptionMetadataHash hashes the metadata of the registered topics a
// group subscribes to (subscribed: the members' resolved subscriptions
// together, any order, repeats allowed): each topic's name, id and
// partition count, in name order. It is stored with the group epoch
// (fsm.ConsumerGroup.MetadataHash), so it must never change for the same
// metadata: FNV-1a over a fixed layout. A topic created, deleted or
// created again, or given more partitions, changes it; topics the group
// does not subscribe to do not.
func subscriptionMetadataHash(topics map[string]registeredTopic, subscribed []string) uint64 {
	names := slices.Clone(subscribed)
	slices.Sort(names)
	names = slices.Compact(names)
	h := fnv.New64a()
	var buf []byte
	for _, name := range names {
		t, ok := topics[name]
		if !ok {
			continue
		}
		buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(name)))
		buf = append(buf, name...)
		buf = append(buf, t.id[:]...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(t.partitions))
		h.Write(buf)
	}
	return h.Sum64()
}
