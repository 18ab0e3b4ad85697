package groups

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

var (
	topicA = topicID{1}
	topicB = topicID{2}
)

// tps builds topicPartitions from topic, partitions... pairs.
func tps(pairs ...any) topicPartitions {
	var out topicPartitions
	for i := 0; i < len(pairs); i += 2 {
		out = out.add(pairs[i].(topicID), pairs[i+1].([]int32))
	}
	if out == nil {
		return topicPartitions{}
	}
	return out
}

func free(topicID, int32) int32 { return -1 }

func checkReconciled(t *testing.T, got, want reconciled) {
	t.Helper()
	norm := func(tp topicPartitions) topicPartitions {
		if len(tp) == 0 {
			return nil
		}
		return tp
	}
	got.assigned, got.pendingRevocation = norm(got.assigned), norm(got.pendingRevocation)
	want.assigned, want.pendingRevocation = norm(want.assigned), norm(want.pendingRevocation)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reconciled to\n  %s epoch %d (previous %d) assigned %v pending %v\nwant\n  %s epoch %d (previous %d) assigned %v pending %v",
			got.state, got.epoch, got.previousEpoch, got.assigned, got.pendingRevocation,
			want.state, want.epoch, want.previousEpoch, want.assigned, want.pendingRevocation)
	}
}

func mustReconcile(t *testing.T, m reconciled, in reconcileInput) reconciled {
	t.Helper()
	next, err := reconcile(m, in)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// The single steps, as Kafka's CurrentAssignmentBuilderTest has them.
func TestReconcileSteps(t *testing.T) {
	stable10 := reconciled{state: reconcileStable, epoch: 10, previousEpoch: 9,
		assigned: tps(topicA, []int32{1, 2, 3}, topicB, []int32{4, 5, 6})}

	t.Run("stable at the target epoch stays", func(t *testing.T) {
		got := mustReconcile(t, stable10, reconcileInput{targetEpoch: 10, target: tps(topicA, []int32{1, 2, 3, 4}), ownerEpoch: free})
		checkReconciled(t, got, stable10)
	})
	t.Run("stable takes free new partitions", func(t *testing.T) {
		got := mustReconcile(t, stable10, reconcileInput{targetEpoch: 11,
			target: tps(topicA, []int32{1, 2, 3, 4}, topicB, []int32{4, 5, 6, 7}), ownerEpoch: free,
			owned: tps(topicA, []int32{1, 2, 3}, topicB, []int32{4, 5, 6})})
		checkReconciled(t, got, reconciled{state: reconcileStable, epoch: 11, previousEpoch: 10,
			assigned: tps(topicA, []int32{1, 2, 3, 4}, topicB, []int32{4, 5, 6, 7})})
	})
	t.Run("stable must give back before it gets anything", func(t *testing.T) {
		got := mustReconcile(t, stable10, reconcileInput{targetEpoch: 11,
			target: tps(topicA, []int32{2, 3, 4}, topicB, []int32{5, 6, 7}), ownerEpoch: free,
			owned: tps(topicA, []int32{1, 2, 3}, topicB, []int32{4, 5, 6})})
		checkReconciled(t, got, reconciled{state: reconcileUnrevoked, epoch: 10, previousEpoch: 10,
			assigned:          tps(topicA, []int32{2, 3}, topicB, []int32{5, 6}),
			pendingRevocation: tps(topicA, []int32{1}, topicB, []int32{4})})
	})
	t.Run("stable waits for partitions another member has", func(t *testing.T) {
		got := mustReconcile(t, stable10, reconcileInput{targetEpoch: 11,
			target:     tps(topicA, []int32{1, 2, 3, 4}, topicB, []int32{4, 5, 6, 7}),
			ownerEpoch: func(topicID, int32) int32 { return 10 },
			owned:      tps(topicA, []int32{1, 2, 3}, topicB, []int32{4, 5, 6})})
		checkReconciled(t, got, reconciled{state: reconcileUnreleased, epoch: 11, previousEpoch: 10,
			assigned: tps(topicA, []int32{1, 2, 3}, topicB, []int32{4, 5, 6})})
	})
	t.Run("a member that already let go of what it loses moves on at once", func(t *testing.T) {
		got := mustReconcile(t, stable10, reconcileInput{targetEpoch: 11,
			target:     tps(topicA, []int32{2, 3, 4}, topicB, []int32{5, 6, 7}),
			ownerEpoch: func(topicID, int32) int32 { return 10 },
			owned:      tps(topicA, []int32{2, 3}, topicB, []int32{5, 6})})
		checkReconciled(t, got, reconciled{state: reconcileUnreleased, epoch: 11, previousEpoch: 10,
			assigned: tps(topicA, []int32{2, 3}, topicB, []int32{5, 6})})
	})

	unrevoked10 := reconciled{state: reconcileUnrevoked, epoch: 10, previousEpoch: 10,
		assigned:          tps(topicA, []int32{2, 3}, topicB, []int32{5, 6}),
		pendingRevocation: tps(topicA, []int32{1}, topicB, []int32{4})}
	t.Run("unrevoked waits while it still owns what it gives back", func(t *testing.T) {
		in := reconcileInput{targetEpoch: 11, target: tps(topicA, []int32{2, 3}, topicB, []int32{5, 6}), ownerEpoch: free,
			owned: tps(topicA, []int32{1, 2, 3}, topicB, []int32{5, 6})}
		checkReconciled(t, mustReconcile(t, unrevoked10, in), unrevoked10)
		in.owned = nil // a heartbeat that does not say what it owns revoked nothing
		checkReconciled(t, mustReconcile(t, unrevoked10, in), unrevoked10)
	})
	t.Run("unrevoked moves to the target once it gave back", func(t *testing.T) {
		got := mustReconcile(t, unrevoked10, reconcileInput{targetEpoch: 11,
			target: tps(topicA, []int32{2, 3}, topicB, []int32{5, 6}), ownerEpoch: free,
			owned: tps(topicA, []int32{2, 3}, topicB, []int32{5, 6})})
		checkReconciled(t, got, reconciled{state: reconcileStable, epoch: 11, previousEpoch: 10,
			assigned: tps(topicA, []int32{2, 3}, topicB, []int32{5, 6})})
	})
	t.Run("unrevoked goes a step at a time when the target moved again", func(t *testing.T) {
		got := mustReconcile(t, unrevoked10, reconcileInput{targetEpoch: 12,
			target: tps(topicA, []int32{3}, topicB, []int32{6}), ownerEpoch: free,
			owned: tps(topicA, []int32{2, 3}, topicB, []int32{5, 6})})
		checkReconciled(t, got, reconciled{state: reconcileUnrevoked, epoch: 11, previousEpoch: 10,
			assigned:          tps(topicA, []int32{3}, topicB, []int32{6}),
			pendingRevocation: tps(topicA, []int32{2}, topicB, []int32{5})})
	})

	unreleased11 := reconciled{state: reconcileUnreleased, epoch: 11, previousEpoch: 11,
		assigned: tps(topicA, []int32{1, 2, 3}, topicB, []int32{4, 5, 6})}
	t.Run("unreleased gets what was released", func(t *testing.T) {
		got := mustReconcile(t, unreleased11, reconcileInput{targetEpoch: 11,
			target: tps(topicA, []int32{1, 2, 3, 4}, topicB, []int32{4, 5, 6, 7}), ownerEpoch: free,
			owned: tps(topicA, []int32{1, 2, 3}, topicB, []int32{4, 5, 6})})
		checkReconciled(t, got, reconciled{state: reconcileStable, epoch: 11, previousEpoch: 11,
			assigned: tps(topicA, []int32{1, 2, 3, 4}, topicB, []int32{4, 5, 6, 7})})
	})
	t.Run("unreleased keeps waiting", func(t *testing.T) {
		in := reconcileInput{targetEpoch: 11, target: tps(topicA, []int32{1, 2, 3, 4}, topicB, []int32{4, 5, 6, 7}),
			ownerEpoch: func(topicID, int32) int32 { return 10 }, owned: tps(topicA, []int32{1, 2, 3}, topicB, []int32{4, 5, 6})}
		checkReconciled(t, mustReconcile(t, unreleased11, in), unreleased11)
	})
	t.Run("unreleased gives back what a newer target takes away", func(t *testing.T) {
		got := mustReconcile(t, unreleased11, reconcileInput{targetEpoch: 12,
			target: tps(topicA, []int32{2, 3}, topicB, []int32{5, 6}), ownerEpoch: free,
			owned: tps(topicA, []int32{1, 2, 3}, topicB, []int32{4, 5, 6})})
		checkReconciled(t, got, reconciled{state: reconcileUnrevoked, epoch: 11, previousEpoch: 11,
			assigned:          tps(topicA, []int32{2, 3}, topicB, []int32{5, 6}),
			pendingRevocation: tps(topicA, []int32{1}, topicB, []int32{4})})
	})

	t.Run("a state this version does not know fences a member that owns partitions", func(t *testing.T) {
		unknown := reconciled{state: reconcileState(99), epoch: 11, previousEpoch: 11, assigned: tps(topicA, []int32{1})}
		in := reconcileInput{targetEpoch: 12, target: tps(topicA, []int32{1, 2}), ownerEpoch: free, owned: tps(topicA, []int32{1})}
		if _, err := reconcile(unknown, in); !errors.Is(err, ErrFencedMemberEpoch) {
			t.Fatalf("owning partitions: %v, want ErrFencedMemberEpoch", err)
		}
		in.owned = nil
		if _, err := reconcile(unknown, in); !errors.Is(err, ErrFencedMemberEpoch) {
			t.Fatalf("not saying what it owns: %v, want ErrFencedMemberEpoch", err)
		}
		in.owned = topicPartitions{}
		got := mustReconcile(t, unknown, in)
		checkReconciled(t, got, reconciled{state: reconcileStable, epoch: 12, previousEpoch: 11, assigned: tps(topicA, []int32{1, 2})})
	})
}

// TestReconcileNeverSharesAPartition runs groups whose target moves at
// random while members heartbeat in random order. A client starts
// consuming what an answer assigns it at once, but stops consuming what it
// lost only some heartbeats later (its revocation callback and commit take
// time), and some heartbeats do not say what they own. At every point no
// partition is consumed by, or assigned to, two members; once the target
// stops moving, every member ends stable at the target epoch with exactly
// its target.
func TestReconcileNeverSharesAPartition(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 848))
		members := 2 + rng.IntN(5)
		parts := int32(1 + rng.IntN(12))
		ms := make([]reconciled, members)
		consuming := make([]topicPartitions, members) // what each client consumes
		epoch := int32(0)
		var targets []topicPartitions
		newTarget := func() {
			epoch++
			targets = make([]topicPartitions, members)
			for p := range parts {
				if rng.IntN(10) == 0 {
					continue // unassigned in this target
				}
				m := rng.IntN(members)
				targets[m] = targets[m].add(topicA, []int32{p})
			}
		}
		newTarget()
		ownerEpoch := func(self int) func(topicID, int32) int32 {
			return func(t topicID, p int32) int32 {
				for i, m := range ms {
					if i != self && (m.assigned.contains(t, p) || m.pendingRevocation.contains(t, p)) {
						return m.epoch
					}
				}
				return -1
			}
		}
		check := func(step string) {
			t.Helper()
			for p := range parts {
				holders := []int{}
				for i := range ms {
					if ms[i].assigned.contains(topicA, p) || ms[i].pendingRevocation.contains(topicA, p) || consuming[i].contains(topicA, p) {
						holders = append(holders, i)
					}
				}
				if len(holders) > 1 {
					t.Fatalf("seed %d, %s: partition %d held by members %v", seed, step, p, holders)
				}
			}
		}
		heartbeat := func(i int, finishRevoking bool) {
			if finishRevoking {
				// The client is done with what it lost: it consumes only
				// what its last answer assigned it.
				consuming[i] = ms[i].assigned
			}
			in := reconcileInput{targetEpoch: epoch, target: targets[i], ownerEpoch: ownerEpoch(i), owned: consuming[i]}
			if in.owned == nil {
				in.owned = topicPartitions{}
			}
			if rng.IntN(5) == 0 {
				in.owned = nil
			}
			next, err := reconcile(ms[i], in)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			ms[i] = next
			for t, ps := range next.assigned { // starts consuming what it got
				consuming[i] = consuming[i].add(t, ps)
			}
		}
		for step := range 200 {
			if step < 120 && rng.IntN(8) == 0 {
				newTarget()
			}
			heartbeat(rng.IntN(members), rng.IntN(3) == 0)
			check(fmt.Sprintf("step %d", step))
		}
		for round := range 6 {
			for i := range members {
				heartbeat(i, true)
				check(fmt.Sprintf("settling round %d", round))
			}
		}
		for i, m := range ms {
			want := targets[i]
			if len(want) == 0 {
				want = nil
			}
			got := m.assigned
			if len(got) == 0 {
				got = nil
			}
			if m.state != reconcileStable || m.epoch != epoch || !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: member %d settled %s at epoch %d with %v, want STABLE at %d with %v",
					seed, i, m.state, m.epoch, got, epoch, want)
			}
		}
	}
}

func TestTopicPartitionsAddKeepsPartitionsSortedAndUnique(t *testing.T) {
	var tp topicPartitions
	tp = tp.add(topicA, []int32{5, 1})
	tp = tp.add(topicA, []int32{3, 1})
	tp = tp.add(topicB, nil)
	if !slices.Equal(tp[topicA], []int32{1, 3, 5}) || len(tp) != 1 {
		t.Fatalf("got %v", tp)
	}
}
