package fsm

import (
	"encoding/binary"
	"slices"
)

// A group's record: its id, whether it is a simple classic group (and
// since when), and its committed offsets, as one run of bytes in an
// groupTable's arena, with no pointer. Little-endian throughout:
//
//	[0]      the arena's size class (recordArena)
//	[1]      recordSimple when the group is a simple classic group
//	[2:4]    zero
//	[4:8]    id length
//	[8:12]   offsets held
//	[12:16]  topics
//	[16:24]  the simple group's state timestamp, 0 when it is not one
//	[24:]    the id, then each topic, sorted by name:
//	           topic id (groupTable.topics) u32, parts u32, extras' bytes u32,
//	           its parts, sorted by partition, packedPartSize bytes each
//	           (the packed snapshot's layout: partition, leader epoch,
//	           offset, commit timestamp), then, when one of them has any,
//	           each part's extra in extraSize bytes (expire timestamp
//	           i64, where its metadata starts u32, its length u32) and
//	           after them the metadata, one after another.
//
// The layout is memory only: snapshots write their own (packedsnapshot.go).

const (
	recordHeader = 24
	topicHeader  = 12
	extraSize    = 16
	recordSimple = 1
)

// simpleMark is the classic-group part of a record: whether its group is
// a simple classic group (classicGroups) and, if so, since when it is
// Empty.
type simpleMark struct {
	simple bool
	ts     int64
}

// appendRecord appends the record of id, its simple mark and g (no topic
// empty) to b, the topics' names made ids by topicID; b's first byte is
// the class's place, left zero.
func appendRecord[ID string | []byte](b []byte, id ID, mark simpleMark, g *groupOffsets, topicID func(string) uint32) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(id)))
	b = binary.LittleEndian.AppendUint32(b, uint32(g.n))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(g.topics)))
	b = binary.LittleEndian.AppendUint64(b, 0)
	putSimpleMark(b[start:], mark)
	b = append(b, id...)
	for ti := range g.topics {
		t := &g.topics[ti]
		b = binary.LittleEndian.AppendUint32(b, topicID(t.topic))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(t.parts)))
		extrasAt := len(b)
		b = binary.LittleEndian.AppendUint32(b, 0)
		for _, p := range t.parts {
			b = appendPart(b, p)
		}
		if t.extra == nil || !slices.ContainsFunc(t.extra, func(e offsetExtra) bool { return e != plainExtra }) {
			continue // no extras: as if it had none
		}
		start, metadata := len(b), 0
		for _, e := range t.extra {
			b = binary.LittleEndian.AppendUint64(b, uint64(e.expireTS))
			b = binary.LittleEndian.AppendUint32(b, uint32(metadata))
			b = binary.LittleEndian.AppendUint32(b, uint32(len(e.metadata)))
			metadata += len(e.metadata)
		}
		for _, e := range t.extra {
			b = append(b, e.metadata...)
		}
		binary.LittleEndian.PutUint32(b[extrasAt:], uint32(len(b)-start))
	}
	return b
}

// appendPart appends p in packedPartSize bytes.
func appendPart(b []byte, p partitionOffset) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(p.partition))
	b = binary.LittleEndian.AppendUint32(b, uint32(p.leaderEpoch))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.offset))
	return binary.LittleEndian.AppendUint64(b, uint64(p.commitTS))
}

// putPart writes p over the packedPartSize bytes of b.
func putPart(b []byte, p partitionOffset) {
	binary.LittleEndian.PutUint32(b, uint32(p.partition))
	binary.LittleEndian.PutUint32(b[4:], uint32(p.leaderEpoch))
	binary.LittleEndian.PutUint64(b[8:], uint64(p.offset))
	binary.LittleEndian.PutUint64(b[16:], uint64(p.commitTS))
}

// partAt decodes the part at index i of parts.
func partAt(parts []byte, i int) partitionOffset {
	b := parts[i*packedPartSize:]
	return partitionOffset{
		partition:   int32(binary.LittleEndian.Uint32(b)),
		leaderEpoch: int32(binary.LittleEndian.Uint32(b[4:])),
		offset:      int64(binary.LittleEndian.Uint64(b[8:])),
		commitTS:    int64(binary.LittleEndian.Uint64(b[16:])),
	}
}

// partitionAt is the partition of the part at index i of parts.
func partitionAt(parts []byte, i int) int32 {
	return int32(binary.LittleEndian.Uint32(parts[i*packedPartSize:]))
}

// findPart is the index of partition in parts, or where it would go.
func findPart(parts []byte, partition int32) (int, bool) {
	n := len(parts) / packedPartSize
	i, j := 0, n
	for i < j {
		h := int(uint(i+j) >> 1)
		if partitionAt(parts, h) < partition {
			i = h + 1
		} else {
			j = h
		}
	}
	return i, i < n && partitionAt(parts, i) == partition
}

// recordID is rec's group id.
func recordID(rec []byte) []byte {
	n := binary.LittleEndian.Uint32(rec[4:])
	return rec[recordHeader : recordHeader+n]
}

// simpleMarkOf is rec's simple mark.
func simpleMarkOf(rec []byte) simpleMark {
	return simpleMark{simple: rec[1]&recordSimple != 0, ts: int64(binary.LittleEndian.Uint64(rec[16:]))}
}

// putSimpleMark writes m into rec's header.
func putSimpleMark(rec []byte, m simpleMark) {
	rec[1] &^= recordSimple
	if m.simple {
		rec[1] |= recordSimple
	} else {
		m.ts = 0
	}
	binary.LittleEndian.PutUint64(rec[16:], uint64(m.ts))
}

// recordCount is the offsets rec holds.
func recordCount(rec []byte) int { return int(binary.LittleEndian.Uint32(rec[8:])) }

// recordTopicCount is the topics rec holds.
func recordTopicCount(rec []byte) uint32 { return binary.LittleEndian.Uint32(rec[12:]) }

// recordTopic is one topic of a record, as recordTopics reads it.
type recordTopic struct {
	id     uint32
	parts  []byte // packedPartSize bytes a part
	extras []byte // empty when none has any
}

// n is how many parts t holds.
func (t *recordTopic) n() int { return len(t.parts) / packedPartSize }

// recordTopics calls fn for each topic of rec, in order, until it
// returns false.
func recordTopics(rec []byte, fn func(recordTopic) bool) {
	topics := int(binary.LittleEndian.Uint32(rec[12:]))
	at := recordHeader + len(recordID(rec))
	for range topics {
		h := rec[at:]
		parts := int(binary.LittleEndian.Uint32(h[4:])) * packedPartSize
		extras := int(binary.LittleEndian.Uint32(h[8:]))
		t := recordTopic{id: binary.LittleEndian.Uint32(h), parts: h[topicHeader : topicHeader+parts]}
		t.extras = h[topicHeader+parts : topicHeader+parts+extras]
		if !fn(t) {
			return
		}
		at += topicHeader + parts + extras
	}
}

// extraAt decodes the extra of the part at index i of t (plainExtra when
// t has none).
func (t *recordTopic) extraAt(i int) offsetExtra {
	if len(t.extras) == 0 {
		return plainExtra
	}
	e := t.extras[i*extraSize:]
	at := t.n()*extraSize + int(binary.LittleEndian.Uint32(e[8:]))
	return offsetExtra{expireTS: int64(binary.LittleEndian.Uint64(e)), metadata: string(t.extras[at : at+int(binary.LittleEndian.Uint32(e[12:]))])}
}

// decodeRecord makes g hold rec's offsets, the topics named by names,
// reusing g's slices where they have room: g is Apply's scratch, or new.
func decodeRecord(rec []byte, names []string, g *groupOffsets) {
	g.topics = g.topics[:0]
	g.n = recordCount(rec)
	recordTopics(rec, func(rt recordTopic) bool {
		t := g.nextTopic()
		t.topic = names[rt.id]
		t.parts = slices.Grow(t.parts[:0], rt.n())[:rt.n()]
		for i := range t.parts {
			t.parts[i] = partAt(rt.parts, i)
		}
		if len(rt.extras) > 0 {
			t.extra = slices.Grow(t.extra, rt.n())[:rt.n()]
			for i := range t.extra {
				t.extra[i] = rt.extraAt(i)
			}
		} else {
			t.extra = nil
		}
		return true
	})
}
