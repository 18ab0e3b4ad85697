package assignors_test

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/kcoord/kcoord/assignors"
)

// asGroup is a target group as the helpers' classic Group: each member owns
// its current target, every member in the same generation, so the helpers'
// previous owners are the targets (a partition in two targets has none).
func asGroup(tg *assignors.TargetGroup) *assignors.Group {
	g := &assignors.Group{Topics: tg.Topics}
	for _, m := range tg.Members {
		g.Members = append(g.Members, assignors.Member{ID: m.ID, InstanceID: m.InstanceID,
			Subscription: assignors.Subscription{Topics: m.Topics, Owned: m.Target, Generation: 1}})
	}
	return g
}

// asTargetGroup is the target group of a classic Group, its members' owned
// partitions taken as their targets.
func asTargetGroup(g *assignors.Group) *assignors.TargetGroup {
	tg := &assignors.TargetGroup{Topics: g.Topics}
	for _, m := range g.Members {
		tg.Members = append(tg.Members, assignors.TargetMember{ID: m.ID, InstanceID: m.InstanceID, Topics: m.Topics, Target: m.Owned})
	}
	return tg
}

// withTargets gives every member of tg its part of a plan as its target.
func withTargets(tg *assignors.TargetGroup, out []assignors.Assignment) {
	for i := range tg.Members {
		tg.Members[i].Target = out[i].Partitions
	}
}

func target(t *testing.T, a assignors.ServerAssignor, tg *assignors.TargetGroup) []assignors.Assignment {
	t.Helper()
	out, err := a.Target(tg)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(tg.Members) {
		t.Fatalf("%s: %d assignments for %d members", a.Name(), len(out), len(tg.Members))
	}
	return out
}

func one(topic string, parts ...int32) []assignors.TopicPartitions {
	return []assignors.TopicPartitions{{Topic: topic, Partitions: parts}}
}

// TestUniformKeepsTargetsWhenMembersComeAndGo is a three-member group on a
// 12-partition topic: four each; a fourth member takes one from each of
// the others and nothing else moves; when a member leaves, only its
// partitions move.
func TestUniformKeepsTargetsWhenMembersComeAndGo(t *testing.T) {
	topics := map[string]int32{"orders": 12}
	tg := &assignors.TargetGroup{Topics: topics}
	for _, id := range []string{"a", "b", "c"} {
		tg.Members = append(tg.Members, assignors.TargetMember{ID: id, Topics: []string{"orders"}})
	}
	out := target(t, assignors.Uniform(), tg)
	g := asGroup(tg)
	own := owners(t, g, out)
	checkComplete(t, g, own)
	if l := loads(g, own); !slices.Equal(l, []int{4, 4, 4}) {
		t.Fatalf("loads %v, want 4 each", l)
	}

	withTargets(tg, out)
	tg.Members = append(tg.Members, assignors.TargetMember{ID: "d", Topics: []string{"orders"}})
	g = asGroup(tg)
	prev := previousOwners(g)
	out = target(t, assignors.Uniform(), tg)
	own = owners(t, g, out)
	checkComplete(t, g, own)
	if l := loads(g, own); !slices.Equal(l, []int{3, 3, 3, 3}) {
		t.Fatalf("loads %v after d joined, want 3 each", l)
	}
	if n := moves(prev, own); n != 3 {
		t.Fatalf("d joining moved %d partitions, want the 3 it gets", n)
	}

	withTargets(tg, out)
	tg.Members = slices.Delete(tg.Members, 1, 2) // b leaves
	g = asGroup(tg)
	prev = previousOwners(g)
	out = target(t, assignors.Uniform(), tg)
	own = owners(t, g, out)
	checkComplete(t, g, own)
	if l := loads(g, own); !slices.Equal(l, []int{4, 4, 4}) {
		t.Fatalf("loads %v after b left, want 4 each", l)
	}
	if n := moves(prev, own); n != 0 {
		t.Fatalf("b leaving took %d partitions from members that stayed", n)
	}
}

// TestUniformKeepsAnUnevenSplit: with 10 partitions over three members, the
// member whose target holds four keeps them. (Kafka's homogeneous builder
// gives the extra partition to the first member it iterates instead, and
// would move one here.)
func TestUniformKeepsAnUnevenSplit(t *testing.T) {
	tg := &assignors.TargetGroup{Topics: map[string]int32{"t": 10}, Members: []assignors.TargetMember{
		{ID: "a", Topics: []string{"t"}, Target: one("t", 0, 1, 2)},
		{ID: "b", Topics: []string{"t"}, Target: one("t", 3, 4, 5)},
		{ID: "c", Topics: []string{"t"}, Target: one("t", 6, 7, 8, 9)},
	}}
	out := target(t, assignors.Uniform(), tg)
	for i, m := range tg.Members {
		if !reflect.DeepEqual(out[i].Partitions, m.Target) {
			t.Errorf("%s: got %v, want its target %v kept", m.ID, out[i].Partitions, m.Target)
		}
	}
}

// TestUniformDropsWhatATargetNoLongerMay: partitions of a topic the member
// left, of a topic that is gone, and beyond a topic's partition count are
// not kept; a topic nobody can resolve is assigned to nobody.
func TestUniformDropsWhatATargetNoLongerMay(t *testing.T) {
	tg := &assignors.TargetGroup{Topics: map[string]int32{"kept": 2, "left": 2}, Members: []assignors.TargetMember{{
		ID:     "a",
		Topics: []string{"kept", "missing"},
		Target: []assignors.TopicPartitions{{Topic: "gone", Partitions: []int32{0}}, {Topic: "kept", Partitions: []int32{0, 1, 7}}, {Topic: "left", Partitions: []int32{0, 1}}},
	}}}
	out := target(t, assignors.Uniform(), tg)
	if want := one("kept", 0, 1); !reflect.DeepEqual(out[0].Partitions, want) {
		t.Fatalf("got %v, want %v", out[0].Partitions, want)
	}
}

// TestUniformBalancesMixedSubscriptions: members with different
// subscriptions still end within one partition of each other wherever the
// subscriptions allow it, over generations of members joining, leaving and
// changing subscription; nothing moves that balance does not need, and for
// small groups the loads and the partitions kept are the optimum of an
// exact min-cost flow.
func TestUniformBalancesMixedSubscriptions(t *testing.T) {
	t.Parallel()
	for _, size := range []struct {
		name                                string
		seeds, members, topics, parts, subs int
		oracle                              bool
	}{
		{"tiny", 200, 5, 3, 5, 3, true},
		{"small", 100, 8, 5, 6, 4, true},
		{"medium", 5, 120, 30, 40, 6, false},
	} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			for seed := range size.seeds {
				rng := rand.New(rand.NewPCG(uint64(seed), 848))
				g := randomGroup(rng, size.members, size.topics, size.parts, size.subs)
				tg := asTargetGroup(g)
				for gen := range int32(4) {
					out := target(t, assignors.Uniform(), tg)
					g = asGroup(tg)
					own := owners(t, g, out)
					checkComplete(t, g, own)
					checkEvenPerSubscription(t, g, own)
					checkMostEven(t, g, own)
					prev := previousOwners(g)
					checkNoNeedlessMove(t, g, prev, own)
					if size.oracle {
						wantSq, wantKept := oracle(g, prev)
						if sq := sumSquares(loads(g, own)); sq != wantSq {
							t.Fatalf("seed %d gen %d: sum of squared loads %d, optimum %d", seed, gen, sq, wantSq)
						}
						if kept := len(prev) - moves(prev, own); kept != wantKept {
							t.Fatalf("seed %d gen %d: kept %d partitions, optimum %d", seed, gen, kept, wantKept)
						}
					}
					// The next generation: targets from this plan, then churn.
					// evolve may make a member claim another's partitions a
					// generation back; as targets those are two claims of the
					// same partition, and neither stands.
					g = evolve(rng, g, out, gen+1, 20)
					tg = asTargetGroup(g)
				}
				withTargets(tg, target(t, assignors.Uniform(), tg))
				again := target(t, assignors.Uniform(), tg)
				for i, m := range tg.Members {
					if !reflect.DeepEqual(again[i].Partitions, m.Target) {
						t.Fatalf("seed %d: an unchanged group moved %s's partitions: %v, target %v", seed, m.ID, again[i].Partitions, m.Target)
					}
				}
			}
		})
	}
}

// TestServerAssignorsAreDeterministic: the same group with its members
// listed in another order gets the same plan.
func TestServerAssignorsAreDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	tg := asTargetGroup(randomGroup(rng, 40, 12, 20, 5))
	for _, a := range []assignors.ServerAssignor{assignors.Uniform(), assignors.ServerRange()} {
		withTargets(tg, target(t, a, tg))
		byID := func(tg *assignors.TargetGroup, out []assignors.Assignment) map[string][]assignors.TopicPartitions {
			m := map[string][]assignors.TopicPartitions{}
			for i, mem := range tg.Members {
				m[mem.ID] = out[i].Partitions
			}
			return m
		}
		want := byID(tg, target(t, a, tg))
		shuffled := &assignors.TargetGroup{Topics: tg.Topics, Members: slices.Clone(tg.Members)}
		rng.Shuffle(len(shuffled.Members), func(i, j int) {
			shuffled.Members[i], shuffled.Members[j] = shuffled.Members[j], shuffled.Members[i]
		})
		if got := byID(shuffled, target(t, a, shuffled)); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the plan depends on the order members are listed in", a.Name())
		}
	}
}

// TestServerRangeIsKafkasLayout is Kafka's RangeAssignorTest scenario of
// three members with three different subscriptions, and co-partitioning.
func TestServerRangeIsKafkasLayout(t *testing.T) {
	tg := &assignors.TargetGroup{Topics: map[string]int32{"t1": 3, "t2": 3, "t3": 2}, Members: []assignors.TargetMember{
		{ID: "C", Topics: []string{"t2", "t3"}},
		{ID: "A", Topics: []string{"t1", "t2"}},
		{ID: "B", Topics: []string{"t3"}},
	}}
	out := target(t, assignors.ServerRange(), tg)
	want := [][]assignors.TopicPartitions{
		{{Topic: "t2", Partitions: []int32{2}}, {Topic: "t3", Partitions: []int32{1}}},
		{{Topic: "t1", Partitions: []int32{0, 1, 2}}, {Topic: "t2", Partitions: []int32{0, 1}}},
		{{Topic: "t3", Partitions: []int32{0}}},
	}
	for i := range want {
		if !reflect.DeepEqual(out[i].Partitions, want[i]) {
			t.Errorf("%s: got %v, want %v", tg.Members[i].ID, out[i].Partitions, want[i])
		}
	}

	// Co-partitioned: two topics of 5 over two members, the same ranges of
	// each; static members first, by instance id, whatever their member ids.
	tg = &assignors.TargetGroup{Topics: map[string]int32{"left": 5, "right": 5}, Members: []assignors.TargetMember{
		{ID: "a-dynamic", Topics: []string{"left", "right"}},
		{ID: "z", InstanceID: "i-2", Topics: []string{"left", "right"}},
		{ID: "y", InstanceID: "i-1", Topics: []string{"left", "right"}},
	}}
	out = target(t, assignors.ServerRange(), tg)
	want = [][]assignors.TopicPartitions{
		{{Topic: "left", Partitions: []int32{4}}, {Topic: "right", Partitions: []int32{4}}},
		{{Topic: "left", Partitions: []int32{2, 3}}, {Topic: "right", Partitions: []int32{2, 3}}},
		{{Topic: "left", Partitions: []int32{0, 1}}, {Topic: "right", Partitions: []int32{0, 1}}},
	}
	for i := range want {
		if !reflect.DeepEqual(out[i].Partitions, want[i]) {
			t.Errorf("%s: got %v, want %v", tg.Members[i].ID, out[i].Partitions, want[i])
		}
	}

	// A static member that comes back under a new member id gets its ranges
	// back (Kafka's testStaticMembership).
	before := out[2].Partitions
	tg.Members[2].ID = "y-again"
	if again := target(t, assignors.ServerRange(), tg); !reflect.DeepEqual(again[2].Partitions, before) {
		t.Fatalf("static member back with a new id: %v, had %v", again[2].Partitions, before)
	}
}

func TestServerAssignorNamed(t *testing.T) {
	for name, want := range map[string]string{"": "uniform", "uniform": "uniform", "range": "range"} {
		a, err := assignors.ServerAssignorNamed(name)
		if err != nil || a.Name() != want {
			t.Errorf("ServerAssignorNamed(%q) = %v, %v; want %s", name, a, err, want)
		}
	}
	if a, err := assignors.ServerAssignorNamed(assignors.DefaultServerAssignor); err != nil || a.Name() != assignors.DefaultServerAssignor {
		t.Errorf("the default server assignor %q is not built in: %v", assignors.DefaultServerAssignor, err)
	}
	for _, name := range []string{"sticky", "cooperative-sticky", "Uniform", "org.apache.kafka.coordinator.group.assignor.UniformAssignor"} {
		if _, err := assignors.ServerAssignorNamed(name); !errors.Is(err, assignors.ErrUnknownServerAssignor) {
			t.Errorf("ServerAssignorNamed(%q): %v, want ErrUnknownServerAssignor", name, err)
		}
	}
}

func TestServerAssignorsRefuseDuplicateMembers(t *testing.T) {
	tg := &assignors.TargetGroup{Topics: map[string]int32{"t": 2}, Members: []assignors.TargetMember{
		{ID: "a", Topics: []string{"t"}}, {ID: "a", Topics: []string{"t"}},
	}}
	for _, a := range []assignors.ServerAssignor{assignors.Uniform(), assignors.ServerRange()} {
		if _, err := a.Target(tg); !errors.Is(err, assignors.ErrDuplicateMember) {
			t.Errorf("%s: %v, want ErrDuplicateMember", a.Name(), err)
		}
	}
}
