package assignors

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Balancer adapts an assignor to franz-go: the returned kgo.GroupBalancer
// goes in kgo.Balancers. The client then calls JoinGroupMetadata when it
// joins, MemberBalancer and the balance when it leads, and
// ParseSyncAssignment when its assignment arrives.
//
// For the built-in assignors the leader decodes members' subscriptions
// straight into the assignors' compact input and encodes the plan straight
// into SyncGroup assignments. Racks (KIP-881) come from the client's
// metadata: a partition's racks are those of the brokers holding its
// replicas, and are used when some member set kgo.Rack.
func Balancer(a Assignor) kgo.GroupBalancer {
	b := &balancer{a: a}
	b.p, _ = a.(planner)
	return b
}

type balancer struct {
	a Assignor
	p planner // nil for custom assignors
}

func (b *balancer) ProtocolName() string { return b.a.Name() }

func (b *balancer) IsCooperative() bool { return b.a.Protocol() == Cooperative }

// JoinGroupMetadata encodes the member's subscription: ConsumerMemberMetadata
// v3 with the assignor's user data, the generation and, for cooperative
// assignors, the owned partitions. kgo adds the rack.
func (b *balancer) JoinGroupMetadata(topics []string, current map[string][]int32, generation int32) []byte {
	owned := make([]TopicPartitions, 0, len(current))
	for t, ps := range current {
		owned = append(owned, TopicPartitions{Topic: t, Partitions: ps})
	}
	slices.SortFunc(owned, func(x, y TopicPartitions) int { return strings.Compare(x.Topic, y.Topic) })
	s := Subscription{
		Topics:     topics,
		UserData:   b.a.SubscriptionUserData(JoinState{Topics: topics, Owned: owned, Generation: generation}),
		Generation: generation,
	}
	if b.IsCooperative() {
		s.Owned = owned
	}
	return EncodeSubscription(s)
}

// ParseSyncAssignment decodes the member's assignment and tells the
// assignor about it.
func (b *balancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	a, err := DecodeAssignment(assignment)
	if err != nil {
		return nil, err
	}
	b.a.OnAssignment(a, -1)
	m := make(map[string][]int32, len(a.Partitions))
	for _, tp := range a.Partitions {
		m[tp.Topic] = append(m[tp.Topic], tp.Partitions...)
	}
	return m, nil
}

// MemberBalancer decodes every member's subscription. A broker listing a
// member twice gets the first listing used, as franz-go's balancers do.
func (b *balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	members = uniqueMembers(members)
	if b.p != nil {
		bl := newBuilder(b.p.claimMode(), len(members))
		if err := decodeMembers(bl, members); err != nil {
			return nil, nil, err
		}
		return &planBalance{p: b.p, b: bl}, bl.topicsSubscribed(), nil
	}
	g := &groupBalance{a: b.a, ids: make([]string, len(members))}
	g.group.Members = make([]Member, len(members))
	topics := make(map[string]struct{})
	for i := range members {
		s, err := DecodeSubscription(members[i].ProtocolMetadata)
		if err != nil {
			return nil, nil, fmt.Errorf("member %q: %w", members[i].MemberID, err)
		}
		m := Member{ID: members[i].MemberID, Subscription: s}
		if members[i].InstanceID != nil {
			m.InstanceID = *members[i].InstanceID
		}
		g.group.Members[i] = m
		g.ids[i] = m.ID
		for _, t := range s.Topics {
			topics[t] = struct{}{}
		}
		g.anyRack = g.anyRack || s.Rack != ""
	}
	return g, topics, nil
}

func uniqueMembers(members []kmsg.JoinGroupResponseMember) []kmsg.JoinGroupResponseMember {
	seen := make(map[string]struct{}, len(members))
	for i := range members {
		if _, dup := seen[members[i].MemberID]; dup {
			out := slices.Clone(members[:i])
			for _, m := range members[i:] {
				if _, dup := seen[m.MemberID]; !dup {
					seen[m.MemberID] = struct{}{}
					out = append(out, m)
				}
			}
			return out
		}
		seen[members[i].MemberID] = struct{}{}
	}
	return members
}

// decodeMembers feeds JoinGroup members to a builder. One scratch metadata
// is decoded into for every member; its strings alias the members' bytes,
// which outlive the balance. Members of a new group send identical bytes,
// which are decoded once.
func decodeMembers(b *builder, members []kmsg.JoinGroupResponseMember) error {
	var meta kmsg.ConsumerMemberMetadata
	ownedPart := func(o *kmsg.ConsumerMemberMetadataOwnedPartition) (string, []int32) { return o.Topic, o.Partitions }
	for i := range members {
		m := &members[i]
		if i > 0 && bytes.Equal(m.ProtocolMetadata, members[i-1].ProtocolMetadata) {
			var instance string
			if m.InstanceID != nil {
				instance = *m.InstanceID
			}
			b.repeat(m.MemberID, instance)
			continue
		}
		if err := readMemberMetadata(&meta, m.ProtocolMetadata, true); err != nil {
			return fmt.Errorf("member %q: %w", m.MemberID, err)
		}
		var instance, rack string
		if m.InstanceID != nil {
			instance = *m.InstanceID
		}
		if meta.Rack != nil {
			rack = *meta.Rack
		}
		idx := b.member(m.MemberID, instance, meta.Topics, rack)
		claimSticky(b, idx, meta.OwnedPartitions, ownedPart, meta.Generation, meta.UserData)
	}
	return nil
}

// planBalance balances for a built-in assignor.
type planBalance struct {
	p    planner
	b    *builder
	info kgo.BalanceInfo
}

func (pb *planBalance) SetBalanceInfo(info kgo.BalanceInfo) { pb.info = info }

// Balance is never called: kgo calls BalanceOrError.
func (pb *planBalance) Balance(topics map[string]int32) kgo.IntoSyncAssignment {
	into, _ := pb.BalanceOrError(topics)
	return into
}

func (pb *planBalance) BalanceOrError(topics map[string]int32) (kgo.IntoSyncAssignment, error) {
	var racks map[string][][]string
	if pb.b.anyRack {
		racks = partitionRacks(pb.info, topics)
	}
	in, err := pb.b.finish(topics, racks)
	if err != nil {
		return syncPlan(nil), err
	}
	return syncPlan(in.syncAssignments(pb.p.plan(in))), nil
}

// groupBalance balances for a custom assignor, through Assign.
type groupBalance struct {
	a       Assignor
	group   Group
	ids     []string
	anyRack bool
	info    kgo.BalanceInfo
}

func (g *groupBalance) SetBalanceInfo(info kgo.BalanceInfo) { g.info = info }

// Balance is never called: kgo calls BalanceOrError.
func (g *groupBalance) Balance(topics map[string]int32) kgo.IntoSyncAssignment {
	into, _ := g.BalanceOrError(topics)
	return into
}

func (g *groupBalance) BalanceOrError(topics map[string]int32) (kgo.IntoSyncAssignment, error) {
	g.group.Topics = topics
	if g.anyRack {
		g.group.Racks = partitionRacks(g.info, topics)
	}
	plan, err := g.a.Assign(&g.group)
	if err != nil {
		return syncPlan(nil), err
	}
	if len(plan) != len(g.ids) {
		return syncPlan(nil), fmt.Errorf("%w: %s returned %d assignments for %d members", ErrInvalidPlan, g.a.Name(), len(plan), len(g.ids))
	}
	out := make(syncPlan, len(plan))
	for i, a := range plan {
		out[i] = kmsg.NewSyncGroupRequestGroupAssignment()
		out[i].MemberID = g.ids[i]
		out[i].MemberAssignment = EncodeAssignment(a)
	}
	return out, nil
}

// syncPlan is a plan already in SyncGroup form.
type syncPlan []kmsg.SyncGroupRequestGroupAssignment

func (p syncPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment { return p }

// partitionRacks returns the racks of every partition's replicas from the
// client's metadata, or nil if no broker has a rack. Partitions on the same
// racks share one slice.
func partitionRacks(info kgo.BalanceInfo, topics map[string]int32) map[string][][]string {
	if info.Brokers == nil || info.Topics == nil {
		return nil
	}
	rackOf := make(map[int32]string)
	for id, br := range info.Brokers() {
		if br.Rack != nil && *br.Rack != "" {
			rackOf[id] = *br.Rack
		}
	}
	if len(rackOf) == 0 {
		return nil
	}
	shared := make(map[string][]string)
	out := make(map[string][][]string, len(topics))
	var racks []string
	for topic, md := range info.Topics() {
		n := topics[topic]
		if n <= 0 {
			continue
		}
		per := make([][]string, n)
		for _, p := range md.Partitions {
			if p.Partition < 0 || p.Partition >= n {
				continue
			}
			racks = racks[:0]
			replicas := p.Replicas
			if len(replicas) == 0 {
				replicas = []int32{p.Leader}
			}
			for _, r := range replicas {
				if rack, ok := rackOf[r]; ok && !slices.Contains(racks, rack) {
					racks = append(racks, rack)
				}
			}
			slices.Sort(racks)
			key := strings.Join(racks, "\x00")
			s, ok := shared[key]
			if !ok {
				s = slices.Clone(racks)
				shared[key] = s
			}
			per[p.Partition] = s
		}
		out[topic] = per
	}
	return out
}
