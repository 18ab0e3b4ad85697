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

// set stores o as tp's offset, replacing any.
func (g *groupOffsets) set(tp TopicPartition, o Offset) {
	i, ok := g.topic(tp.Topic)
	if !ok {
		g.topics = slices.Insert(g.topics, i, topicOffsets{topic: tp.Topic})
	}
	t := &g.topics[i]
	j, ok := t.partition(tp.Partition)
	if ok {
		t.parts[j] = packOffset(tp.Partition, o)
		return
	}
	t.parts = slices.Insert(t.parts, j, packOffset(tp.Partition, o))
	g.n++
}

// reserve makes room for n partitions of topic that it does not hold yet,
// so a commit of many new partitions grows the topic's slice once, to its
// size (append's doubling left a third of it empty).
func (g *groupOffsets) reserve(topic string, n int) {
	i, ok := g.topic(topic)
	if !ok {
		g.topics = slices.Insert(g.topics, i, topicOffsets{topic: topic})
	}
	g.topics[i].parts = slices.Grow(g.topics[i].parts, n)
}

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

// remove deletes tp's offset, if any, and a topic left with none.
func (g *groupOffsets) remove(tp TopicPartition) {
	i, ok := g.topic(tp.Topic)
	if !ok {
		return
	}
	t := &g.topics[i]
	j, ok := t.partition(tp.Partition)
	if !ok {
		return
	}
	t.parts = slices.Delete(t.parts, j, j+1)
	g.n--
	if len(t.parts) == 0 {
		g.topics = slices.Delete(g.topics, i, i+1)
	}
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
