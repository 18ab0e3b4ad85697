package fsm

import (
	"cmp"
	"slices"
)

// groupOffsets is one group's committed offsets, kept compact: per topic
// (sorted by name), its partitions' offsets sorted by partition, each in 48
// bytes. A map[TopicPartition]Offset per group took 163 bytes an offset
// (its 72-byte slots, the slots its growth leaves empty, and a table per
// group); at a million offsets per node that was half of the heap. The
// ShardFSM holds it under its lock; it is not safe for concurrent use.
type groupOffsets struct {
	topics []topicOffsets
	n      int // offsets held
}

// topicOffsets is one topic's committed partitions, sorted by partition.
type topicOffsets struct {
	topic string
	parts []partitionOffset
}

// partitionOffset is an Offset and its partition, with the int32s side by
// side so the struct has no padding.
type partitionOffset struct {
	offset, commitTS, expireTS int64
	metadata                   string
	leaderEpoch, partition     int32
}

func packOffset(partition int32, o Offset) partitionOffset {
	return partitionOffset{
		offset: o.Offset, commitTS: o.CommitTimestamp, expireTS: o.ExpireTimestamp,
		metadata: o.Metadata, leaderEpoch: o.LeaderEpoch, partition: partition,
	}
}

func (p partitionOffset) unpack() Offset {
	return Offset{Offset: p.offset, LeaderEpoch: p.leaderEpoch, Metadata: p.metadata, CommitTimestamp: p.commitTS, ExpireTimestamp: p.expireTS}
}

func (g *groupOffsets) topic(name string) (int, bool) {
	return slices.BinarySearchFunc(g.topics, name, func(t topicOffsets, name string) int { return cmp.Compare(t.topic, name) })
}

func (t *topicOffsets) partition(p int32) (int, bool) {
	return slices.BinarySearchFunc(t.parts, p, func(po partitionOffset, p int32) int { return cmp.Compare(po.partition, p) })
}

// tpOffset is one offset of a batch for setAll.
type tpOffset struct {
	tp TopicPartition
	o  Offset
}

// compareTP orders by topic, then partition.
func compareTP(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// sortBatch sorts batch by partition and keeps the last offset given for
// each (as applying them one by one would); it reorders batch in place.
func sortBatch(batch []tpOffset) []tpOffset {
	slices.SortStableFunc(batch, func(a, b tpOffset) int { return compareTP(a.tp, b.tp) })
	out := batch[:0]
	for i, e := range batch {
		if i+1 < len(batch) && batch[i+1].tp == e.tp {
			continue // a later one replaces it
		}
		out = append(out, e)
	}
	return out
}

// setAll stores every offset of batch, which sortBatch has sorted, with
// one merge per topic: a commit of many partitions in any order costs
// their sort, not a shift of the slice per partition.
func (g *groupOffsets) setAll(batch []tpOffset) {
	for i := 0; i < len(batch); {
		j := i + 1
		for j < len(batch) && batch[j].tp.Topic == batch[i].tp.Topic {
			j++
		}
		g.mergeTopic(batch[i].tp.Topic, batch[i:j])
		i = j
	}
}

// mergeTopic merges run, one topic's sorted offsets, into that topic.
// Offsets of partitions it holds are replaced in place; new ones make a
// slice of exactly the size needed.
func (g *groupOffsets) mergeTopic(topic string, run []tpOffset) {
	ti, ok := g.topic(topic)
	if !ok {
		g.topics = slices.Insert(g.topics, ti, topicOffsets{topic: topic})
	}
	t := &g.topics[ti]
	added := 0
	for i, k := 0, 0; k < len(run); {
		switch {
		case i < len(t.parts) && t.parts[i].partition < run[k].tp.Partition:
			i++
		case i < len(t.parts) && t.parts[i].partition == run[k].tp.Partition:
			t.parts[i] = packOffset(run[k].tp.Partition, run[k].o)
			i, k = i+1, k+1
		default:
			added, k = added+1, k+1
		}
	}
	if added == 0 {
		return
	}
	merged := make([]partitionOffset, 0, len(t.parts)+added)
	i, k := 0, 0
	for i < len(t.parts) || k < len(run) {
		switch {
		case k == len(run) || i < len(t.parts) && t.parts[i].partition < run[k].tp.Partition:
			merged = append(merged, t.parts[i])
			i++
		case i < len(t.parts) && t.parts[i].partition == run[k].tp.Partition:
			merged = append(merged, t.parts[i]) // replaced above
			i, k = i+1, k+1
		default:
			merged = append(merged, packOffset(run[k].tp.Partition, run[k].o))
			k++
		}
	}
	t.parts = merged
	g.n += added
}

// removeAll deletes the offsets of tps (sorted by compareTP, any may be
// missing), one pass per topic, and the topics left with none.
func (g *groupOffsets) removeAll(tps []TopicPartition) {
	for i := 0; i < len(tps); {
		j := i + 1
		for j < len(tps) && tps[j].Topic == tps[i].Topic {
			j++
		}
		if ti, ok := g.topic(tps[i].Topic); ok {
			t := &g.topics[ti]
			kept := t.parts[:0]
			k := i
			for _, p := range t.parts {
				for k < j && tps[k].Partition < p.partition {
					k++
				}
				if k < j && tps[k].Partition == p.partition {
					g.n--
					continue
				}
				kept = append(kept, p)
			}
			clear(t.parts[len(kept):])
			t.parts = kept
			if len(t.parts) == 0 {
				g.topics = slices.Delete(g.topics, ti, ti+1)
			}
		}
		i = j
	}
}

// set stores o as tp's offset, replacing any.
func (g *groupOffsets) set(tp TopicPartition, o Offset) { g.setAll([]tpOffset{{tp, o}}) }

// remove deletes tp's offset, if any.
func (g *groupOffsets) remove(tp TopicPartition) { g.removeAll([]TopicPartition{tp}) }

// get returns tp's offset.
func (g *groupOffsets) get(tp TopicPartition) (Offset, bool) {
	i, ok := g.topic(tp.Topic)
	if !ok {
		return Offset{}, false
	}
	t := &g.topics[i]
	j, ok := t.partition(tp.Partition)
	if !ok {
		return Offset{}, false
	}
	return t.parts[j].unpack(), true
}

// len is how many offsets g holds (0 for nil).
func (g *groupOffsets) len() int {
	if g == nil {
		return 0
	}
	return g.n
}

// each calls fn for every offset, by topic and then partition.
func (g *groupOffsets) each(fn func(TopicPartition, Offset)) {
	if g == nil {
		return
	}
	for _, t := range g.topics {
		for _, p := range t.parts {
			fn(TopicPartition{Topic: t.topic, Partition: p.partition}, p.unpack())
		}
	}
}
