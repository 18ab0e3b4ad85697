package assignors

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// claimMode says which of a member's claims an assignor reads.
type claimMode uint8

const (
	claimsNone        claimMode = iota // range, roundrobin: ownership does not matter
	claimsEager                        // sticky: the assignment in the user data
	claimsCooperative                  // cooperative-sticky: owned partitions and their generation
	claimsTarget                       // uniform (server side): each member's current target, one generation
)

// builder makes an input in two steps, as a franz-go leader learns the group:
// first the members, whose subscriptions name the topics (member, claim...),
// then the topics' partition counts (finish). Until finish, topics have
// provisional numbers in the order they were first seen.
type builder struct {
	mode    claimMode
	names   []string // provisional topic number → name
	nameIdx map[string]int32
	inSub   []bool // provisional topic is in some subscription
	hint    int32  // provisional topic of the last claim

	seed    maphash.Seed
	raws    map[uint64][]rawSub // subscriptions as sent, by hash of names
	prevRaw []string            // the last member's subscription as sent
	prevSub int32
	subs    [][]int32          // distinct subscriptions, provisional topics, ascending
	subKeys map[uint64][]int32 // subs by hash of topics
	scratch []int32

	members []memberInput
	claims  []rawClaim

	rackIdx   map[string]int32
	rackNames []string
	anyRack   bool

	sticky kmsg.StickyMemberMetadata // scratch for user data
}

type rawSub struct {
	topics []string
	sub    int32
}

type rawClaim struct{ topic, part int32 }

func newBuilder(mode claimMode, members int) *builder {
	return &builder{
		mode:    mode,
		nameIdx: make(map[string]int32),
		seed:    maphash.MakeSeed(),
		raws:    make(map[uint64][]rawSub),
		subKeys: make(map[uint64][]int32),
		members: make([]memberInput, 0, members),
		rackIdx: make(map[string]int32),
		prevSub: -1,
	}
}

// topicsSubscribed returns every topic some member subscribes to.
func (b *builder) topicsSubscribed() map[string]struct{} {
	m := make(map[string]struct{}, len(b.names))
	for i, name := range b.names {
		if b.inSub[i] {
			m[name] = struct{}{}
		}
	}
	return m
}

// topic returns the provisional number of a topic, adding it if new.
func (b *builder) topic(name string) int32 {
	if t, ok := b.nameIdx[name]; ok {
		return t
	}
	t := int32(len(b.names))
	name = strings.Clone(name) // names may alias a caller's buffer
	b.names = append(b.names, name)
	b.inSub = append(b.inSub, false)
	b.nameIdx[name] = t
	return t
}

// member adds a member and returns its index. topics may alias a buffer the
// caller reuses once member returns.
func (b *builder) member(id, instanceID string, topics []string, rack string) int {
	m := memberInput{
		id:         id,
		instanceID: instanceID,
		sub:        b.subscription(topics),
		rack:       -1,
		gen:        -1,
		claimLo:    int32(len(b.claims)),
		claimHi:    int32(len(b.claims)),
		caller:     int32(len(b.members)),
	}
	if rack != "" {
		m.rack = b.rack(rack)
		b.anyRack = true
	}
	b.members = append(b.members, m)
	return len(b.members) - 1
}

// repeat adds a member that sent exactly what the last one did.
func (b *builder) repeat(id, instanceID string) {
	m := b.members[len(b.members)-1]
	m.id, m.instanceID, m.caller = id, instanceID, int32(len(b.members))
	lo, hi := m.claimLo, m.claimHi
	m.claimLo = int32(len(b.claims))
	b.claims = append(b.claims, b.claims[lo:hi]...)
	m.claimHi = int32(len(b.claims))
	b.members = append(b.members, m)
}

// subscription returns the number of a subscription. Members usually share
// a few subscriptions, so the list as sent is compared with the last one
// and then looked up by hash before any topic name is resolved.
func (b *builder) subscription(topics []string) int32 {
	if b.prevRaw != nil && slices.Equal(topics, b.prevRaw) {
		return b.prevSub
	}
	var h maphash.Hash
	h.SetSeed(b.seed)
	for _, t := range topics {
		h.WriteString(t)
		h.WriteByte(0)
	}
	key := h.Sum64()
	for _, r := range b.raws[key] {
		if slices.Equal(r.topics, topics) {
			b.prevRaw, b.prevSub = r.topics, r.sub
			return r.sub
		}
	}
	ids := b.scratch[:0]
	for _, name := range topics {
		t := b.topic(name)
		b.inSub[t] = true
		ids = append(ids, t)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	b.scratch = ids
	sub := internSub(&b.subs, b.subKeys, ids)
	r := rawSub{topics: slices.Clone(topics), sub: sub}
	b.raws[key] = append(b.raws[key], r)
	b.prevRaw, b.prevSub = r.topics, sub
	return sub
}

// internSub returns the number of the subscription ids in subs, adding a
// copy if it is new.
func internSub(subs *[][]int32, keys map[uint64][]int32, ids []int32) int32 {
	key := uint64(14695981039346656037)
	for _, t := range ids {
		key = (key ^ uint64(uint32(t))) * 1099511628211
	}
	for _, s := range keys[key] {
		if slices.Equal((*subs)[s], ids) {
			return s
		}
	}
	s := int32(len(*subs))
	*subs = append(*subs, slices.Clone(ids))
	keys[key] = append(keys[key], s)
	return s
}

func (b *builder) rack(name string) int32 {
	if r, ok := b.rackIdx[name]; ok {
		return r
	}
	r := int32(len(b.rackNames))
	name = strings.Clone(name)
	b.rackNames = append(b.rackNames, name)
	b.rackIdx[name] = r
	return r
}

// claim records that member m claims partitions of topic.
func (b *builder) claim(m int, topic string, partitions []int32) {
	if len(partitions) == 0 {
		return
	}
	t := b.hint + 1 // owned partitions usually come sorted by topic
	if int(t) >= len(b.names) || b.names[t] != topic {
		t = b.hint
		if int(t) >= len(b.names) || b.names[t] != topic {
			t = b.topic(topic)
		}
	}
	b.hint = t
	for _, p := range partitions {
		b.claims = append(b.claims, rawClaim{t, p})
	}
	b.members[m].claimHi = int32(len(b.claims))
}

// stickyUserData decodes user data as Kafka's StickyAssignorUserData into
// b.sticky, whose strings then alias ud.
func (b *builder) stickyUserData(ud []byte) bool {
	return len(ud) > 0 && b.sticky.UnsafeReadFrom(ud) == nil
}

// claimSticky records what a member of a sticky group owns and in which
// generation, following Kafka's assignors: the eager StickyAssignor reads
// its user data (members revoke everything before joining, so they own
// nothing); CooperativeStickyAssignor reads the owned partitions and, from
// ConsumerMemberMetadata v2 on, their generation, else the generation in
// the user data.
func claimSticky[T any](b *builder, m int, owned []T, part func(*T) (string, []int32), gen int32, ud []byte) {
	mi := &b.members[m]
	switch b.mode {
	case claimsNone:
		return
	case claimsEager:
		if b.stickyUserData(ud) {
			mi.gen = b.sticky.Generation
			for i := range b.sticky.CurrentAssignment {
				a := &b.sticky.CurrentAssignment[i]
				b.claim(m, a.Topic, a.Partitions)
			}
			return
		}
	case claimsCooperative:
		if gen < 0 && len(ud) > 0 {
			if g, ok := cooperativeGeneration(ud); ok {
				gen = g
			} else if b.stickyUserData(ud) {
				gen = b.sticky.Generation
				if len(owned) == 0 { // v0 metadata: the user data is all we have
					mi.gen = gen
					for i := range b.sticky.CurrentAssignment {
						a := &b.sticky.CurrentAssignment[i]
						b.claim(m, a.Topic, a.Partitions)
					}
					return
				}
			}
		}
	}
	mi.gen = gen
	for i := range owned {
		topic, parts := part(&owned[i])
		b.claim(m, topic, parts)
	}
}

// finish numbers the topics that have partitions and that somebody
// subscribes to, puts members in Kafka's order and resolves claims to
// partition numbers, dropping claims on partitions that do not exist.
// partitionRacks is optional, as Group.Racks.
func (b *builder) finish(counts map[string]int32, partitionRacks map[string][][]string) (*input, error) {
	in := &input{}
	perm := make([]int32, len(b.names))
	for i, name := range b.names {
		perm[i] = -1
		if b.inSub[i] && counts[name] > 0 {
			in.topics = append(in.topics, name)
		}
	}
	slices.Sort(in.topics)
	in.base = make([]int32, len(in.topics)+1)
	for t, name := range in.topics {
		perm[b.nameIdx[name]] = int32(t)
		in.base[t+1] = in.base[t] + counts[name]
	}

	// Subscriptions that differed only in topics without partitions
	// become one.
	subMap := make([]int32, len(b.subs))
	keys := make(map[uint64][]int32, len(b.subs))
	for s, ids := range b.subs {
		final := b.scratch[:0]
		for _, t := range ids {
			if perm[t] >= 0 {
				final = append(final, perm[t])
			}
		}
		slices.Sort(final)
		b.scratch = final
		subMap[s] = internSub(&in.subs, keys, final)
	}

	in.members = b.members
	for i := range in.members {
		in.members[i].sub = subMap[in.members[i].sub]
	}
	if !slices.IsSortedFunc(in.members, memberOrder) {
		slices.SortStableFunc(in.members, memberOrder)
	}
	seen := make(map[string]struct{}, len(in.members))
	for i := range in.members {
		if _, dup := seen[in.members[i].id]; dup {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateMember, in.members[i].id)
		}
		seen[in.members[i].id] = struct{}{}
	}

	if len(b.claims) > 0 {
		in.claims = make([]claim, 0, len(b.claims))
		for i := range in.members {
			m := &in.members[i]
			lo := int32(len(in.claims))
			for _, c := range b.claims[m.claimLo:m.claimHi] {
				t := perm[c.topic]
				if t < 0 || c.part < 0 || c.part >= in.base[t+1]-in.base[t] {
					continue
				}
				in.claims = append(in.claims, claim{in.base[t] + c.part, t})
			}
			m.claimLo, m.claimHi = lo, int32(len(in.claims))
		}
	}

	if b.anyRack && len(partitionRacks) > 0 {
		in.racks.build(in, partitionRacks, b.rack)
	}
	in.racks.names = b.rackNames
	return in, nil
}

// buildGroup makes the input of a Group.
func buildGroup(g *Group, mode claimMode) (*input, error) {
	b := newBuilder(mode, len(g.Members))
	ownedPart := func(tp *TopicPartitions) (string, []int32) { return tp.Topic, tp.Partitions }
	for i := range g.Members {
		m := &g.Members[i]
		idx := b.member(m.ID, m.InstanceID, m.Topics, m.Rack)
		claimSticky(b, idx, m.Owned, ownedPart, m.Generation, m.UserData)
	}
	return b.finish(g.Topics, g.Racks)
}
