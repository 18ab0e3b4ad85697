package fsm

import (
	"bytes"
	"hash/maphash"
	"slices"
)

// offsetTable is a shard's committed offsets: every group's in one record
// (offsetrecord.go) in a pointer-free arena, found through an
// open-addressing index of uint64s, the topics' names held once each in
// topicNames. The garbage collector marks the arena's chunks and the
// index, a few objects, and follows no pointer per group; with a map of
// groups to their offsets it followed four or five a group, and at a
// million groups each collection marked for hundreds of milliseconds on
// every node (issue 36).
//
// groupOffsets stays the form a group's offsets are worked on in: a write
// decodes the group's record into the table's scratch, merges, and
// encodes the result back, but for the commit of partitions the group
// already holds without metadata or expiry, which overwrites their bytes
// in place (a consumer's every commit after its first).
//
// The ShardFSM's lock guards it: the read methods (has, get, load, each,
// len) may run concurrently with each other, the others (Apply's
// goroutine, or a restore building a table nobody else sees) alone.
type offsetTable struct {
	seed maphash.Seed
	// index holds an entry per group: indexUsed, the top tagBits of the
	// id's hash, and its record's ref; 0 is an empty place. Linear
	// probing from the hash's low bits; a removal shifts the entries
	// after it back, so there are no tombstones.
	index  []uint64
	groups int
	arena  recordArena
	topics topicNames
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

func newOffsetTable() *offsetTable {
	return &offsetTable{seed: maphash.MakeSeed(), arena: newRecordArena(), topics: newTopicNames()}
}

// len is how many groups hold offsets.
func (t *offsetTable) len() int { return t.groups }

// find returns the place of id's entry (h its hash), or of the empty
// place where it would go (roomForOne keeps the index under three
// quarters full), and whether id is there; -1 when there is no index yet.
func find[ID string | []byte](t *offsetTable, h uint64, id ID) (int, bool) {
	if len(t.index) == 0 {
		return -1, false
	}
	mask := len(t.index) - 1
	tag := h >> (64 - tagBits)
	for i := int(h) & mask; ; i = (i + 1) & mask {
		e := t.index[i]
		if e == 0 {
			return i, false
		}
		if (e>>refBits)&tagMask == tag && string(recordID(t.arena.record(recordRef(e&refMask)))) == string(id) {
			return i, true
		}
	}
}

// findGroup is find for a group id held as a string.
func (t *offsetTable) findGroup(group string) (int, bool) {
	return find(t, maphash.String(t.seed, group), group)
}

// entry is the index entry of a record of hash h at ref.
func entry(h uint64, ref recordRef) uint64 {
	return indexUsed | (h>>(64-tagBits))<<refBits | uint64(ref)
}

// refAt is the record ref of the entry at place i.
func (t *offsetTable) refAt(i int) recordRef { return recordRef(t.index[i] & refMask) }

// home is the place the entry at i would take in an index with nothing
// else: its id's hash's low bits.
func (t *offsetTable) home(i int) int {
	return int(maphash.Bytes(t.seed, recordID(t.arena.record(t.refAt(i))))) & (len(t.index) - 1)
}

// roomForOne grows the index when one more group would fill it past
// three quarters.
func (t *offsetTable) roomForOne() {
	if (t.groups+1)*4 <= len(t.index)*3 {
		return
	}
	old := t.index
	t.index = make([]uint64, max(minIndex, 2*len(old)))
	mask := len(t.index) - 1
	for _, e := range old {
		if e == 0 {
			continue
		}
		i := int(maphash.Bytes(t.seed, recordID(t.arena.record(recordRef(e&refMask))))) & mask
		for t.index[i] != 0 {
			i = (i + 1) & mask
		}
		t.index[i] = e
	}
}

// has reports whether group holds an offset.
func (t *offsetTable) has(group string) bool {
	_, ok := t.findGroup(group)
	return ok
}

// hasID is has for a group id held as bytes.
func (t *offsetTable) hasID(id []byte) bool {
	_, ok := find(t, maphash.Bytes(t.seed, id), id)
	return ok
}

// get returns one offset of group.
func (t *offsetTable) get(group string, tp TopicPartition) (Offset, bool) {
	i, ok := t.findGroup(group)
	if !ok {
		return Offset{}, false
	}
	id, known := t.topics.byName[tp.Topic]
	if !known {
		return Offset{}, false
	}
	var out Offset
	found := false
	recordTopics(t.arena.record(t.refAt(i)), func(rt recordTopic) bool {
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

// load returns a copy of group's offsets.
func (t *offsetTable) load(group string) (groupOffsets, bool) {
	var g groupOffsets
	i, ok := t.findGroup(group)
	if ok {
		decodeRecord(t.arena.record(t.refAt(i)), t.topics.names, &g)
	}
	return g, ok
}

// each calls fn with a copy of each group's offsets, in no order.
func (t *offsetTable) each(fn func(group string, g groupOffsets)) {
	for i, e := range t.index {
		if e != 0 {
			var g groupOffsets
			rec := t.arena.record(t.refAt(i))
			decodeRecord(rec, t.topics.names, &g)
			fn(string(recordID(rec)), g)
		}
	}
}

// setAll stores batch (sortBatch's) as offsets of group. Apply's
// goroutine.
func (t *offsetTable) setAll(group string, batch []tpOffset) {
	if len(batch) == 0 {
		return
	}
	i, found := t.findGroup(group)
	if found && t.overwrite(t.arena.record(t.refAt(i)), batch) {
		return
	}
	g := &t.scratch
	if found {
		decodeRecord(t.arena.record(t.refAt(i)), t.topics.names, g)
	} else {
		g.topics, g.n = g.topics[:0], 0
	}
	g.setAll(batch)
	store(t, group, maphash.String(t.seed, group), i, found, g)
	t.trimScratch()
}

// maxScratchBytes bounds what a write keeps of its scratch for the next:
// a rare group of thousands of partitions lets its arrays go.
const maxScratchBytes = 64 << 10

// trimScratch lets the scratch's arrays go when they grew past
// maxScratchBytes. Apply's goroutine.
func (t *offsetTable) trimScratch() {
	held := cap(t.buf)
	for _, tt := range t.scratch.topics[:cap(t.scratch.topics)] {
		held += cap(tt.parts)*packedPartSize + cap(tt.extra)*extraSize
	}
	if held > maxScratchBytes {
		t.scratch, t.buf = groupOffsets{}, nil
	}
}

// overwrite writes batch over the parts of rec when each of its offsets
// is one of a partition rec holds, in a topic without extras, and has
// neither metadata nor expiry; otherwise it reports false, maybe having
// written some of them, which is harmless: setAll's merge then writes
// the same values again.
func (t *offsetTable) overwrite(rec []byte, batch []tpOffset) bool {
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

// put stores g (not empty) as the offsets of group, which holds none: a
// restore's. Not for Apply's goroutine: it does not keep g.
func put(t *offsetTable, group []byte, g *groupOffsets) {
	h := maphash.Bytes(t.seed, group)
	i, found := find(t, h, group)
	store(t, group, h, i, found, g)
}

// store makes g the record of group (h its hash), whose entry is at place
// i (found) or would go there, or deletes group when g holds nothing. g
// is the scratch or the caller's; store leaves it holding no metadata
// string.
func store[ID string | []byte](t *offsetTable, group ID, h uint64, i int, found bool, g *groupOffsets) {
	if g.len() == 0 {
		if found {
			t.remove(i)
		}
		return
	}
	t.oldTopics = t.oldTopics[:0]
	var old recordRef
	if found {
		old = t.refAt(i)
		recordTopics(t.arena.record(old), func(rt recordTopic) bool {
			t.oldTopics = append(t.oldTopics, rt.id)
			return true
		})
	}
	t.buf = appendRecord(t.buf[:0], group, g, t.topics.acquire)
	for ti := range g.topics {
		clear(g.topics[ti].extra)
	}
	ref := old
	if !found || !t.fits(old, len(t.buf)) {
		ref = t.arena.alloc(len(t.buf))
	}
	copy(t.arena.record(ref)[1:], t.buf[1:]) // byte 0 is the arena's
	if found && ref != old {
		t.arena.release(old)
	}
	for _, id := range t.oldTopics {
		t.topics.release(id)
	}
	if !found {
		t.roomForOne()
		i, _ = find(t, h, group)
		t.groups++
	}
	t.index[i] = entry(h, ref)
}

// fits reports whether a record of n bytes belongs in ref's slot: one of
// the class n needs, or a chunk of its own of at least n bytes.
func (t *offsetTable) fits(ref recordRef, n int) bool {
	slot := t.arena.record(ref)
	if slot[0] == largeClass {
		return classOf(n) == largeClass && n <= len(slot)
	}
	return classOf(n) == int(slot[0])
}

// removeAll deletes the offsets of tps (sorted by compareTP) from group,
// and group when it is left with none. Apply's goroutine.
func (t *offsetTable) removeAll(group string, tps []TopicPartition) {
	i, found := t.findGroup(group)
	if !found {
		return
	}
	g := &t.scratch
	decodeRecord(t.arena.record(t.refAt(i)), t.topics.names, g)
	g.removeAll(tps)
	store(t, group, maphash.String(t.seed, group), i, true, g)
	t.trimScratch()
}

// delete deletes group's offsets. Apply's goroutine.
func (t *offsetTable) delete(group string) {
	if i, found := t.findGroup(group); found {
		t.remove(i)
	}
}

// remove deletes the group whose entry is at place i: its record, its
// topics' references, and its entry, the entries after it shifted back
// so that every entry stays reachable from its home.
func (t *offsetTable) remove(i int) {
	ref := t.refAt(i)
	recordTopics(t.arena.record(ref), func(rt recordTopic) bool {
		t.topics.release(rt.id)
		return true
	})
	t.arena.release(ref)
	t.groups--
	mask := len(t.index) - 1
	t.index[i] = 0
	for j := (i + 1) & mask; t.index[j] != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j].
		h := t.home(j)
		if i <= j && (h <= i || h > j) || i > j && h <= i && h > j {
			t.index[i], t.index[j] = t.index[j], 0
			i = j
		}
	}
}

// readOnlyClone copies t for a snapshot, sharing no memory that writes
// change: Persist reads it (sortedRecords, decode) while applies go on.
func (t *offsetTable) readOnlyClone() *offsetTable {
	return &offsetTable{seed: t.seed, index: slices.Clone(t.index), groups: t.groups,
		arena: t.arena.readOnlyClone(), topics: topicNames{names: slices.Clone(t.topics.names)}}
}

// sortedRecords returns every group's record, sorted by id.
func (t *offsetTable) sortedRecords() [][]byte {
	out := make([][]byte, 0, t.groups)
	for i, e := range t.index {
		if e != 0 {
			out = append(out, t.arena.record(t.refAt(i)))
		}
	}
	slices.SortFunc(out, func(a, b []byte) int { return bytes.Compare(recordID(a), recordID(b)) })
	return out
}

// decode makes g hold rec's offsets (g's slices reused).
func (t *offsetTable) decode(rec []byte, g *groupOffsets) { decodeRecord(rec, t.topics.names, g) }

// memory is the bytes t's index and arena take.
func (t *offsetTable) memory() int { return 8*len(t.index) + t.arena.bytes() }
