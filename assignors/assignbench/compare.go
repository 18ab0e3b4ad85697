package assignbench

import (
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/assignors"
)

// Contender is a balancer under comparison.
type Contender struct {
	Name     string
	Balancer kgo.GroupBalancer
}

// Contenders are kcoord's cooperative-sticky assignor and franz-go's.
func Contenders() []Contender {
	return []Contender{
		{"kcoord", assignors.Balancer(assignors.CooperativeSticky())},
		{"franz", kgo.CooperativeStickyBalancer()},
	}
}

// Balance runs a group leader's balance: member metadata in, SyncGroup
// assignments out.
func Balance(b kgo.GroupBalancer, members []kmsg.JoinGroupResponseMember, topics map[string]int32) ([]kmsg.SyncGroupRequestGroupAssignment, error) {
	mb, _, err := b.MemberBalancer(members)
	if err != nil {
		return nil, err
	}
	var into kgo.IntoSyncAssignment
	if me, ok := mb.(kgo.GroupMemberBalancerOrError); ok {
		if into, err = me.BalanceOrError(topics); err != nil {
			return nil, err
		}
	} else {
		into = mb.Balance(topics)
	}
	return into.IntoSyncAssignment(), nil
}

// Quality is how good a plan is.
type Quality struct {
	// Spread is the most partitions a member gets minus the fewest.
	Spread int
	// Moves counts partitions taken from a member that is still in the
	// group: partitions of members that left must move and do not count.
	Moves int
	// Rounds is how many rebalances the group took to assign every
	// partition: cooperative plans leave out partitions until their owner
	// revoked them, and the next rebalance assigns them.
	Rounds int
}

// Measure balances c with b until every partition is assigned (at most
// three rounds; members rejoin owning what the last round gave them) and
// returns the quality of the result.
func Measure(b kgo.GroupBalancer, c *Case) (Quality, error) {
	members := c.Members
	owned := c.Before
	q := Quality{}
	total := 0
	for _, n := range c.Topics {
		total += int(n)
	}
	for q.Rounds < 3 {
		q.Rounds++
		plan, err := Balance(b, members, c.Topics)
		if err != nil {
			return q, err
		}
		got, assigned, err := decode(plan)
		if err != nil {
			return q, err
		}
		for id, before := range owned {
			for t, ps := range before {
				have := map[int32]bool{}
				for _, p := range got[id][t] {
					have[p] = true
				}
				for _, p := range ps {
					if !have[p] {
						q.Moves++
					}
				}
			}
		}
		lo, hi := math.MaxInt, 0
		for _, m := range members {
			n := 0
			for _, ps := range got[m.MemberID] {
				n += len(ps)
			}
			lo, hi = min(lo, n), max(hi, n)
		}
		q.Spread = hi - lo
		if assigned == total {
			return q, nil
		}
		// Everybody rejoins owning what it got, one generation on.
		next := make([]kmsg.JoinGroupResponseMember, len(members))
		for i, m := range members {
			s, err := assignors.DecodeSubscription(m.ProtocolMetadata)
			if err != nil {
				return q, err
			}
			next[i] = kmsg.NewJoinGroupResponseMember()
			next[i].MemberID = m.MemberID
			next[i].ProtocolMetadata = assignors.Balancer(assignors.CooperativeSticky()).JoinGroupMetadata(s.Topics, got[m.MemberID], max(s.Generation, 7)+1)
		}
		members, owned = next, got
	}
	return q, fmt.Errorf("%s: partitions still unassigned after %d rounds", c.Name, q.Rounds)
}

func decode(plan []kmsg.SyncGroupRequestGroupAssignment) (map[string]map[string][]int32, int, error) {
	got := make(map[string]map[string][]int32, len(plan))
	n := 0
	for _, s := range plan {
		a, err := assignors.DecodeAssignment(s.MemberAssignment)
		if err != nil {
			return nil, 0, err
		}
		m := make(map[string][]int32, len(a.Partitions))
		for _, tp := range a.Partitions {
			m[tp.Topic] = append(m[tp.Topic], tp.Partitions...)
			n += len(tp.Partitions)
		}
		got[s.MemberID] = m
	}
	return got, n, nil
}

// Result is one contender's measurements on one case.
type Result struct {
	Case, Contender string
	NsPerOp         int64
	AllocsPerOp     uint64
	BytesPerOp      uint64
	Quality
}

// Run balances c with each contender: once to measure the plan's quality,
// which also warms up, then runs times to measure time and allocations per
// balance.
func Run(c *Case, contenders []Contender, runs int) ([]Result, error) {
	var out []Result
	for _, ct := range contenders {
		q, err := Measure(ct.Balancer, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ct.Name, err)
		}
		r := Result{Case: c.Name, Contender: ct.Name, Quality: q}
		// As testing.B: one collection before, none in between.
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		for range runs {
			if _, err := Balance(ct.Balancer, c.Members, c.Topics); err != nil {
				return nil, err
			}
		}
		r.NsPerOp = time.Since(start).Nanoseconds() / int64(runs)
		runtime.ReadMemStats(&after)
		r.AllocsPerOp = (after.Mallocs - before.Mallocs) / uint64(runs)
		r.BytesPerOp = (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
		out = append(out, r)
	}
	return out, nil
}
