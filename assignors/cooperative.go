package assignors

// withhold turns a sticky plan into a cooperative one (KIP-429): it leaves
// out every partition that another member may still be consuming (see
// ownership.mayTake). That member sees the partition gone from its
// assignment, revokes it and rejoins, and the rebalance that follows
// assigns it. Kafka's CooperativeStickyAssignor does the same
// (adjustAssignment); like franz-go's, a claim only counts as ownership if
// it is of the highest generation anyone claims the partition in (KIP-792),
// so a member that missed rebalances cannot take back a partition whose
// current owner has not revoked it.
func withhold(owner []int32, own *ownership) {
	for p, m := range owner {
		if m >= 0 && own.top[p] != noClaim && !own.mayTake(int32(p), m) {
			owner[p] = unassigned
		}
	}
}
