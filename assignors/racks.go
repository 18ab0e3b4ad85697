package assignors

// racks is where members and partition replicas are (KIP-881). Rack names
// are numbered; a member's rack is memberInput.rack.
type racks struct {
	names []string
	lo    []int32 // partition p's replica racks are ids[lo[p]:lo[p+1]]
	ids   []int32
	// on is set when some member and some partition have a rack: only then
	// do assignors place partitions by rack.
	on bool
}

// build numbers the racks of every partition's replicas, interning rack
// names with intern.
func (r *racks) build(in *input, partitionRacks map[string][][]string, intern func(string) int32) {
	n := in.numPartitions()
	r.lo = make([]int32, n+1)
	for t, name := range in.topics {
		perPartition := partitionRacks[name]
		first := in.base[t]
		for i := range in.base[t+1] - first {
			p := first + i
			r.lo[p] = int32(len(r.ids))
			if int(i) >= len(perPartition) {
				continue
			}
			start := len(r.ids)
			for _, rack := range perPartition[i] {
				if rack == "" {
					continue
				}
				id := intern(rack)
				dup := false
				for _, have := range r.ids[start:] {
					dup = dup || have == id
				}
				if !dup {
					r.ids = append(r.ids, id)
				}
			}
		}
	}
	r.lo[n] = int32(len(r.ids))
	r.on = len(r.ids) > 0
	if !r.on {
		r.lo, r.ids = nil, nil
	}
}

// of returns the racks of partition p's replicas.
func (r *racks) of(p int32) []int32 {
	if r.lo == nil {
		return nil
	}
	return r.ids[r.lo[p]:r.lo[p+1]]
}

// local reports whether a member in rack is rack-local to partition p: some
// replica of p is in rack.
func (r *racks) local(p, rack int32) bool {
	if rack < 0 || r.lo == nil {
		return false
	}
	for _, id := range r.ids[r.lo[p]:r.lo[p+1]] {
		if id == rack {
			return true
		}
	}
	return false
}
