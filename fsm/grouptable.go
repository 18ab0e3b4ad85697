package fsm

import (
	"bytes"
	"hash/maphash"
	"math/bits"
	"slices"
)

// groupTable is what a shard keeps of its groups by the million: each
// group's committed offsets, and whether it is a simple classic group
// (classicGroups) and since when. A group with either has one record
// (grouprecord.go) in a pointer-free arena, found through an
// open-addressing index of uint64s, the topics' names held once each in
// topicNames. The garbage collector marks the arena's chunks and the
// index, a few objects, and follows no pointer per group: with maps of
// groups to their offsets and timestamps it followed five or six a
// group, and at a million groups each collection marked for hundreds of
// milliseconds on every node (issue 36).
//
// groupOffsets stays the form a group's offsets are worked on in: a write
// decodes the group's record into the table's scratch, merges, and
// encodes the result back, but for the commit of partitions the group
// already holds without metadata or expiry, which overwrites their bytes
// in place (a consumer's every commit after its first).
//
// The ShardFSM's lock guards it: the read methods may run concurrently
// with each other, the writes (Apply's goroutine, or a restore building a
// table nobody else sees) alone.
type groupTable struct {
	seed maphash.Seed
	// index holds an entry per record: indexUsed, the top tagBits of the
	// id's hash, and the record's ref; 0 is an empty place. Linear
	// probing from the place the hash's top bits name (it has
	// 2^(64-shift) places), so that while the index has at most
	// 2^tagBits places an entry's own tag says where it belongs: growing
	// and removing read no record. A removal shifts the entries after it
	// back, so there are no tombstones.
	index []uint64
	shift uint
	// records, offsetGroups and simpleGroups count the records, those
	// holding an offset, and those marked simple.
	records, offsetGroups, simpleGroups int
	arena                               recordArena
	topics                              topicNames
	// scratch, buf and oldTopics are a write's, reused from write to
	// write.
	scratch   groupOffsets
	buf       []byte
	oldTopics []uint32
}

const (
	indexUsed = 1 << 63
	tagBits   = 63 - refBits
	tagMask   = 1<<tagBits - 1
	refMask   = 1<<refBits - 1
	// minIndex is the places of a table's first index.
	minIndex = 16
)

// tagHomeBits is the most places' bits an entry's tag gives its home for
// (home): tagBits, lowered by a test to take the path that rehashes.
var tagHomeBits uint = tagBits

func newGroupTable() *groupTable {
	return &groupTable{seed: maphash.MakeSeed(), arena: newRecordArena(), topics: newTopicNames()}
}

// find returns the place of id's entry (h its hash), or of the empty
// place where it would go (roomForOne keeps the index under three
// quarters full), and whether id is there; -1 when there is no index yet.
func find[ID string | []byte](t *groupTable, h uint64, id ID) (int, bool) {
	if len(t.index) == 0 {
		return -1, false
	}
	mask := len(t.index) - 1
	tag := h >> (64 - tagBits)
	for i := int(h >> t.shift); ; i = (i + 1) & mask {
		e := t.index[i]
		if e == 0 {
			return i, false
		}
		if (e>>refBits)&tagMask == tag && string(recordID(t.arena.record(recordRef(e&refMask)))) == string(id) {
			return i, true
		}
	}
}

// hashOf is the hash of id in t's index.
func hashOf[ID string | []byte](t *groupTable, id ID) uint64 {
	if s, ok := any(id).(string); ok {
		return maphash.String(t.seed, s)
	}
	return maphash.Bytes(t.seed, []byte(id))
}

// locate is find for id, with id's hash, which a write's store needs.
func locate[ID string | []byte](t *groupTable, id ID) (h uint64, i int, found bool) {
	h = hashOf(t, id)
	i, found = find(t, h, id)
	return h, i, found
}

// recordOf returns id's record, nil when it has none.
func recordOf[ID string | []byte](t *groupTable, id ID) []byte {
	if _, i, ok := locate(t, id); ok {
		return t.arena.record(t.refAt(i))
	}
	return nil
}

// emptyScratch is the write's scratch, holding no offsets. Apply's
// goroutine, or a restore's.
func (t *groupTable) emptyScratch() *groupOffsets {
	t.scratch.topics, t.scratch.n = t.scratch.topics[:0], 0
	return &t.scratch
}

// entry is the index entry of a record of hash h at ref.
func entry(h uint64, ref recordRef) uint64 {
	return indexUsed | (h>>(64-tagBits))<<refBits | uint64(ref)
}

// refAt is the record ref of the entry at place i.
func (t *groupTable) refAt(i int) recordRef { return recordRef(t.index[i] & refMask) }

// home is the place entry e would take in an index with nothing else:
// the top bits of its id's hash, which its tag holds while the index has
// at most 2^tagHomeBits places. (Entries sharing a home then differ in
// the tag's other bits only, so past 2^17 places or so a probe compares
// more ids: the price of growing and removing without reading records.)
func (t *groupTable) home(e uint64) int {
	if bits := 64 - t.shift; bits <= tagHomeBits {
		return int((e >> refBits) & tagMask >> (tagBits - bits))
	}
	return int(maphash.Bytes(t.seed, recordID(t.arena.record(recordRef(e&refMask)))) >> t.shift)
}

// roomForOne grows the index when one more record would fill it past
// three quarters.
func (t *groupTable) roomForOne() {
	if (t.records+1)*4 <= len(t.index)*3 {
		return
	}
	old := t.index
	t.index = make([]uint64, max(minIndex, 2*len(old)))
	t.shift = uint(64 - bits.TrailingZeros(uint(len(t.index))))
	mask := len(t.index) - 1
	for _, e := range old {
		if e == 0 {
			continue
		}
		i := t.home(e)
		for t.index[i] != 0 {
			i = (i + 1) & mask
		}
		t.index[i] = e
	}
}

// eachRecord calls fn with every record, in no order.
func (t *groupTable) eachRecord(fn func(rec []byte)) {
	for i, e := range t.index {
		if e != 0 {
			fn(t.arena.record(t.refAt(i)))
		}
	}
}

// Offsets.

// offsetGroupCount is how many groups hold offsets.
func (t *groupTable) offsetGroupCount() int { return t.offsetGroups }

// hasOffsets reports whether group holds an offset.
func hasOffsets[ID string | []byte](t *groupTable, group ID) bool {
	rec := recordOf(t, group)
	return rec != nil && recordCount(rec) > 0
}

// offset returns one offset of group.
func (t *groupTable) offset(group string, tp TopicPartition) (Offset, bool) {
	rec := recordOf(t, group)
	id, known := t.topics.byName[tp.Topic]
	if rec == nil || !known {
		return Offset{}, false
	}
	var out Offset
	found := false
	recordTopics(rec, func(rt recordTopic) bool {
		if rt.id != id {
			return true
		}
		if k, ok := findPart(rt.parts, tp.Partition); ok {
			p, e := partAt(rt.parts, k), rt.extraAt(k)
			out = Offset{Offset: p.offset, LeaderEpoch: p.leaderEpoch, Metadata: e.metadata, CommitTimestamp: p.commitTS, ExpireTimestamp: e.expireTS}
			found = true
		}
		return false
	})
	return out, found
}

// offsets returns a copy of group's offsets.
func (t *groupTable) offsets(group string) (groupOffsets, bool) {
	var g groupOffsets
	rec := recordOf(t, group)
	if rec == nil || recordCount(rec) == 0 {
		return g, false
	}
	decodeRecord(rec, t.topics.names, &g)
	return g, true
}

// setOffsets stores batch (sortBatch's) as offsets of group. Apply's
// goroutine.
func (t *groupTable) setOffsets(group string, batch []tpOffset) {
	if len(batch) == 0 {
		return
	}
	h, i, found := locate(t, group)
	var mark simpleMark
	g := t.emptyScratch()
	if found {
		rec := t.arena.record(t.refAt(i))
		if t.overwrite(rec, batch) {
			return
		}
		mark = simpleMarkOf(rec)
		decodeRecord(rec, t.topics.names, g)
	}
	g.setAll(batch)
	store(t, group, h, i, found, mark, g)
	t.trimScratch()
}

// maxScratchBytes bounds what a write keeps of its scratch for the next:
// a rare group of thousands of partitions lets its arrays go.
const maxScratchBytes = 64 << 10

// trimScratch lets the scratch's arrays go when they grew past
// maxScratchBytes. Apply's goroutine.
func (t *groupTable) trimScratch() {
	held := cap(t.buf)
	for _, tt := range t.scratch.topics[:cap(t.scratch.topics)] {
		held += cap(tt.parts)*packedPartSize + cap(tt.extra)*24 // a string and an int64
	}
	if held > maxScratchBytes {
		t.scratch, t.buf = groupOffsets{}, nil
	}
}

// overwrite writes batch over the parts of rec when each of its offsets
// is one of a partition rec holds, in a topic without extras, and has
// neither metadata nor expiry; otherwise it reports false, maybe having
// written some of them, which is harmless: setOffsets's merge then
// writes the same values again.
func (t *groupTable) overwrite(rec []byte, batch []tpOffset) bool {
	ok := true
	for k := 0; ok && k < len(batch); {
		run := k + 1
		for run < len(batch) && batch[run].tp.Topic == batch[k].tp.Topic {
			run++
		}
		id, known := t.topics.byName[batch[k].tp.Topic]
		if !known {
			return false
		}
		ok = false
		recordTopics(rec, func(rt recordTopic) bool {
			if rt.id != id {
				return true
			}
			if len(rt.extras) > 0 {
				return false
			}
			for _, e := range batch[k:run] {
				i, has := findPart(rt.parts, e.tp.Partition)
				if !has || extraOf(e.o) != plainExtra {
					return false
				}
				putPart(rt.parts[i*packedPartSize:], packOffset(e.tp.Partition, e.o))
			}
			ok = true
			return false
		})
		k = run
	}
	return ok
}

// putOffsets stores g (not empty) as the offsets of group, which holds
// none: a restore's. It does not keep g.
func putOffsets(t *groupTable, group []byte, g *groupOffsets) {
	h, i, found := locate(t, group)
	var mark simpleMark
	if found {
		mark = simpleMarkOf(t.arena.record(t.refAt(i)))
	}
	store(t, group, h, i, found, mark, g)
}

// removeOffsets deletes the offsets of tps (sorted by compareTP) from
// group. Apply's goroutine.
func (t *groupTable) removeOffsets(group string, tps []TopicPartition) {
	h, i, found := locate(t, group)
	if !found {
		return
	}
	rec := t.arena.record(t.refAt(i))
	g := &t.scratch
	decodeRecord(rec, t.topics.names, g)
	g.removeAll(tps)
	store(t, group, h, i, true, simpleMarkOf(rec), g)
	t.trimScratch()
}

// deleteOffsets deletes all of group's offsets. Apply's goroutine.
func (t *groupTable) deleteOffsets(group string) {
	if h, i, found := locate(t, group); found {
		store(t, group, h, i, true, simpleMarkOf(t.arena.record(t.refAt(i))), t.emptyScratch())
	}
}

// Simple classic groups.

// simpleGroupCount is how many groups are marked simple.
func (t *groupTable) simpleGroupCount() int { return t.simpleGroups }

// simpleGroup returns the state timestamp of group when it is marked
// simple.
func simpleGroup[ID string | []byte](t *groupTable, group ID) (int64, bool) {
	if rec := recordOf(t, group); rec != nil {
		if m := simpleMarkOf(rec); m.simple {
			return m.ts, true
		}
	}
	return 0, false
}

// markSimple marks group simple, Empty since ts, or unmarks it (a mark
// of simple false). Apply's goroutine, or a restore's.
func markSimple[ID string | []byte](t *groupTable, group ID, mark simpleMark) {
	h, i, found := locate(t, group)
	if found {
		rec := t.arena.record(t.refAt(i))
		old := simpleMarkOf(rec)
		if old == mark {
			return
		}
		if mark.simple || recordCount(rec) > 0 {
			t.simpleGroups += countOf(mark.simple) - countOf(old.simple)
			putSimpleMark(rec, mark)
			return
		}
	}
	store(t, group, h, i, found, mark, t.emptyScratch())
}

// eachSimpleGroup calls fn with each group marked simple, in no order.
func (t *groupTable) eachSimpleGroup(fn func(id []byte, ts int64)) {
	t.eachRecord(func(rec []byte) {
		if m := simpleMarkOf(rec); m.simple {
			fn(recordID(rec), m.ts)
		}
	})
}

// Writes.

// store makes mark and g the record of group (h its hash), whose entry is
// at place i (found) or would go there, or removes it when it holds
// neither. g is the scratch or the caller's; store leaves it holding no
// metadata string.
func store[ID string | []byte](t *groupTable, group ID, h uint64, i int, found bool, mark simpleMark, g *groupOffsets) {
	if g.len() == 0 && !mark.simple {
		if found {
			t.remove(i)
		}
		return
	}
	t.oldTopics = t.oldTopics[:0]
	var old recordRef
	if found {
		old = t.refAt(i)
		rec := t.arena.record(old)
		recordTopics(rec, func(rt recordTopic) bool {
			t.oldTopics = append(t.oldTopics, rt.id)
			return true
		})
		t.uncount(rec)
	}
	t.buf = appendRecord(t.buf[:0], group, mark, g, t.topics.acquire)
	for ti := range g.topics {
		clear(g.topics[ti].extra)
	}
	ref := old
	if !found || !t.fits(old, len(t.buf)) {
		ref = t.arena.alloc(len(t.buf))
	}
	rec := t.arena.record(ref)
	copy(rec[1:], t.buf[1:]) // byte 0 is the arena's
	if found && ref != old {
		t.arena.release(old)
	}
	for _, id := range t.oldTopics {
		t.topics.release(id)
	}
	t.count(rec)
	if !found {
		t.roomForOne()
		i, _ = find(t, h, group)
		t.records++
	}
	t.index[i] = entry(h, ref)
}

// count adds rec to the counts of groups holding offsets and simple
// groups; uncount takes it away.
func (t *groupTable) count(rec []byte) {
	t.offsetGroups += countOf(recordCount(rec) > 0)
	t.simpleGroups += countOf(simpleMarkOf(rec).simple)
}

func (t *groupTable) uncount(rec []byte) {
	t.offsetGroups -= countOf(recordCount(rec) > 0)
	t.simpleGroups -= countOf(simpleMarkOf(rec).simple)
}

// countOf is 1 for true.
func countOf(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fits reports whether a record of n bytes belongs in ref's slot: one of
// the class n needs, or a chunk of its own of n bytes to twice that.
func (t *groupTable) fits(ref recordRef, n int) bool {
	slot := t.arena.record(ref)
	if slot[0] == largeClass {
		return classOf(n) == largeClass && n <= len(slot) && n >= len(slot)/2
	}
	return classOf(n) == int(slot[0])
}

// remove deletes the record whose entry is at place i, its topics'
// references, and its entry, the entries after it shifted back so that
// every entry stays reachable from its home.
func (t *groupTable) remove(i int) {
	ref := t.refAt(i)
	rec := t.arena.record(ref)
	recordTopics(rec, func(rt recordTopic) bool {
		t.topics.release(rt.id)
		return true
	})
	t.uncount(rec)
	t.arena.release(ref)
	t.records--
	mask := len(t.index) - 1
	t.index[i] = 0
	for j := (i + 1) & mask; t.index[j] != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j].
		h := t.home(t.index[j])
		if i <= j && (h <= i || h > j) || i > j && h <= i && h > j {
			t.index[i], t.index[j] = t.index[j], 0
			i = j
		}
	}
}

// Snapshots.

// readOnlyClone copies t for a snapshot, sharing no memory that writes
// change: Persist reads it (sortedRecords, decode, eachSimpleGroup) while
// applies go on. It holds the records and the topics' names, not what
// finds them by name: no write, and no lookup of a topic, on a clone.
func (t *groupTable) readOnlyClone() *groupTable {
	return &groupTable{seed: t.seed, index: slices.Clone(t.index), shift: t.shift, records: t.records,
		offsetGroups: t.offsetGroups, simpleGroups: t.simpleGroups,
		arena: t.arena.readOnlyClone(), topics: topicNames{names: slices.Clone(t.topics.names)}}
}

// sortedRecords returns every record, sorted by id.
func (t *groupTable) sortedRecords() [][]byte {
	out := make([][]byte, 0, t.records)
	t.eachRecord(func(rec []byte) { out = append(out, rec) })
	slices.SortFunc(out, func(a, b []byte) int { return bytes.Compare(recordID(a), recordID(b)) })
	return out
}

// decode makes g hold rec's offsets (g's slices reused).
func (t *groupTable) decode(rec []byte, g *groupOffsets) { decodeRecord(rec, t.topics.names, g) }

// memory is the bytes t's index and arena take.
func (t *groupTable) memory() int { return 8*len(t.index) + t.arena.bytes() }
