package fsm

import (
	"cmp"
	"slices"
)

// groupOffsets is one group's committed offsets in the form they are
// merged, read and snapshotted in: per topic (sorted by name), its
// partitions' offsets sorted by partition, each in 24 bytes with no
// pointer. A shard keeps them encoded, a record a group
// (grouptable.go), and decodes a group into one when a write must merge
// or a reader asks for it. It is not safe for concurrent use.
type groupOffsets struct {
	topics []topicOffsets
	n      int // offsets held
}

// topicOffsets is one topic's committed partitions, sorted by partition.
// extra holds, index for index with parts, what few commits carry: the
// metadata string and an explicit expiry (OffsetCommit v1–v4). It is nil
// until an offset of the topic has either (metadata other than "", an
// ExpireTimestamp other than -1: clients commit neither almost always),
// so a commit of the common kind costs 24 bytes an offset and no pointer;
// once made, it stays with the topic's parts.
type topicOffsets struct {
	topic string
	parts []partitionOffset
	extra []offsetExtra
}

// partitionOffset is an offset without its metadata and expiry, with the
// int32s side by side so the struct has no padding.
type partitionOffset struct {
	offset, commitTS       int64
	leaderEpoch, partition int32
}

// offsetExtra is an offset's metadata and expiry (plainExtra when it has
// neither).
type offsetExtra struct {
	metadata string
	expireTS int64
}

// plainExtra is the extra of an offset without metadata or expiry.
var plainExtra = offsetExtra{expireTS: -1}

func packOffset(partition int32, o Offset) partitionOffset {
	return partitionOffset{offset: o.Offset, commitTS: o.CommitTimestamp, leaderEpoch: o.LeaderEpoch, partition: partition}
}

func extraOf(o Offset) offsetExtra {
	return offsetExtra{metadata: o.Metadata, expireTS: o.ExpireTimestamp}
}

// at returns the offset at index i.
func (t *topicOffsets) at(i int) Offset {
	p, e := t.parts[i], plainExtra
	if t.extra != nil {
		e = t.extra[i]
	}
	return Offset{Offset: p.offset, LeaderEpoch: p.leaderEpoch, Metadata: e.metadata, CommitTimestamp: p.commitTS, ExpireTimestamp: e.expireTS}
}

// put stores o as the offset at index i, of partition.
func (t *topicOffsets) put(i int, partition int32, o Offset) {
	t.parts[i] = packOffset(partition, o)
	e := extraOf(o)
	switch {
	case t.extra != nil:
		t.extra[i] = e
	case e != plainExtra:
		t.extra = plainExtras(len(t.parts))
		t.extra[i] = e
	}
}

// plainExtras is n plainExtra, with room for nothing more.
func plainExtras(n int) []offsetExtra {
	out := make([]offsetExtra, n)
	for i := range out {
		out[i] = plainExtra
	}
	return out
}

func (g *groupOffsets) topic(name string) (int, bool) {
	return slices.BinarySearchFunc(g.topics, name, func(t topicOffsets, name string) int { return cmp.Compare(t.topic, name) })
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
// A batch already in order, as clients and snapshots give it, is
// returned as it is (strictly sorted, it has no partition twice).
func sortBatch(batch []tpOffset) []tpOffset {
	if sortedBatch(batch) {
		return batch
	}
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
	if len(g.topics) == 0 {
		g.fill(batch)
		return
	}
	for i := 0; i < len(batch); {
		j := i + 1
		for j < len(batch) && batch[j].tp.Topic == batch[i].tp.Topic {
			j++
		}
		g.mergeTopic(batch[i].tp.Topic, batch[i:j])
		i = j
	}
}

// fill makes g, which holds nothing, hold batch (sorted, no duplicates:
// sortBatch's): what setAll's merges would make, without them (a group's
// first commit), in the slices g's topics had (g is the groupTable's
// scratch).
func (g *groupOffsets) fill(batch []tpOffset) {
	g.topics = g.topics[:0]
	for i := 0; i < len(batch); {
		j := i + 1
		for j < len(batch) && batch[j].tp.Topic == batch[i].tp.Topic {
			j++
		}
		g.nextTopic().setRun(batch[i:j])
		i = j
	}
	g.n = len(batch)
}

// nextTopic appends a topic to g and returns it, with the slices the
// topic at its index had when g's array has room (its parts to be
// overwritten, its extras empty): g is a scratch, decoded into again and
// again.
func (g *groupOffsets) nextTopic() *topicOffsets {
	k := len(g.topics)
	if k < cap(g.topics) {
		g.topics = g.topics[:k+1]
	} else {
		g.topics = append(g.topics, topicOffsets{})
	}
	t := &g.topics[k]
	clear(t.extra)
	t.extra = t.extra[:0]
	return t
}

// setRun makes t hold run, one topic's sorted offsets (not empty), in
// t's slices where they have room, extras only when an offset needs one:
// a group's first commit's topics (fill) and a topic new to a group
// (mergeTopic).
func (t *topicOffsets) setRun(run []tpOffset) {
	t.topic = run[0].tp.Topic
	t.parts = slices.Grow(t.parts[:0], len(run))[:len(run)]
	t.extra = nil
	if slices.ContainsFunc(run, func(e tpOffset) bool { return extraOf(e.o) != plainExtra }) {
		t.extra = make([]offsetExtra, len(run))
	}
	for k, e := range run {
		t.parts[k] = packOffset(e.tp.Partition, e.o)
		if t.extra != nil {
			t.extra[k] = extraOf(e.o)
		}
	}
}

// sortedBatch reports whether batch is as sortBatch leaves it: sorted by
// compareTP, with no partition twice.
func sortedBatch(batch []tpOffset) bool {
	for i := 1; i < len(batch); i++ {
		if compareTP(batch[i-1].tp, batch[i].tp) >= 0 {
			return false
		}
	}
	return true
}

// mergeTopic merges run, one topic's sorted offsets, into that topic, or
// adds the topic (newTopic). Offsets of partitions it holds are replaced
// in place; new ones make a slice of exactly the size needed (and of
// extras, when the topic has them or a new offset needs one).
func (g *groupOffsets) mergeTopic(topic string, run []tpOffset) {
	ti, ok := g.topic(topic)
	if !ok {
		var t topicOffsets
		t.setRun(run)
		g.topics = slices.Insert(g.topics, ti, t)
		g.n += len(run)
		return
	}
	t := &g.topics[ti]
	added, plain := 0, true
	for i, k := 0, 0; k < len(run); {
		switch {
		case i < len(t.parts) && t.parts[i].partition < run[k].tp.Partition:
			i++
		case i < len(t.parts) && t.parts[i].partition == run[k].tp.Partition:
			t.put(i, run[k].tp.Partition, run[k].o)
			i, k = i+1, k+1
		default:
			plain = plain && extraOf(run[k].o) == plainExtra
			added, k = added+1, k+1
		}
	}
	if added == 0 {
		return
	}
	merged := make([]partitionOffset, 0, len(t.parts)+added)
	var extra []offsetExtra
	if t.extra != nil || !plain {
		extra = make([]offsetExtra, 0, len(t.parts)+added)
	}
	kept := func(i int) {
		merged = append(merged, t.parts[i])
		if extra != nil {
			e := plainExtra
			if t.extra != nil {
				e = t.extra[i]
			}
			extra = append(extra, e)
		}
	}
	i, k := 0, 0
	for i < len(t.parts) || k < len(run) {
		switch {
		case k == len(run) || i < len(t.parts) && t.parts[i].partition < run[k].tp.Partition:
			kept(i)
			i++
		case i < len(t.parts) && t.parts[i].partition == run[k].tp.Partition:
			kept(i) // replaced above
			i, k = i+1, k+1
		default:
			merged = append(merged, packOffset(run[k].tp.Partition, run[k].o))
			if extra != nil {
				extra = append(extra, extraOf(run[k].o))
			}
			k++
		}
	}
	t.parts, t.extra = merged, extra
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
			n, k := 0, i
			for x, p := range t.parts {
				for k < j && tps[k].Partition < p.partition {
					k++
				}
				if k < j && tps[k].Partition == p.partition {
					g.n--
					continue
				}
				t.parts[n] = p
				if t.extra != nil {
					t.extra[n] = t.extra[x]
				}
				n++
			}
			t.parts = t.parts[:n]
			if t.extra != nil {
				clear(t.extra[n:]) // drop the removed metadata strings
				t.extra = t.extra[:n]
			}
			if len(t.parts) == 0 {
				g.topics = slices.Delete(g.topics, ti, ti+1)
			}
		}
		i = j
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
	for ti := range g.topics {
		t := &g.topics[ti]
		for i, p := range t.parts {
			fn(TopicPartition{Topic: t.topic, Partition: p.partition}, t.at(i))
		}
	}
}
