package assignors_test

import (
	"testing"

	"github.com/kcoord/kcoord/assignors/assignbench"
)

// BenchmarkCompare balances the same groups with kcoord's cooperative-sticky
// assignor and franz-go's, the whole leader path each (JoinGroup metadata
// in, SyncGroup assignments out), and reports the plans' spread (most minus
// fewest partitions per member) and moves (partitions taken from members
// still in the group). Run it as
//
//	go test ./assignors -run '^$' -bench Compare -benchtime 3x
func BenchmarkCompare(b *testing.B) {
	for _, name := range assignbench.CaseNames {
		cases, err := assignbench.Cases(name)
		if err != nil {
			b.Fatal(err)
		}
		c := &cases[0]
		for _, ct := range assignbench.Contenders() {
			b.Run(c.Name+"/"+ct.Name, func(b *testing.B) {
				q, err := assignbench.Measure(ct.Balancer, c)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := assignbench.Balance(ct.Balancer, c.Members, c.Topics); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(q.Spread), "spread")
				b.ReportMetric(float64(q.Moves), "moves")
				b.ReportMetric(float64(q.Rounds), "rounds")
			})
		}
	}
}
