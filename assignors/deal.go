package assignors

// realize picks the partitions the counts (c.x) stand for, in owner, which
// holds who owned each partition and becomes the plan. Every member keeps
// as many of its own partitions of each topic class as its count allows,
// rack-local ones first; the others are shed. Then the partitions nobody
// keeps are dealt round robin, in partition order, to the members still
// short, as Kafka's sticky assignors deal unassigned partitions: with
// racks, a partition goes first to a short member in the rack of one of its
// replicas.
func realize(in *input, cl *classes, c *cells, owner []int32) {
	quota := make([]int32, len(c.x)) // own partitions each cell keeps
	for i := range quota {
		quota[i] = min(c.x[i], c.h[i])
	}
	byRack := in.racks.on
	var localQuota []int32 // with racks: rack-local ones among quota
	if byRack {
		localQuota = make([]int32, len(c.x))
		eachOwned(in, cl, c, owner, func(p, m, i int32) {
			if in.racks.local(p, in.members[m].rack) {
				localQuota[i]++
			}
		})
		for i := range localQuota {
			localQuota[i] = min(localQuota[i], quota[i])
		}
	}
	kept := make([]int32, len(c.x))
	keptLocal := make([]int32, len(c.x))
	eachOwned(in, cl, c, owner, func(p, m, i int32) {
		switch {
		case !byRack:
			if kept[i] < quota[i] {
				kept[i]++
				return
			}
		case in.racks.local(p, in.members[m].rack):
			if keptLocal[i] < localQuota[i] {
				keptLocal[i]++
				kept[i]++
				return
			}
		default:
			if kept[i]-keptLocal[i] < quota[i]-localQuota[i] {
				kept[i]++
				return
			}
		}
		owner[p] = unassigned
	})

	need := kept // reuse: what each cell still needs
	for i := range need {
		need[i] = c.x[i] - kept[i]
	}
	dealers := make([]dealer, len(cl.size))
	for i, n := range need {
		if n > 0 {
			j := c.tc[i]
			dealers[j].add(int32(i), in.members[c.member[i]].rack, byRack)
		}
	}
	for t := range in.topics {
		j := cl.topic[t]
		if j < 0 {
			continue
		}
		d := &dealers[j]
		for p := in.base[t]; p < in.base[t+1]; p++ {
			if owner[p] != unassigned {
				continue
			}
			i := int32(-1)
			if byRack {
				i = d.local(p, in.racks.of(p), need)
			} else {
				i = d.all.next(need)
			}
			if i >= 0 {
				owner[p] = c.member[i]
			}
		}
	}
	for j := range dealers {
		d := &dealers[j]
		for _, p := range d.deferred {
			if i := d.all.next(need); i >= 0 {
				owner[p] = c.member[i]
			}
		}
	}
}

// eachOwned calls fn for every owned partition of a subscribed topic, with
// its owner and the owner's cell for the topic's class.
func eachOwned(in *input, cl *classes, c *cells, owner []int32, fn func(p, m, cell int32)) {
	for t := range in.topics {
		j := cl.topic[t]
		if j < 0 {
			continue
		}
		for p := in.base[t]; p < in.base[t+1]; p++ {
			if m := owner[p]; m >= 0 {
				fn(p, m, c.of(m, j))
			}
		}
	}
}

// dealer deals one topic class's partitions to the cells that need some.
type dealer struct {
	all      ring
	racks    map[int32]*ring // rack → its members' cells
	deferred []int32         // partitions no rack-local member needed
}

func (d *dealer) add(cell, rack int32, byRack bool) {
	d.all.cells = append(d.all.cells, cell)
	if !byRack || rack < 0 {
		return
	}
	if d.racks == nil {
		d.racks = make(map[int32]*ring)
	}
	r := d.racks[rack]
	if r == nil {
		r = &ring{}
		d.racks[rack] = r
	}
	r.cells = append(r.cells, cell)
}

// local deals partition p to a member in the rack of one of its replicas,
// or defers it.
func (d *dealer) local(p int32, racks []int32, need []int32) int32 {
	for _, rack := range racks {
		if r := d.racks[rack]; r != nil {
			if i := r.next(need); i >= 0 {
				return i
			}
		}
	}
	d.deferred = append(d.deferred, p)
	return -1
}

// ring deals round robin to cells while they need partitions.
type ring struct {
	cells []int32
	at    int
}

// next returns the next cell that needs a partition, taking one off its
// need, or -1. Cells that need nothing more are dropped when the ring comes
// round.
func (r *ring) next(need []int32) int32 {
	for {
		if r.at == len(r.cells) {
			kept := r.cells[:0]
			for _, i := range r.cells {
				if need[i] > 0 {
					kept = append(kept, i)
				}
			}
			r.cells, r.at = kept, 0
			if len(kept) == 0 {
				return -1
			}
		}
		i := r.cells[r.at]
		r.at++
		if need[i] > 0 {
			need[i]--
			return i
		}
	}
}
