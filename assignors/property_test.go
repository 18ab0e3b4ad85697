package assignors_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kcoord/kcoord/assignors"
)

// TestStickyProperties checks the sticky assignors over generations of
// random groups with mixed subscriptions, members leaving, joining, changing
// subscription and rejoining stale:
//
//   - every subscribed partition is assigned exactly once, to a subscriber;
//   - members with identical subscriptions differ by at most one partition,
//     and no partition can move to a member two below its owner (the most
//     even load vector);
//   - no partition moves unless balance needs it: no chain of moved
//     partitions could go back to their previous owners without making the
//     balance worse, and a group that changed nothing keeps everything;
//   - for small groups, the sum of squared loads and the partitions kept
//     equal the optimum of an exact min-cost flow;
//   - cooperative: a partition another member claims is never given in the
//     same generation, and the rebalance after the revocations assigns the
//     rest without moving anything.
func TestStickyProperties(t *testing.T) {
	t.Parallel()
	sizes := []struct {
		name                                string
		seeds, members, topics, parts, subs int
		oracle, racks                       bool
	}{
		{"tiny", 300, 5, 3, 5, 3, true, false},
		{"small", 150, 8, 5, 6, 4, true, false},
		{"racks", 150, 8, 5, 6, 4, true, true},
		{"medium", 6, 120, 30, 40, 6, false, false},
		{"wide", 3, 60, 80, 10, 40, false, true},
	}
	for _, size := range sizes {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			for seed := range size.seeds {
				rng := rand.New(rand.NewPCG(uint64(seed), 42))
				g := randomGroup(rng, size.members, size.topics, size.parts, size.subs)
				if size.racks {
					withRacks(rng, g)
				}
				runGenerations(t, fmt.Sprintf("seed %d", seed), rng, g, 4, 20, size.oracle)
			}
		})
	}
}

// TestStickyPropertiesLarge checks the same properties on groups up to
// 2000 members and a million partitions. It takes minutes; set
// KCOORD_LARGE_TESTS=1 to run it.
func TestStickyPropertiesLarge(t *testing.T) {
	if os.Getenv("KCOORD_LARGE_TESTS") == "" {
		t.Skip("set KCOORD_LARGE_TESTS=1 to run")
	}
	for _, size := range []struct{ members, topics, parts, subs int }{
		{2000, 500, 4000, 1},  // about 1M partitions, one subscription
		{2000, 500, 4000, 2},  // two subscriptions
		{2000, 500, 4000, 12}, // mixed
		{1000, 2000, 100, 200},
	} {
		name := fmt.Sprintf("%dm_%dt_%dsubs", size.members, size.topics, size.subs)
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(size.subs)))
			g := randomGroup(rng, size.members, size.topics, size.parts, size.subs)
			runGenerations(t, name, rng, g, 2, 10, false)
		})
	}
}

func runGenerations(t *testing.T, name string, rng *rand.Rand, g *assignors.Group, generations, churn int, exact bool) {
	t.Helper()
	start := time.Now()
	out, err := assignors.Sticky().Assign(g)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	checkSticky(t, g, out, exact)
	for gen := int32(1); gen <= int32(generations); gen++ {
		g = evolve(rng, g, out, gen, churn)
		label := fmt.Sprintf("%s gen %d", name, gen)
		eager, err := assignors.Sticky().Assign(g)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		own := checkSticky(t, g, eager, exact)
		coop, err := assignors.CooperativeSticky().Assign(g)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		checkCooperative(t, g, own, coop, gen)
		out = eager
	}
	// A group that changed nothing keeps everything.
	for i := range g.Members {
		setOwned(g, i, out[i].Partitions, int32(generations)+1)
	}
	again, err := assignors.Sticky().Assign(g)
	if err != nil {
		t.Fatal(err)
	}
	if n := moves(owners(t, g, out), owners(t, g, again)); n != 0 {
		t.Fatalf("%s: rebalancing an unchanged group moved %d partitions", name, n)
	}
	if testing.Verbose() && time.Since(start) > time.Second {
		t.Logf("%s: %v", name, time.Since(start))
	}
}

// checkSticky checks an eager sticky plan and returns its owners.
func checkSticky(t *testing.T, g *assignors.Group, out []assignors.Assignment, exact bool) map[tp]int {
	t.Helper()
	own := owners(t, g, out)
	checkComplete(t, g, own)
	checkEvenPerSubscription(t, g, own)
	checkMostEven(t, g, own)
	prev := previousOwners(g)
	checkNoNeedlessMove(t, g, prev, own)
	if exact {
		wantSq, wantKept := oracle(g, prev)
		kept := 0
		for x, i := range prev {
			if own[x] == i {
				kept++
			}
		}
		if sq := sumSquares(loads(g, own)); sq != wantSq || kept != wantKept {
			t.Fatalf("sum of squared loads %d, kept %d partitions; the optimum is %d, %d (loads %v)", sq, kept, wantSq, wantKept, loads(g, own))
		}
	}
	return own
}

// checkCooperative checks a cooperative plan against the eager plan of the
// same group, then runs the rebalance that follows the revocations.
func checkCooperative(t *testing.T, g *assignors.Group, eager map[tp]int, out []assignors.Assignment, gen int32) {
	t.Helper()
	own := owners(t, g, out)
	claims := map[tp]map[int]int32{} // partition → claimant → generation
	for i, m := range g.Members {
		for _, o := range m.Owned {
			for _, p := range o.Partitions {
				x := tp{o.Topic, p}
				if claims[x] == nil {
					claims[x] = map[int]int32{}
				}
				claims[x][i] = m.Generation
			}
		}
	}
	for x, i := range own {
		if eager[x] != i {
			t.Fatalf("cooperative plan gives %v to %s, the eager one to %s", x, g.Members[i].ID, g.Members[eager[x]].ID)
		}
		for c, gen := range claims[x] {
			if mine, ok := claims[x][i]; c != i && (!ok || mine < gen) {
				t.Fatalf("%v given to %s while %s (generation %d) may still consume it", x, g.Members[i].ID, g.Members[c].ID, gen)
			}
		}
	}
	for x := range eager {
		if _, ok := own[x]; ok {
			continue
		}
		revoked := false
		for c := range claims[x] {
			revoked = revoked || c != eager[x]
		}
		if !revoked {
			t.Fatalf("cooperative plan leaves out %v, which nobody else claims", x)
		}
	}

	// Everybody rejoins owning what it got; the next plan completes the
	// eager one's balance without moving anything.
	next := &assignors.Group{Topics: g.Topics, Members: append([]assignors.Member(nil), g.Members...)}
	for i := range next.Members {
		setOwned(next, i, out[i].Partitions, gen+1)
	}
	follow, err := assignors.CooperativeSticky().Assign(next)
	if err != nil {
		t.Fatal(err)
	}
	final := owners(t, next, follow)
	checkComplete(t, next, final)
	if n := moves(own, final); n != 0 {
		t.Fatalf("the rebalance after the revocations moved %d partitions", n)
	}
	if a, b := sumSquares(loads(g, eager)), sumSquares(loads(next, final)); a != b {
		t.Fatalf("the rebalance after the revocations ends less even (%d) than the plan (%d)", b, a)
	}
}

// TestDeterministic: a plan depends on the group alone, not on the order
// members are listed in, since any member may lead the next rebalance.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	for seed := range 40 {
		rng := newRand(uint64(seed))
		g := randomGroup(rng, 15, 6, 12, 4)
		out, err := assignors.Sticky().Assign(g)
		if err != nil {
			t.Fatal(err)
		}
		g = evolve(rng, g, out, 1, 20)
		for i := range g.Members {
			if rng.IntN(3) == 0 {
				g.Members[i].InstanceID = fmt.Sprintf("instance-%d", rng.IntN(100)+i*100)
				g.Members[i].Rack = fmt.Sprintf("r%d", rng.IntN(3))
			}
		}
		g.Racks = map[string][][]string{}
		for topic, n := range g.Topics {
			g.Racks[topic] = racked(int(n), []string{"r0"}, []string{"r1", "r2"}, []string{"r2"})
		}
		for _, a := range []assignors.Assignor{assignors.Range(), assignors.RoundRobin(), assignors.Sticky(), assignors.CooperativeSticky(), assignors.Random(1)} {
			want, err := a.Assign(g)
			if err != nil {
				t.Fatal(err)
			}
			shuffled := &assignors.Group{Topics: g.Topics, Racks: g.Racks, Members: slices.Clone(g.Members)}
			perm := rng.Perm(len(g.Members))
			for i, j := range perm {
				shuffled.Members[i] = g.Members[j]
			}
			got, err := a.Assign(shuffled)
			if err != nil {
				t.Fatal(err)
			}
			for i, j := range perm {
				if !reflect.DeepEqual(got[i], want[j]) {
					t.Fatalf("seed %d, %s: %s gets %v listed first, %v listed in place", seed, a.Name(), g.Members[j].ID, got[i].Partitions, want[j].Partitions)
				}
			}
		}
	}
}
