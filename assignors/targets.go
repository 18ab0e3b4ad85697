package assignors

import (
	"cmp"
	"slices"
)

// Targets: how many partitions each member gets. The load vector is the
// most even one the subscriptions allow (the decreasingly minimal one: no
// way to move a partition lowers a member at least two above another), and
// members of a class are at most one apart. Among members of a class, the
// larger shares go to those that held the most, which keeps the most
// partitions where they are.

// splitClass gives class k's load among its members, the larger shares to
// those that held the most (ties in member order).
func splitClass(members []int32, load int64, held, target []int32) {
	n := int64(len(members))
	q, r := int32(load/n), load%n
	order := members
	if r > 0 {
		order = slices.Clone(members)
		slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(held[b], held[a]) })
	}
	for i, m := range order {
		target[m] = q
		if int64(i) < r {
			target[m]++
		}
	}
}

// classLoads returns how many partitions each class gets in the most even
// assignment, and leaves in hx how many of each topic class it gets. Members of a class share its load evenly, so a class at load
// L over n members has members at floor(L/n) and ceil(L/n). The search
// starts from what classes held (hx, per class aligned with its topic
// classes), pours in the partitions nobody held, most constrained topic
// classes first, and then moves partitions along paths from classes with a
// member at least two above the least loaded member of another class
// (Harvey et al., semi-matchings: an assignment is most even when no such
// path exists).
func classLoads(cl *classes, hx [][]int64) []int64 {
	K := len(cl.members)
	n := make([]int64, K)
	loads := make([]int64, K)
	free := slices.Clone(cl.size)
	for k := range K {
		n[k] = int64(len(cl.members[k]))
		for i, j := range cl.tcs[k] {
			loads[k] += hx[k][i]
			free[j] -= hx[k][i]
		}
	}
	lowest := func(k int) int64 { return loads[k] / n[k] }
	highest := func(k int) int64 { return (loads[k] + n[k] - 1) / n[k] }
	pos := func(k, j int32) int32 { i, _ := slices.BinarySearch(cl.tcs[k], j); return int32(i) }

	order := make([]int32, len(free))
	weight := make([]int64, len(free))
	for j := range order {
		order[j] = int32(j)
		for _, k := range cl.eligible[j] {
			weight[j] += n[k]
		}
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(weight[a], weight[b]) })
	for _, j := range order {
		if free[j] > 0 {
			pour(cl.eligible[j], free[j], n, loads, func(k int32, add int64) { hx[k][pos(k, j)] += add })
		}
	}

	// Move partitions from high classes to low ones. A class that reaches
	// no class two above its lowest member never will: moves only lower
	// members at least two above the least loaded one (see settle).
	settled := make([]bool, K)
	parent := make([]struct{ from, fromIdx, idx int32 }, K) // how BFS reached a class
	seen := make([]bool, K)
	expanded := make([]bool, len(free))
	var queue []int32
	for {
		v := -1
		for k := range K {
			if !settled[k] && (v < 0 || lowest(k) < lowest(v)) {
				v = k
			}
		}
		if v < 0 {
			return loads
		}
		clear(seen)
		clear(expanded)
		seen[v] = true
		queue = append(queue[:0], int32(v))
		best := int32(-1)
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			for ai, j := range cl.tcs[a] {
				if expanded[j] {
					continue
				}
				expanded[j] = true
				for _, b := range cl.eligible[j] {
					bi := pos(b, j)
					if seen[b] || hx[b][bi] == 0 {
						continue
					}
					seen[b] = true
					parent[b] = struct{ from, fromIdx, idx int32 }{a, int32(ai), bi}
					if highest(int(b)) >= lowest(v)+2 && (best < 0 || highest(int(b)) > highest(int(best))) {
						best = b
					}
					queue = append(queue, b)
				}
			}
		}
		if best < 0 {
			settled[v] = true
			continue
		}
		// Each moved partition must still lower a member two above the
		// one it raises; the path's cells bound how many can move.
		limit := int64(1) << 62
		for b := best; b != int32(v); b = parent[b].from {
			limit = min(limit, hx[b][parent[b].idx])
		}
		ok := func(d int64) bool {
			return (loads[best]-d+1+n[best]-1)/n[best] >= (loads[v]+d-1)/n[v]+2
		}
		lo, hi := int64(1), limit
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if ok(mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		for b := best; b != int32(v); b = parent[b].from {
			p := parent[b]
			hx[b][p.idx] -= lo
			hx[p.from][p.fromIdx] += lo
		}
		loads[best] -= lo
		loads[v] += lo
	}
}

// pour adds units to the classes, lowest members first: every member is
// raised to a common level, and what is left raises members at that level
// one more, in class order.
func pour(classes []int32, units int64, n, loads []int64, add func(k int32, units int64)) {
	need := func(level int64) int64 {
		s := int64(0)
		for _, k := range classes {
			s += max(0, n[k]*level-loads[k])
		}
		return s
	}
	lo, hi := int64(0), int64(0)
	for _, k := range classes {
		hi = max(hi, loads[k]/n[k]+units+1)
	}
	for lo < hi { // the highest level all can be raised to
		mid := lo + (hi-lo+1)/2
		if need(mid) <= units {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	for _, k := range classes {
		if a := max(0, n[k]*lo-loads[k]); a > 0 {
			loads[k] += a
			units -= a
			add(k, a)
		}
	}
	for _, k := range classes {
		if units == 0 {
			return
		}
		if atLevel := n[k]*(lo+1) - loads[k]; atLevel > 0 {
			a := min(units, atLevel)
			loads[k] += a
			units -= a
			add(k, a)
		}
	}
}
