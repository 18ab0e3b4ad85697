package assignors_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kcoord/kcoord/assignors"
)

// tp is a topic-partition.
type tp struct {
	topic string
	part  int32
}

func (x tp) String() string { return fmt.Sprintf("%s/%d", x.topic, x.part) }

// owners maps each assigned partition to its member's index, failing the
// test if a partition is assigned twice or to a member not subscribed to
// its topic, or does not exist.
func owners(t testing.TB, g *assignors.Group, out []assignors.Assignment) map[tp]int {
	t.Helper()
	if len(out) != len(g.Members) {
		t.Fatalf("%d assignments for %d members", len(out), len(g.Members))
	}
	own := make(map[tp]int)
	for i, a := range out {
		subscribed := map[string]bool{}
		for _, topic := range g.Members[i].Topics {
			subscribed[topic] = true
		}
		if !slices.IsSortedFunc(a.Partitions, func(x, y assignors.TopicPartitions) int { return cmpStr(x.Topic, y.Topic) }) {
			t.Errorf("%s: topics not sorted", g.Members[i].ID)
		}
		for _, tps := range a.Partitions {
			if !slices.IsSorted(tps.Partitions) {
				t.Errorf("%s: %s partitions not sorted: %v", g.Members[i].ID, tps.Topic, tps.Partitions)
			}
			for _, p := range tps.Partitions {
				x := tp{tps.Topic, p}
				if !subscribed[tps.Topic] {
					t.Fatalf("%s assigned %v without subscribing to %s", g.Members[i].ID, x, tps.Topic)
				}
				if p < 0 || p >= g.Topics[tps.Topic] {
					t.Fatalf("%s assigned %v, which does not exist", g.Members[i].ID, x)
				}
				if j, dup := own[x]; dup {
					t.Fatalf("%v assigned to %s and %s", x, g.Members[j].ID, g.Members[i].ID)
				}
				own[x] = i
			}
		}
	}
	return own
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// subscribed lists every partition some member subscribes to.
func subscribed(g *assignors.Group) []tp {
	topics := map[string]bool{}
	for _, m := range g.Members {
		for _, topic := range m.Topics {
			topics[topic] = true
		}
	}
	var out []tp
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		for p := range g.Topics[topic] {
			out = append(out, tp{topic, p})
		}
	}
	return out
}

// checkComplete fails unless every subscribed partition is assigned.
func checkComplete(t testing.TB, g *assignors.Group, own map[tp]int) {
	t.Helper()
	for _, x := range subscribed(g) {
		if _, ok := own[x]; !ok {
			t.Fatalf("%v is not assigned", x)
		}
	}
}

// loads counts partitions per member.
func loads(g *assignors.Group, own map[tp]int) []int {
	l := make([]int, len(g.Members))
	for _, i := range own {
		l[i]++
	}
	return l
}

// subKey identifies a subscription by its topics that exist.
func subKey(g *assignors.Group, m assignors.Member) string {
	var ts []string
	for _, topic := range m.Topics {
		if g.Topics[topic] > 0 {
			ts = append(ts, topic)
		}
	}
	slices.Sort(ts)
	return fmt.Sprint(slices.Compact(ts))
}

// checkEvenPerSubscription fails if two members subscribed to the same
// topics end more than one partition apart.
func checkEvenPerSubscription(t testing.TB, g *assignors.Group, own map[tp]int) {
	t.Helper()
	l := loads(g, own)
	lo, hi := map[string]int{}, map[string]int{}
	for i, m := range g.Members {
		k := subKey(g, m)
		if _, ok := lo[k]; !ok {
			lo[k], hi[k] = l[i], l[i]
		}
		lo[k], hi[k] = min(lo[k], l[i]), max(hi[k], l[i])
	}
	for k := range lo {
		if hi[k]-lo[k] > 1 {
			t.Fatalf("members subscribed to %s hold between %d and %d partitions", k, lo[k], hi[k])
		}
	}
}

// checkMostEven fails if a partition could move, possibly along a chain of
// members each handing one on, from a member to one at least two below it:
// then the load vector is not the most even (Harvey et al.).
func checkMostEven(t testing.TB, g *assignors.Group, own map[tp]int) {
	t.Helper()
	l := loads(g, own)
	holders := map[string]map[int]bool{} // topic → members holding some of it
	for x, i := range own {
		if holders[x.topic] == nil {
			holders[x.topic] = map[int]bool{}
		}
		holders[x.topic][i] = true
	}
	// Members of a subscription reach the same members, so search once
	// per subscription from its least loaded member.
	low := map[string]int{}
	for i, m := range g.Members {
		k := subKey(g, m)
		if j, ok := low[k]; !ok || l[i] < l[j] {
			low[k] = i
		}
	}
	for _, v := range low {
		seen := map[int]bool{v: true}
		doneTopic := map[string]bool{}
		queue := []int{v}
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			for _, topic := range g.Members[a].Topics {
				if doneTopic[topic] {
					continue
				}
				doneTopic[topic] = true
				for b := range holders[topic] {
					if seen[b] {
						continue
					}
					if l[b] >= l[v]+2 {
						t.Fatalf("%s (%d partitions) can take from %s (%d): not the most even assignment", g.Members[v].ID, l[v], g.Members[b].ID, l[b])
					}
					seen[b] = true
					queue = append(queue, b)
				}
			}
		}
	}
}

// previousOwners resolves who owned each partition going in, as Kafka's
// sticky assignors do: the claim of the highest generation by a member
// still subscribed to the topic stands, unless another such member claims
// the partition in that generation too.
func previousOwners(g *assignors.Group) map[tp]int {
	type best struct {
		member, gen int
		tied        bool
	}
	b := map[tp]*best{}
	for i, m := range g.Members {
		sub := map[string]bool{}
		for _, topic := range m.Topics {
			sub[topic] = true
		}
		for _, o := range m.Owned {
			if !sub[o.Topic] {
				continue
			}
			for _, p := range o.Partitions {
				x := tp{o.Topic, p}
				if p < 0 || p >= g.Topics[o.Topic] {
					continue
				}
				cur := b[x]
				switch {
				case cur == nil || int(m.Generation) > cur.gen:
					b[x] = &best{member: i, gen: int(m.Generation)}
				case cur.member != i && int(m.Generation) == cur.gen:
					cur.tied = true
				}
			}
		}
	}
	out := map[tp]int{}
	for x, c := range b {
		if !c.tied {
			out[x] = c.member
		}
	}
	return out
}

// moves counts partitions not assigned to their previous owner.
func moves(prev, own map[tp]int) int {
	n := 0
	for x, i := range prev {
		if j, ok := own[x]; !ok || j != i {
			n++
		}
	}
	return n
}

// checkNoNeedlessMove fails if some partitions could go back to their
// previous owners without making the balance worse: a chain of moved
// partitions, each from the member the previous one went to, that starts at
// a member holding fewer than the member it ends at, or that closes.
func checkNoNeedlessMove(t testing.TB, g *assignors.Group, prev, own map[tp]int) {
	t.Helper()
	l := loads(g, own)
	next := map[int]map[int]tp{} // previous owner → new owner → a partition
	for x, i := range prev {
		if j, ok := own[x]; ok && j != i {
			if next[i] == nil {
				next[i] = map[int]tp{}
			}
			next[i][j] = x
		}
	}
	for start := range next {
		seen := map[int]bool{}
		queue := []int{start}
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			for b, x := range next[a] {
				if b == start {
					t.Fatalf("moved partitions go round from %s back to it (via %v): they could all stay", g.Members[start].ID, x)
				}
				if l[b] > l[start] {
					t.Fatalf("%s (%d partitions) lost partitions that reached %s (%d, via %v): one could go back", g.Members[start].ID, l[start], g.Members[b].ID, l[b], x)
				}
				if !seen[b] {
					seen[b] = true
					queue = append(queue, b)
				}
			}
		}
	}
}

// toOwned converts a plan to each member's owned partitions.
func toOwned(out []assignors.Assignment) [][]assignors.TopicPartitions {
	o := make([][]assignors.TopicPartitions, len(out))
	for i, a := range out {
		o[i] = a.Partitions
	}
	return o
}

// setOwned makes member i of g own owned[i] from generation gen, in its
// subscription (cooperative) and in its sticky user data (eager).
func setOwned(g *assignors.Group, i int, owned []assignors.TopicPartitions, gen int32) {
	m := &g.Members[i]
	m.Owned = owned
	m.Generation = gen
	m.UserData = assignors.Sticky().SubscriptionUserData(assignors.JoinState{Topics: m.Topics, Owned: owned, Generation: gen})
}

// randomGroup makes a group of members members over topics topics of up to
// maxParts partitions each, whose members pick one of patterns random
// subscriptions.
func randomGroup(rng *rand.Rand, members, topics, maxParts, patterns int) *assignors.Group {
	g := &assignors.Group{Topics: map[string]int32{}}
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("topic-%03d", i)
		g.Topics[names[i]] = int32(rng.IntN(maxParts + 1))
	}
	subs := make([][]string, patterns)
	for i := range subs {
		n := 1 + rng.IntN(topics)
		if i == 0 {
			n = topics // someone usually subscribes to everything
		}
		perm := rng.Perm(topics)[:n]
		for _, k := range perm {
			subs[i] = append(subs[i], names[k])
		}
		if rng.IntN(10) == 0 {
			subs[i] = append(subs[i], "missing-topic")
		}
	}
	for i := range members {
		s := subs[rng.IntN(patterns)]
		g.Members = append(g.Members, assignors.Member{
			ID:           fmt.Sprintf("member-%04d-%x", i, rng.Uint32()),
			Subscription: assignors.Subscription{Topics: s, Generation: -1},
		})
	}
	rng.Shuffle(len(g.Members), func(a, b int) { g.Members[a], g.Members[b] = g.Members[b], g.Members[a] })
	return g
}

// evolve makes the next generation of a group from its last plan: members
// rejoin owning what they got in generation gen, some leave, some join, and
// some change subscription or rejoin stale, claiming an older generation's
// partitions.
func evolve(rng *rand.Rand, g *assignors.Group, out []assignors.Assignment, gen int32, churn int) *assignors.Group {
	next := &assignors.Group{Topics: g.Topics, Racks: g.Racks}
	owned := toOwned(out)
	for i, m := range g.Members {
		if i > 0 && rng.IntN(100) < churn {
			continue // left; the first member stays, so the group does not die out
		}
		m.Subscription = assignors.Subscription{Topics: m.Topics, Rack: m.Rack}
		if rng.IntN(100) < churn/2 && len(g.Members) > 0 {
			m.Topics = g.Members[rng.IntN(len(g.Members))].Topics
		}
		next.Members = append(next.Members, m)
		setOwned(next, len(next.Members)-1, owned[i], gen)
		if rng.IntN(100) < churn/3 && i > 0 {
			// Rejoins stale: claims what another member had, a
			// generation ago.
			setOwned(next, len(next.Members)-1, owned[i-1], gen-1)
		}
	}
	for range rng.IntN(churn/5 + 2) {
		m := g.Members[rng.IntN(len(g.Members))]
		next.Members = append(next.Members, assignors.Member{
			ID:           fmt.Sprintf("joined-%x", rng.Uint64()),
			Subscription: assignors.Subscription{Topics: m.Topics, Generation: -1},
		})
	}
	return next
}

// oracle returns, by min-cost flow over single partitions, the least sum of
// squared member loads any assignment of g achieves, and among those
// assignments the most partitions kept by their previous owner. Only for
// small groups.
func oracle(g *assignors.Group, prev map[tp]int) (sumSquares, kept int) {
	parts := subscribed(g)
	M, P := len(g.Members), len(parts)
	// Nodes: source 0, partitions 1..P, members P+1..P+M, sink P+M+1.
	n := P + M + 2
	src, sink := 0, n-1
	type arc struct{ to, cap, cost, rev int }
	adj := make([][]arc, n)
	add := func(a, b, cost int) {
		adj[a] = append(adj[a], arc{b, 1, cost, len(adj[b])})
		adj[b] = append(adj[b], arc{a, 0, -cost, len(adj[a]) - 1})
	}
	W := P + 1 // one more partition on a member outweighs any stickiness
	for k, x := range parts {
		add(src, 1+k, 0)
		for i, m := range g.Members {
			if !slices.Contains(m.Topics, x.topic) {
				continue
			}
			cost := 1
			if o, ok := prev[x]; ok && o == i {
				cost = 0
			}
			add(1+k, 1+P+i, cost)
		}
	}
	for i := range M {
		for l := range P {
			add(1+P+i, sink, W*(2*l+1))
		}
	}
	total := 0
	for range P { // one partition per shortest path (Bellman-Ford: costs go negative)
		dist := make([]int, n)
		from := make([][2]int, n)
		for i := range dist {
			dist[i] = 1 << 60
		}
		dist[src] = 0
		for changed := true; changed; {
			changed = false
			for a := range n {
				if dist[a] == 1<<60 {
					continue
				}
				for e, r := range adj[a] {
					if r.cap > 0 && dist[a]+r.cost < dist[r.to] {
						dist[r.to] = dist[a] + r.cost
						from[r.to] = [2]int{a, e}
						changed = true
					}
				}
			}
		}
		for v := sink; v != src; {
			a, e := from[v][0], from[v][1]
			adj[a][e].cap--
			adj[v][adj[a][e].rev].cap++
			v = a
		}
		total += dist[sink]
	}
	moved := total % W
	return total / W, P - moved
}

// sumSquares of member loads.
func sumSquares(l []int) int {
	s := 0
	for _, x := range l {
		s += x * x
	}
	return s
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

// withRacks puts members in random racks of three and partitions' replicas
// on one or two of them.
func withRacks(rng *rand.Rand, g *assignors.Group) {
	racks := [][]string{{"r0"}, {"r1"}, {"r2"}, {"r0", "r1"}, {"r1", "r2"}}
	g.Racks = map[string][][]string{}
	for _, topic := range slices.Sorted(maps.Keys(g.Topics)) {
		per := make([][]string, g.Topics[topic])
		for p := range per {
			per[p] = racks[rng.IntN(len(racks))]
		}
		g.Racks[topic] = per
	}
	for i := range g.Members {
		if rng.IntN(5) > 0 {
			g.Members[i].Rack = fmt.Sprintf("r%d", rng.IntN(3))
		}
	}
}
