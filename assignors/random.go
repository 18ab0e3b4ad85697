package assignors

import (
	"math/rand/v2"
	"slices"
	"strings"
)

// Random returns an example of a custom assignor ("random"), written against
// this package's public API alone: each partition goes to a random member
// subscribed to its topic. The seed fixes the randomness, so one group
// always gets one plan; custom assignors must be deterministic, since any
// member may lead the next rebalance. Register it to choose it by name.
func Random(seed uint64) Assignor { return randomAssignor{seed: seed} }

type randomAssignor struct{ seed uint64 }

func (randomAssignor) Name() string                          { return "random" }
func (randomAssignor) Protocol() RebalanceProtocol           { return Eager }
func (randomAssignor) SubscriptionUserData(JoinState) []byte { return nil }
func (randomAssignor) OnAssignment(Assignment, int32)        {}

func (r randomAssignor) Assign(g *Group) ([]Assignment, error) {
	// Sort everything a map or the caller ordered, so the plan depends
	// on the group alone.
	order := make([]int, len(g.Members))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(g.Members[a].ID, g.Members[b].ID) })
	subscribers := make(map[string][]int)
	for _, i := range order {
		for _, t := range g.Members[i].Topics {
			if n := len(subscribers[t]); n == 0 || subscribers[t][n-1] != i {
				subscribers[t] = append(subscribers[t], i)
			}
		}
	}
	topics := make([]string, 0, len(subscribers))
	for t := range subscribers {
		if g.Topics[t] > 0 {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)

	rng := rand.New(rand.NewPCG(r.seed, uint64(len(g.Members))))
	out := make([]Assignment, len(g.Members))
	for _, t := range topics {
		subs := subscribers[t]
		got := make(map[int][]int32, len(subs))
		for p := range g.Topics[t] {
			i := subs[rng.IntN(len(subs))]
			got[i] = append(got[i], p)
		}
		for _, i := range subs {
			if len(got[i]) > 0 {
				out[i].Partitions = append(out[i].Partitions, TopicPartitions{Topic: t, Partitions: got[i]})
			}
		}
	}
	return out, nil
}
