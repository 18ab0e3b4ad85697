package assignors

import "slices"

// Sticky returns Kafka's StickyAssignor ("sticky", KIP-54): the most even
// assignment the subscriptions allow, and among those the one that keeps
// the most partitions where they were. It is eager: members give up
// everything before each rebalance and say what they held in their user
// data (Kafka's StickyAssignorUserData, which Java's and franz-go's sticky
// assignors read too).
func Sticky() Assignor { return &sticky{} }

// CooperativeSticky returns Kafka's CooperativeStickyAssignor
// ("cooperative-sticky", KIP-429): the sticky assignment, except that a
// partition changing owner is left out until the member that owns it has
// revoked it. That member sees it gone from its assignment, revokes it and
// rejoins; the next rebalance assigns it. Members say what they own in
// their subscription, with its generation (KIP-792), so a member that
// missed a rebalance cannot make the leader hand out a partition somebody
// else still consumes.
func CooperativeSticky() Assignor { return &sticky{cooperative: true} }

type sticky struct{ cooperative bool }

func (s *sticky) Name() string {
	if s.cooperative {
		return "cooperative-sticky"
	}
	return "sticky"
}

func (s *sticky) Protocol() RebalanceProtocol {
	if s.cooperative {
		return Cooperative
	}
	return Eager
}

// SubscriptionUserData is Kafka's StickyAssignorUserData v1: what the member
// owns and the generation it got it in. Java's cooperative-sticky members
// send the generation alone, but read the owned partitions and generation
// from the subscription (v2+); franz-go's send this, which every reader
// understands.
func (s *sticky) SubscriptionUserData(js JoinState) []byte {
	return encodeStickyUserData(js.Owned, js.Generation)
}

func (*sticky) OnAssignment(Assignment, int32) {}

func (s *sticky) Assign(g *Group) ([]Assignment, error) { return assignWith(s, g) }

func (s *sticky) claimMode() claimMode {
	if s.cooperative {
		return claimsCooperative
	}
	return claimsEager
}

// plan: who owned what, how many partitions each member gets (targets),
// how many of each topic class (counts), then which ones (realize).
func (s *sticky) plan(in *input) []int32 {
	own := resolveOwnership(in, s.cooperative)
	owner := own.owner
	cl := newClasses(in)
	if len(cl.members) == 0 {
		return owner // nobody subscribes to anything that exists
	}
	c := newCells(cl)
	c.countHeld(in, cl, owner)
	held := c.held()
	target := make([]int32, len(in.members))
	if cl.uniform() {
		// One class, one topic class: a member's share is its count,
		// and with the larger shares on the members that held the
		// most, keeping min(held, share) each moves the fewest.
		splitClass(cl.members[0], cl.size[0], held, target)
		for m, k := range cl.of {
			if k >= 0 {
				c.x[c.lo[m]] = target[m]
			}
		}
	} else {
		settleMixed(cl, c, held, target)
	}
	realize(in, cl, c, owner)
	if s.cooperative {
		withhold(owner, own)
	}
	return owner
}

// settleMixed settles the counts of a group with mixed subscriptions: how
// many partitions each class gets, and of which topic classes (classLoads,
// repairClasses), each member's share of its class's load (splitClass), how
// many of each topic class each member gets (settleCounts), and finally the
// rotations that keep more partitions where they are (repair).
func settleMixed(cl *classes, c *cells, held, target []int32) {
	classHeld := make([][]int64, len(cl.members)) // class → per topic class
	y := make([][]int64, len(cl.members))
	for k, members := range cl.members {
		classHeld[k] = make([]int64, len(cl.tcs[k]))
		for _, m := range members {
			for i := c.lo[m]; i < c.lo[m+1]; i++ {
				classHeld[k][i-c.lo[m]] += int64(c.h[i])
			}
		}
		y[k] = slices.Clone(classHeld[k])
	}
	loads := classLoads(cl, y)
	repairClasses(cl, classHeld, y)
	for k, members := range cl.members {
		splitClass(members, loads[k], held, target)
	}
	settleCounts(cl, c, target, y)
	repair(cl, c)
}
