package assignors_test

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/assignors"
)

// A custom assignor registered by name, chosen by a strategy list, and
// plugged into a franz-go consumer.
func Example_custom() {
	registry := assignors.NewRegistry()
	if err := registry.Register(assignors.Random(42)); err != nil {
		panic(err)
	}
	strategy, err := registry.Strategy("random,org.apache.kafka.clients.consumer.CooperativeStickyAssignor")
	if err != nil {
		panic(err)
	}
	var balancers []kgo.GroupBalancer
	for _, a := range strategy {
		balancers = append(balancers, assignors.Balancer(a))
		fmt.Println(a.Name(), a.Protocol())
	}
	_ = kgo.Balancers(balancers...) // with kgo.NewClient(kgo.ConsumerGroup(...), ...)
	// Output:
	// random EAGER
	// cooperative-sticky COOPERATIVE
}

func ExampleRange() {
	g := &assignors.Group{
		Topics: map[string]int32{"orders": 7},
		Members: []assignors.Member{
			{ID: "c0", Subscription: assignors.Subscription{Topics: []string{"orders"}}},
			{ID: "c1", Subscription: assignors.Subscription{Topics: []string{"orders"}}},
			{ID: "c2", Subscription: assignors.Subscription{Topics: []string{"orders"}}},
		},
	}
	plan, err := assignors.Range().Assign(g)
	if err != nil {
		panic(err)
	}
	for i, a := range plan {
		fmt.Println(g.Members[i].ID, a.Partitions)
	}
	// Output:
	// c0 [{orders [0 1 2]}]
	// c1 [{orders [3 4]}]
	// c2 [{orders [5 6]}]
}
