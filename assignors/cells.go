package assignors

import "slices"

// cells count, for every member, partitions of each topic class it
// subscribes to: member m's cells are lo[m] .. lo[m+1]-1, one per topic
// class of its class, in that class's order. The sticky assignors settle
// how many partitions of each topic class each member gets (x) from how
// many it held (h), then pick the partitions (realize).
type cells struct {
	lo     []int32 // member → its first cell; len(members)+1
	tc     []int32 // cell → topic class
	member []int32 // cell → member
	x      []int32 // partitions the member gets
	h      []int32 // partitions the member held and may keep
}

func newCells(cl *classes) *cells {
	c := &cells{lo: make([]int32, len(cl.of)+1)}
	for m, k := range cl.of {
		n := int32(0)
		if k >= 0 {
			n = int32(len(cl.tcs[k]))
		}
		c.lo[m+1] = c.lo[m] + n
	}
	n := c.lo[len(cl.of)]
	c.tc, c.member = make([]int32, n), make([]int32, n)
	c.x, c.h = make([]int32, n), make([]int32, n)
	for m, k := range cl.of {
		if k < 0 {
			continue
		}
		for i, j := range cl.tcs[k] {
			c.tc[c.lo[m]+int32(i)] = j
			c.member[c.lo[m]+int32(i)] = int32(m)
		}
	}
	return c
}

// of returns member m's cell for topic class j, which its class subscribes to.
func (c *cells) of(m, j int32) int32 {
	lo, hi := c.lo[m], c.lo[m+1]
	if hi-lo == 1 {
		return lo
	}
	i, _ := slices.BinarySearch(c.tc[lo:hi], j)
	return lo + int32(i)
}

// countHeld sets h from the partitions members own.
func (c *cells) countHeld(in *input, cl *classes, owner []int32) {
	for t := range in.topics {
		j := cl.topic[t]
		if j < 0 {
			continue
		}
		for _, m := range owner[in.base[t]:in.base[t+1]] {
			if m >= 0 {
				c.h[c.of(m, j)]++
			}
		}
	}
}

// held returns how many partitions each member held in all.
func (c *cells) held() []int32 {
	held := make([]int32, len(c.lo)-1)
	for m := range held {
		for i := c.lo[m]; i < c.lo[m+1]; i++ {
			held[m] += c.h[i]
		}
	}
	return held
}

// byTopicClass returns every topic class's cells, in member order.
func (c *cells) byTopicClass(ntc int) [][]int32 {
	count := make([]int32, ntc)
	for _, j := range c.tc {
		count[j]++
	}
	out := make([][]int32, ntc)
	for j := range out {
		out[j] = make([]int32, 0, count[j])
	}
	for i, j := range c.tc {
		out[j] = append(out[j], int32(i))
	}
	return out
}
