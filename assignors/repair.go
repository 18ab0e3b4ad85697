package assignors

// repair makes the counts as sticky as the balance allows: it cancels every
// rotation that keeps the load vector and moves fewer partitions. The
// counts are a flow from topic classes to members; a rotation is a cycle in
// its residual graph, whose nodes are topic classes, members, and one node
// per load level:
//
//   - topic class → member: the member takes one more of it, which costs
//     -1 while it holds fewer than it held (it takes one of its own back),
//     else 0;
//   - member → topic class: the member gives one of it up, which costs 1
//     while it holds no more than it held (it gives up its own), else 0;
//   - member → level of its load, and level → a member one above it: the
//     first member ends one higher, the second one lower, which leaves the
//     sorted loads as they were.
//
// A cycle of negative cost keeps the balance and saves moves; the counts
// move the fewest partitions once none is left (Klein's cycle cancelling).
// Bellman-Ford from every node at once finds them: a cycle closes in the
// predecessor graph exactly when one exists.
//
// Only members that gave up some of what they held can take it back, so
// with nobody short of its holdings there is nothing to do.
func repair(cl *classes, c *cells) {
	cancelRotations(c, len(cl.size), true)
}

// repairClasses does the same for the classes' shares of topic classes (y,
// from classLoads) against what their members held (held), keeping every
// class's load: a small graph, on which rotations move many partitions at
// once, and which leaves the members' repair little to do.
func repairClasses(cl *classes, held, y [][]int64) {
	cc := &cells{lo: make([]int32, len(cl.members)+1)}
	for k, tcs := range cl.tcs {
		cc.lo[k+1] = cc.lo[k] + int32(len(tcs))
		for i, j := range tcs {
			cc.tc = append(cc.tc, j)
			cc.member = append(cc.member, int32(k))
			cc.x = append(cc.x, int32(y[k][i]))
			cc.h = append(cc.h, int32(held[k][i]))
		}
	}
	cancelRotations(cc, len(cl.size), false)
	for k := range cl.tcs {
		for i := range y[k] {
			y[k][i] = int64(cc.x[cc.lo[k]+int32(i)])
		}
	}
}

// cancelRotations cancels negative cycles in the counts c of members (or
// classes) over ntc topic classes; with levels, also cycles that shift
// load between members one level apart.
func cancelRotations(c *cells, ntc int, levels bool) {
	short := false
	for i := range c.x {
		short = short || c.x[i] < c.h[i]
	}
	if !short {
		return
	}
	r := &rotations{c: c, ntc: int32(ntc), load: make([]int32, len(c.lo)-1), levels: levels}
	for i, x := range c.x {
		r.load[c.member[i]] += x
	}
	for r.find() {
	}
}

// rotations is the residual graph of the counts, and Bellman-Ford's state.
type rotations struct {
	c      *cells
	ntc    int32 // topic class nodes: 0 .. ntc-1; member m's node: ntc+m
	levels bool  // members may shift load one level
	load   []int32
	level  map[int32]int32 // load → its level node
	dist   []int32
	pred   []int32 // node → predecessor, or -1
	via    []int32 // node → the cell of the arc from its predecessor, or -1
	mark   []int32
	cycles [][]int32
}

// find runs Bellman-Ford until it finds negative cycles, and cancels them.
// It reports whether it cancelled any.
func (r *rotations) find() bool {
	c := r.c
	members := int32(len(r.load))
	r.level = make(map[int32]int32)
	nodes := r.ntc + members
	for m := range members {
		if c.lo[m] == c.lo[m+1] || !r.levels {
			continue
		}
		if _, ok := r.level[r.load[m]]; !ok {
			r.level[r.load[m]] = nodes
			nodes++
		}
	}
	r.dist = resize(r.dist, int(nodes))
	r.pred = resize(r.pred, int(nodes))
	r.via = resize(r.via, int(nodes))
	r.mark = resize(r.mark, int(nodes))
	clear(r.dist)
	for i := range r.pred {
		r.pred[i], r.via[i] = -1, -1
	}
	relax := func(from, to, cost, cell int32) bool {
		if d := r.dist[from] + cost; d < r.dist[to] {
			r.dist[to], r.pred[to], r.via[to] = d, from, cell
			return true
		}
		return false
	}
	for range nodes {
		changed := false
		for m := range members {
			node := r.ntc + m
			for i := c.lo[m]; i < c.lo[m+1]; i++ {
				take, give := int32(0), int32(0)
				if c.x[i] < c.h[i] {
					take = -1
				}
				if c.x[i] <= c.h[i] {
					give = 1
				}
				changed = relax(c.tc[i], node, take, i) || changed
				if c.x[i] > 0 {
					changed = relax(node, c.tc[i], give, i) || changed
				}
			}
		}
		for m := range members {
			if c.lo[m] == c.lo[m+1] || !r.levels {
				continue
			}
			node := r.ntc + m
			changed = relax(node, r.level[r.load[m]], 0, -1) || changed
			if below, ok := r.level[r.load[m]-1]; ok && r.load[m] > 0 {
				changed = relax(below, node, 0, -1) || changed
			}
		}
		if !changed {
			return false
		}
		if r.cancel(nodes) {
			return true
		}
	}
	return false
}

// cancel cancels every cycle in the predecessor graph; they share no node.
func (r *rotations) cancel(nodes int32) bool {
	for i := range r.mark[:nodes] {
		r.mark[i] = -1
	}
	r.cycles = r.cycles[:0]
	for start := range nodes {
		n := start
		for n >= 0 && r.mark[n] < 0 {
			r.mark[n] = start
			n = r.pred[n]
		}
		if n < 0 || r.mark[n] != start {
			continue
		}
		var cycle []int32
		for at := n; ; {
			cycle = append(cycle, at)
			if at = r.pred[at]; at == n {
				break
			}
		}
		r.cycles = append(r.cycles, cycle)
	}
	for _, cycle := range r.cycles {
		r.apply(cycle)
	}
	return len(r.cycles) > 0
}

// apply moves partitions around one cycle (nodes listed against the arcs'
// direction). Every arc keeps its price for as many partitions as its cell
// has room; a cycle through a level moves one, since it changes loads.
func (r *rotations) apply(cycle []int32) {
	c := r.c
	members := int32(len(r.load))
	amount := int32(1<<31 - 1)
	for _, to := range cycle {
		i := r.via[to]
		switch {
		case i < 0: // through a level
			amount = 1
		case to >= r.ntc: // a member takes
			if c.x[i] < c.h[i] {
				amount = min(amount, c.h[i]-c.x[i])
			}
		default: // a member gives
			if c.x[i] > c.h[i] {
				amount = min(amount, c.x[i]-c.h[i])
			} else {
				amount = min(amount, c.x[i])
			}
		}
	}
	for _, to := range cycle {
		i := r.via[to]
		switch {
		case i < 0:
		case to >= r.ntc && to < r.ntc+members:
			c.x[i] += amount
			r.load[to-r.ntc] += amount
		default:
			c.x[i] -= amount
			r.load[c.member[i]] -= amount
		}
	}
}

func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
