package assignors_test

import (
	"fmt"
	"testing"

	"github.com/kcoord/kcoord/assignors"
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

// BenchmarkServerAssign runs the server assignors on the groups of Kafka's
// ServerSideAssignorBenchmark at its largest size: 10,000 members, ten
// partitions a member, 100 topics of 1,000 partitions; every member on
// every topic (homogeneous) or five buckets of members on five disjoint
// sets of topics (heterogeneous); from no targets at all (full) or with
// one member joining a group whose targets are the last plan
// (incremental). One iteration is one target assignment. docs/architecture.md
// ("Server-side assignors") sets the figures beside those Kafka published
// for its assignors at that size. Run it as
//
//	go test ./assignors -run '^$' -bench ServerAssign -benchtime 20x
func BenchmarkServerAssign(b *testing.B) {
	const members, ratio, topicCount = 10000, 10, 100
	for _, a := range []assignors.ServerAssignor{assignors.Uniform(), assignors.ServerRange()} {
		for _, hetero := range []bool{false, true} {
			for _, incremental := range []bool{false, true} {
				name := a.Name() + "/homogeneous"
				if hetero {
					name = a.Name() + "/heterogeneous"
				}
				if incremental {
					name += "/incremental"
				} else {
					name += "/full"
				}
				b.Run(name, func(b *testing.B) {
					g := kafkaBenchGroup(members, ratio, topicCount, hetero)
					if incremental {
						g.Members = g.Members[:members-1]
						out, err := a.Target(g)
						if err != nil {
							b.Fatal(err)
						}
						for i := range g.Members {
							g.Members[i].Target = out[i].Partitions
						}
						last := g.Members[len(g.Members)-1]
						g.Members = append(g.Members, assignors.TargetMember{ID: "newMember", Topics: last.Topics})
					}
					b.ReportAllocs()
					for b.Loop() {
						if _, err := a.Target(g); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/assign")
				})
			}
		}
	}
}

// kafkaBenchGroup is AssignorBenchmarkUtils' group: topics topic0...,
// members member0..., heterogeneous members in five buckets, each bucket's
// members on its own consecutive fifth of the topics.
func kafkaBenchGroup(members, ratio, topicCount int, hetero bool) *assignors.TargetGroup {
	g := &assignors.TargetGroup{Topics: make(map[string]int32, topicCount)}
	names := make([]string, topicCount)
	for i := range names {
		names[i] = fmt.Sprintf("topic%d", i)
		g.Topics[names[i]] = int32(members * ratio / topicCount)
	}
	const buckets = 5
	perBucketMembers := (members + buckets - 1) / buckets
	perBucketTopics := (topicCount + buckets - 1) / buckets
	for i := range members {
		topics := names
		if hetero {
			k := i / perBucketMembers
			topics = names[k*perBucketTopics : min((k+1)*perBucketTopics, topicCount)]
		}
		g.Members = append(g.Members, assignors.TargetMember{ID: fmt.Sprintf("member%d", i), Topics: topics})
	}
	return g
}
