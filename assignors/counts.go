package assignors

// settleCounts decides how many partitions of each topic class every member
// gets (c.x), given each member's target and each class's share of every
// topic class (y, aligned with the class's topic classes, as classLoads
// left it). Members of a class subscribe to the same topic classes, so any
// split of the class's shares that meets their targets is feasible. The
// split keeps what members hold where it can: members above their target
// shed first what the class holds beyond its share, then whatever they
// hold most of; what the class still holds beyond a share is shed by the
// members holding most of it. What is left of each share is dealt to the
// members still short, in even rounds so that topic classes spread over
// members. repair then finds the split that moves the fewest partitions.
func settleCounts(cl *classes, c *cells, target []int32, y [][]int64) {
	for k, members := range cl.members {
		over := make([]int64, len(y[k])) // held beyond the class's share
		for j := range over {
			over[j] = -y[k][j]
		}
		room := make([]int32, len(members)) // target minus what is kept
		for n, m := range members {
			room[n] = target[m]
			for i := c.lo[m]; i < c.lo[m+1]; i++ {
				c.x[i] = c.h[i]
				room[n] -= c.h[i]
				over[i-c.lo[m]] += int64(c.h[i])
			}
		}
		// shed takes up to n of cell i back, bounded by what the class
		// holds beyond its share if within.
		shed := func(n int, i int32, most int64, within bool) int64 {
			j := i - c.lo[members[n]]
			a := min(int64(c.x[i]), most)
			if within {
				a = min(a, over[j])
			}
			if a > 0 {
				c.x[i] -= int32(a)
				room[n] += int32(a)
				over[j] -= a
			}
			return a
		}
		for n, m := range members {
			for _, within := range []bool{true, false} {
				for room[n] < 0 {
					best := int32(-1) // the cell to shed from: the fullest
					for i := c.lo[m]; i < c.lo[m+1]; i++ {
						if c.x[i] > 0 && (!within || over[i-c.lo[m]] > 0) && (best < 0 || c.x[i] > c.x[best]) {
							best = i
						}
					}
					if best < 0 {
						break
					}
					shed(n, best, int64(-room[n]), within)
				}
			}
		}
		for j := range over {
			for over[j] > 0 { // the fullest holders give up the rest
				best := -1
				for n, m := range members {
					if i := c.lo[m] + int32(j); c.x[i] > 0 && (best < 0 || c.x[i] > c.x[c.lo[members[best]]+int32(j)]) {
						best = n
					}
				}
				shed(best, c.lo[members[best]]+int32(j), 1+over[j]/int64(len(members)), true)
			}
		}

		left := y[k]
		for j := range left {
			left[j] = -over[j] // over is now at most zero: what each share lacks
		}
		short := make([]int, 0, len(members))
		for j := range left {
			for left[j] > 0 {
				short = short[:0]
				for n := range members {
					if room[n] > 0 {
						short = append(short, n)
					}
				}
				share := max(1, left[j]/int64(len(short)))
				for _, n := range short {
					a := int32(min(int64(room[n]), share, left[j]))
					c.x[c.lo[members[n]]+int32(j)] += a
					room[n] -= a
					left[j] -= int64(a)
					if left[j] == 0 {
						break
					}
				}
			}
		}
	}
}
