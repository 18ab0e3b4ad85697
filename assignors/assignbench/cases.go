package assignbench

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/assignors"
)

// Case is one group to balance, as a group leader receives it.
type Case struct {
	Name string
	// Topics maps each topic to its partition count.
	Topics map[string]int32
	// Members are the JoinGroup members, sorted by member id as kgo sorts
	// them before balancing, with cooperative-sticky metadata (v3, owned
	// partitions, generation).
	Members []kmsg.JoinGroupResponseMember
	// Before is what each member owned going in: member → topic →
	// partitions.
	Before map[string]map[string][]int32
}

// CaseNames lists the cases Cases builds, in order.
var CaseNames = []string{"large", "large_imbalance", "medium", "large_leave", "large_join", "large_imbalance_leave"}

// Cases builds the named cases (all of CaseNames when names is empty):
//
//   - large: 500 topics × 2000 partitions, 2000 members subscribed to all;
//   - large_imbalance: large plus one member subscribed to one topic;
//   - medium: 50 topics × 1000 partitions, 1000 members;
//   - large_leave: large balanced round robin, after every tenth member
//     left (a rebalance after 10% of the members leave);
//   - large_join: large balanced round robin, after 200 members joined;
//   - large_imbalance_leave: large_imbalance balanced by kcoord, after
//     every tenth member left (a rebalance with mixed subscriptions).
func Cases(names ...string) ([]Case, error) {
	if len(names) == 0 {
		names = CaseNames
	}
	var out []Case
	for _, name := range names {
		var c Case
		switch name {
		case "large":
			c = fresh(500, 2000, 2000, false)
		case "large_imbalance":
			c = fresh(500, 2000, 2000, true)
		case "medium":
			c = fresh(50, 1000, 1000, false)
		case "large_leave":
			c = rebalanced(500, 2000, 2000, func(i int) bool { return i%10 != 9 }, 0)
		case "large_join":
			c = rebalanced(500, 2000, 2000, func(int) bool { return true }, 200)
		case "large_imbalance_leave":
			var err error
			if c, err = leave(fresh(500, 2000, 2000, true), func(i int) bool { return i%10 != 9 }); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("unknown case %q (have %v)", name, CaseNames)
		}
		c.Name = name
		out = append(out, c)
	}
	return out, nil
}

func topicNames(topics, partitions int) (map[string]int32, []string) {
	m := make(map[string]int32, topics)
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("t%03d", i)
		m[names[i]] = int32(partitions)
	}
	return m, names
}

func memberID(i int) string { return fmt.Sprintf("member-%05d", i) }

// member encodes a cooperative-sticky member's JoinGroup metadata.
func member(id string, topics []string, owned map[string][]int32, generation int32) kmsg.JoinGroupResponseMember {
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID = id
	m.ProtocolMetadata = assignors.Balancer(assignors.CooperativeSticky()).JoinGroupMetadata(topics, owned, generation)
	return m
}

func fresh(topics, partitions, members int, imbalance bool) Case {
	c := Case{Before: map[string]map[string][]int32{}}
	var names []string
	c.Topics, names = topicNames(topics, partitions)
	for i := range members {
		c.Members = append(c.Members, member(memberID(i), names, nil, -1))
	}
	if imbalance {
		c.Members = append(c.Members, member(memberID(members), names[:1], nil, -1))
	}
	return c
}

// rebalanced is a group that was balanced round robin over members (the
// layout Kafka's assignors give a fresh group), of which those kept stay,
// joined by join new members.
func rebalanced(topics, partitions, members int, kept func(int) bool, join int) Case {
	c := Case{Before: map[string]map[string][]int32{}}
	var names []string
	c.Topics, names = topicNames(topics, partitions)
	owned := make([]map[string][]int32, members)
	for i := range owned {
		owned[i] = map[string][]int32{}
	}
	k := 0
	for _, t := range names {
		for p := range int32(partitions) {
			owned[k%members][t] = append(owned[k%members][t], p)
			k++
		}
	}
	for i := range members {
		if kept(i) {
			id := memberID(i)
			c.Members = append(c.Members, member(id, names, owned[i], 7))
			c.Before[id] = owned[i]
		}
	}
	for i := range join {
		c.Members = append(c.Members, member(memberID(members+i), names, nil, -1))
	}
	slices.SortFunc(c.Members, func(a, b kmsg.JoinGroupResponseMember) int {
		switch {
		case a.MemberID < b.MemberID:
			return -1
		case a.MemberID > b.MemberID:
			return 1
		}
		return 0
	})
	return c
}

// leave balances c, then makes the group after the members not kept left,
// the others owning what they got.
func leave(c Case, kept func(int) bool) (Case, error) {
	b := assignors.Balancer(assignors.CooperativeSticky())
	plan, err := Balance(b, c.Members, c.Topics)
	if err != nil {
		return c, err
	}
	got, _, err := decode(plan)
	if err != nil {
		return c, err
	}
	next := Case{Topics: c.Topics, Before: map[string]map[string][]int32{}}
	for i, m := range c.Members {
		if !kept(i) {
			continue
		}
		s, err := assignors.DecodeSubscription(m.ProtocolMetadata)
		if err != nil {
			return c, err
		}
		next.Members = append(next.Members, member(m.MemberID, s.Topics, got[m.MemberID], 7))
		next.Before[m.MemberID] = got[m.MemberID]
	}
	return next, nil
}
