package assignors

import "slices"

// Markers in ownership's per-partition member slices.
const (
	noClaim       = -1 // nobody claims the partition
	severalClaims = -2 // several members claim it in the same generation
)

// ownership is who owned each partition before this rebalance, from what
// members claim. When members disagree, the claim of the highest generation
// stands (KIP-341, KIP-792): a member that missed a rebalance rejoins
// claiming what it held before.
type ownership struct {
	// owner is, for stickiness, the member whose claim stands: the one
	// claiming the partition in the highest generation among members
	// still subscribed to its topic. As in Kafka, when two such members
	// claim it in the same generation neither claim stands.
	owner []int32

	// For cooperative groups every claim counts, also those of members no
	// longer subscribed: any claimant may still be consuming. top is the
	// one member claiming a partition in the highest generation anybody
	// does, noClaim, or severalClaims, whose members are in several.
	top     []int32
	topGen  []int32
	several map[int32][]int32
}

// resolveOwnership resolves the input's claims. Claims of one member come
// grouped by topic, so whether it still subscribes is looked up per run.
func resolveOwnership(in *input, cooperative bool) *ownership {
	o := &ownership{owner: in.newPlan()}
	ownerGen := make([]int32, len(o.owner))
	if cooperative {
		o.top = in.newPlan()
		o.topGen = make([]int32, len(o.owner))
		o.several = make(map[int32][]int32)
	}
	for m := range in.members {
		mi := &in.members[m]
		lastTopic, subscribed := int32(-1), false
		for _, c := range in.claims[mi.claimLo:mi.claimHi] {
			if cooperative {
				stake(o.top, o.topGen, o.several, c.part, int32(m), mi.gen)
			}
			if c.topic != lastTopic {
				lastTopic, subscribed = c.topic, in.subscribes(m, c.topic)
			}
			if subscribed {
				stake(o.owner, ownerGen, nil, c.part, int32(m), mi.gen)
			}
		}
	}
	for p, m := range o.owner {
		if m == severalClaims {
			o.owner[p] = unassigned
		}
	}
	return o
}

// stake records member m's claim of partition p in generation gen: a
// higher generation replaces what was there, the same one makes the claim
// shared. With several nil, shared claims are only marked.
func stake(who, gens []int32, several map[int32][]int32, p, m, gen int32) {
	switch cur := who[p]; {
	case cur == noClaim || gen > gens[p]:
		who[p], gens[p] = m, gen
		if several != nil && cur == severalClaims {
			delete(several, p)
		}
	case cur == m || gen < gens[p]:
	case several == nil:
		who[p] = severalClaims
	case cur == severalClaims:
		if !slices.Contains(several[p], m) {
			several[p] = append(several[p], m)
		}
	default:
		several[p] = []int32{cur, m}
		who[p] = severalClaims
	}
}

// mayTake reports whether member m may be given partition p in this
// generation of a cooperative group: nobody else claims it, or m claims it
// in the highest generation anybody does. Otherwise some other member may
// still be consuming p, and m gets it once that member revoked it.
func (o *ownership) mayTake(p, m int32) bool {
	switch top := o.top[p]; top {
	case noClaim:
		return true
	case severalClaims:
		return slices.Contains(o.several[p], m)
	default:
		return top == m
	}
}
