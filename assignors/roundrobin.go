package assignors

import "slices"

// RoundRobin returns Kafka's RoundRobinAssignor ("roundrobin"): every
// subscribed partition, sorted by topic and partition, is dealt to the
// members in member order, skipping members not subscribed to its topic.
// The next partition goes to the first subscriber after the last one dealt
// to. With identical subscriptions members end at most one partition apart;
// with different ones the balance can be poor (KIP-49).
func RoundRobin() Assignor { return roundRobin{} }

type roundRobin struct{}

func (roundRobin) Name() string                          { return "roundrobin" }
func (roundRobin) Protocol() RebalanceProtocol           { return Eager }
func (roundRobin) SubscriptionUserData(JoinState) []byte { return nil }
func (roundRobin) OnAssignment(Assignment, int32)        {}
func (r roundRobin) Assign(g *Group) ([]Assignment, error) {
	return assignWith(r, g)
}
func (roundRobin) claimMode() claimMode { return claimsNone }

func (roundRobin) plan(in *input) []int32 {
	owner := in.newPlan()
	lo, subscribers := in.subscribers()
	all := int32(len(in.members))
	var next int32 // where the circular walk over members stands
	for t := range in.topics {
		subs := subscribers[lo[t]:lo[t+1]]
		if len(subs) == 0 {
			continue
		}
		for p := in.base[t]; p < in.base[t+1]; p++ {
			m := next // with every member subscribed, the walk skips nobody
			if int32(len(subs)) != all {
				i, _ := slices.BinarySearch(subs, next)
				if i == len(subs) {
					i = 0
				}
				m = subs[i]
			}
			owner[p] = m
			next = (m + 1) % all
		}
	}
	return owner
}
