package assignors_test

import (
	"fmt"
	"testing"

	"github.com/kcoord/kcoord/assignors"
)

// group returns members m0..m(n-1) subscribed to topics t0..t(topics-1) of
// parts partitions each.
func group(members, topics int, parts int32) *assignors.Group {
	g := &assignors.Group{Topics: map[string]int32{}}
	var names []string
	for i := range topics {
		name := fmt.Sprintf("t%d", i)
		names = append(names, name)
		g.Topics[name] = parts
	}
	for i := range members {
		g.Members = append(g.Members, member(fmt.Sprintf("m%d", i), names...))
	}
	return g
}

// rejoin returns the group's members owning what out gave them in gen.
func rejoin(g *assignors.Group, out []assignors.Assignment, gen int32) *assignors.Group {
	next := &assignors.Group{Topics: g.Topics, Racks: g.Racks, Members: append([]assignors.Member(nil), g.Members...)}
	for i := range next.Members {
		setOwned(next, i, out[i].Partitions, gen)
	}
	return next
}

func assign(t *testing.T, a assignors.Assignor, g *assignors.Group) (map[tp]int, []assignors.Assignment) {
	t.Helper()
	out, err := a.Assign(g)
	if err != nil {
		t.Fatal(err)
	}
	return owners(t, g, out), out
}

// TestStickyMemberLeaves: when a member leaves, the others keep everything
// they had and share its partitions (KIP-54's first example).
func TestStickyMemberLeaves(t *testing.T) {
	for _, a := range []assignors.Assignor{assignors.Sticky(), assignors.CooperativeSticky()} {
		t.Run(a.Name(), func(t *testing.T) {
			g := group(3, 4, 2)
			_, out := assign(t, a, g)
			g = rejoin(g, out, 1)
			before := previousOwners(g)
			g.Members = g.Members[:2] // m2 leaves
			own, _ := assign(t, a, g)
			checkComplete(t, g, own)
			checkEvenPerSubscription(t, g, own)
			for x, i := range before {
				if i < 2 && own[x] != i {
					t.Errorf("%v moved from %s", x, g.Members[i].ID)
				}
			}
		})
	}
}

// TestStickyMemberJoins: when members join, only as many partitions move as
// balance needs, taken from the members with the most.
func TestStickyMemberJoins(t *testing.T) {
	g := group(3, 1, 10) // 4, 3, 3
	_, out := assign(t, assignors.Sticky(), g)
	g = rejoin(g, out, 1)
	g.Members = append(g.Members, member("m3", "t0"), member("m4", "t0")) // 2 each now
	own, _ := assign(t, assignors.Sticky(), g)
	checkEvenPerSubscription(t, g, own)
	if n := moves(previousOwners(g), own); n != 4 {
		t.Errorf("%d partitions moved; balance needs 4 (2+1+1)", n)
	}
}

// TestStickyMixedSubscriptions: a member subscribed to one topic of many
// still gets its fair share, from that topic (franz-go's large_imbalance,
// small).
func TestStickyMixedSubscriptions(t *testing.T) {
	g := group(20, 10, 20) // 200 partitions
	g.Members = append(g.Members, member("single", "t0"))
	own, _ := assign(t, assignors.Sticky(), g)
	checkComplete(t, g, own)
	checkMostEven(t, g, own)
	l := loads(g, own)
	if got := l[len(l)-1]; got != 9 && got != 10 {
		t.Errorf("the single-topic member got %d partitions, want 9 or 10 (200 over 21)", got)
	}
}

// TestStickyGenerations: when members disagree about who owns a partition,
// the claim of the highest generation stands (KIP-341, KIP-792), and two
// claims in the same generation both lose (as in Kafka).
func TestStickyGenerations(t *testing.T) {
	for _, a := range []assignors.Assignor{assignors.Sticky(), assignors.CooperativeSticky()} {
		t.Run(a.Name(), func(t *testing.T) {
			g := group(3, 1, 3)
			owned := func(ps ...int32) []assignors.TopicPartitions {
				return []assignors.TopicPartitions{{Topic: "t0", Partitions: ps}}
			}
			setOwned(g, 0, owned(0), 5)    // current
			setOwned(g, 1, owned(0, 1), 4) // stale: missed generation 5
			setOwned(g, 2, owned(2), 5)
			own, _ := assign(t, a, g)
			if own[tp{"t0", 0}] != 0 {
				t.Errorf("t0/0 went to %s, not to m0, whose claim is newer", g.Members[own[tp{"t0", 0}]].ID)
			}
			if _, ok := own[tp{"t0", 2}]; ok && own[tp{"t0", 2}] != 2 {
				t.Errorf("t0/2 moved from m2")
			}
		})
	}
	t.Run("same generation", func(t *testing.T) {
		g := group(2, 1, 2)
		both := []assignors.TopicPartitions{{Topic: "t0", Partitions: []int32{0, 1}}}
		setOwned(g, 0, both, 3)
		setOwned(g, 1, both, 3)
		if prev := previousOwners(g); len(prev) != 0 {
			t.Fatalf("claims in the same generation should cancel out: %v", prev)
		}
		own, _ := assign(t, assignors.CooperativeSticky(), g)
		// Each member is a claimant in the top generation: giving
		// either partition to either creates no new overlap.
		if len(own) != 2 {
			t.Errorf("%d of 2 partitions assigned", len(own))
		}
	})
}

// TestCooperativeRevokesBeforeReassigning walks KIP-429's protocol: a new
// member gets nothing the others still own; they revoke what they lost and
// rejoin, and the next rebalance gives it to the new member.
func TestCooperativeRevokesBeforeReassigning(t *testing.T) {
	a := assignors.CooperativeSticky()
	g := group(2, 1, 6)
	_, out := assign(t, a, g)
	g = rejoin(g, out, 1)
	g.Members = append(g.Members, member("m2", "t0"))

	own, out := assign(t, a, g)
	if l := loads(g, own); l[0] != 2 || l[1] != 2 || l[2] != 0 {
		t.Fatalf("first rebalance loads %v, want [2 2 0]: m0 and m1 each revoke one, m2 waits", l)
	}
	g = rejoin(g, out, 2)
	own, _ = assign(t, a, g)
	checkComplete(t, g, own)
	if l := loads(g, own); l[0] != 2 || l[1] != 2 || l[2] != 2 {
		t.Fatalf("second rebalance loads %v, want [2 2 2]", l)
	}
}

// TestCooperativeStaleClaim: a member that missed rebalances rejoins still
// claiming a partition another member now consumes. Even if the plan gives
// it back, it must wait for the current owner's revocation (KIP-792).
func TestCooperativeStaleClaim(t *testing.T) {
	g := group(2, 1, 2)
	setOwned(g, 0, []assignors.TopicPartitions{{Topic: "t0", Partitions: []int32{0, 1}}}, 2) // stale
	setOwned(g, 1, []assignors.TopicPartitions{{Topic: "t0", Partitions: []int32{1}}}, 3)
	own, _ := assign(t, assignors.CooperativeSticky(), g)
	if i, ok := own[tp{"t0", 1}]; ok && i != 1 {
		t.Errorf("t0/1 given to %s while m1 (generation 3) consumes it", g.Members[i].ID)
	}
}

// TestStickyRacks: among equally balanced and sticky choices, partitions go
// to members in a rack of one of their replicas (KIP-881).
func TestStickyRacks(t *testing.T) {
	r0, r1, r2 := []string{"r0"}, []string{"r1"}, []string{"r2"}
	g := &assignors.Group{
		Topics: map[string]int32{"a": 30, "b": 30},
		Racks:  map[string][][]string{"a": racked(30, r0, r1, r2), "b": racked(30, r2, r0, r1)},
	}
	for i := range 6 {
		g.Members = append(g.Members, inRack(member(fmt.Sprintf("m%d", i), "a", "b"), fmt.Sprintf("r%d", i%3)))
	}
	for _, a := range []assignors.Assignor{assignors.Sticky(), assignors.CooperativeSticky()} {
		own, _ := assign(t, a, g)
		checkComplete(t, g, own)
		checkEvenPerSubscription(t, g, own)
		for x, i := range own {
			if rack := g.Racks[x.topic][x.part][0]; rack != g.Members[i].Rack {
				t.Fatalf("%s: %v (rack %s) went to %s in %s", a.Name(), x, rack, g.Members[i].ID, g.Members[i].Rack)
			}
		}
	}

	// Stickiness outranks racks: a member keeps what it owns off-rack.
	g2 := group(2, 1, 4)
	g2.Racks = map[string][][]string{"t0": racked(4, r0)}
	g2.Members[0].Rack, g2.Members[1].Rack = "r0", "r1"
	setOwned(g2, 1, []assignors.TopicPartitions{{Topic: "t0", Partitions: []int32{0, 1}}}, 1)
	own, _ := assign(t, assignors.Sticky(), g2)
	if own[tp{"t0", 0}] != 1 || own[tp{"t0", 1}] != 1 {
		t.Errorf("m1 lost partitions it owned to a rack-local member: %v", own)
	}
}

// TestStickySubscriptionChange: when a member drops a topic, its partitions
// of that topic move, and others only as far as balance needs.
func TestStickySubscriptionChange(t *testing.T) {
	g := group(2, 2, 4)
	_, out := assign(t, assignors.Sticky(), g)
	g = rejoin(g, out, 1)
	g.Members[1].Topics = []string{"t0"}
	own, _ := assign(t, assignors.Sticky(), g)
	checkComplete(t, g, own)
	checkMostEven(t, g, own)
	checkNoNeedlessMove(t, g, previousOwners(g), own)
	for x, i := range own { // 4 and 4: m1 can only hold t0
		if want := map[string]int{"t0": 1, "t1": 0}[x.topic]; i != want {
			t.Errorf("%v went to %s", x, g.Members[i].ID)
		}
	}
}

func TestStickyUnknownTopicsAndEmptyGroups(t *testing.T) {
	for _, a := range []assignors.Assignor{assignors.Sticky(), assignors.CooperativeSticky(), assignors.Range(), assignors.RoundRobin()} {
		out, err := a.Assign(&assignors.Group{Topics: map[string]int32{"t": 3}})
		if err != nil || len(out) != 0 {
			t.Errorf("%s, no members: %v, %v", a.Name(), out, err)
		}
		g := &assignors.Group{Topics: map[string]int32{"t": 3}, Members: []assignors.Member{member("a", "gone"), member("b")}}
		setOwned(g, 0, []assignors.TopicPartitions{{Topic: "gone", Partitions: []int32{0}}, {Topic: "t", Partitions: []int32{7, -1}}}, 2)
		out, err = a.Assign(g)
		if err != nil || out[0].NumPartitions()+out[1].NumPartitions() != 0 {
			t.Errorf("%s, nothing to assign: %v, %v", a.Name(), out, err)
		}
		g.Members = append(g.Members, member("a", "t"))
		if _, err := a.Assign(g); err == nil {
			t.Errorf("%s: no error for a duplicate member id", a.Name())
		}
	}
}
