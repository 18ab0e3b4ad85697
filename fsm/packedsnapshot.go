package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tinylib/msgp/msgp"
)

// A shard's snapshot of version 3, the packed snapshot: what a shard
// stamped at release.Level3 writes (issue 36). Version 2 spends about a
// hundred bytes on each committed offset (a map of seven named fields
// that repeats the group and topic names) and decodes every simple group
// by reflection; at a million groups a node rewrote 50-65 MB a shard
// every SnapshotThreshold entries and restored 10 M such records before
// it served. Version 3 writes an offset as the 24 bytes it takes in
// memory, each group's and topic's name once, and simple groups as an id
// and a timestamp.
//
// The document is one msgpack map, its keys sorted:
//
//	cluster_id       str
//	consumer_groups  [ConsumerGroup...] by go-msgpack, omitted when none
//	features         [FeatureLevel...] by go-msgpack, omitted when none
//	groups           [Group...] by go-msgpack: the groups that are not
//	                 simple (Group.Simple), sorted by id
//	offsets          [[group str, [topic...]]...] sorted by group; a topic
//	                 is [name str, parts bin] or [name str, parts bin,
//	                 [[metadata str, expire_ts int]...]] when one of its
//	                 offsets has metadata or an expiry, one per part
//	simple_groups    [id str, state_ts int, id str, ...] sorted by id
//
// parts holds a topic's offsets sorted by partition, packedPartSize bytes
// each, little-endian: partition int32, leader_epoch int32, offset int64,
// commit_ts int64. A reader skips keys, and array elements past the ones
// above, that it does not know, so a later version may add some.

// snapshotVersionPacked is the packed snapshot's version byte.
const snapshotVersionPacked byte = 3

// packedPartSize is the bytes of one offset in a topic's parts.
const packedPartSize = 24

// maxPartsHint bounds the offsets a restore makes room for from a topic's
// header before it reads them (a topic of more grows as they arrive), so
// that topics of any real size get a slice of exactly theirs.
const maxPartsHint = 1 << 16

// maxInternedTopics bounds the topic names a packed restore makes a
// string of once for all the groups that name them (packedReader.topic);
// past it, each name read is a string of its own until the table, which
// holds each name once (topicNames), takes it.
const maxInternedTopics = 1 << 16

// Errors of a packed snapshot a reader refuses (wrapped in
// ErrMalformedSnapshot).
var (
	errPackedParts    = errors.New("a topic's parts are not whole offsets")
	errPackedOrder    = errors.New("out of order, or twice")
	errPackedExtras   = errors.New("a topic's extras do not match its parts")
	errPackedPairs    = errors.New("simple_groups holds an id without its timestamp")
	errPackedShortRec = errors.New("a record with fewer fields than it needs")
	errPackedEmpty    = errors.New("a topic or group without offsets")
)

// writePacked writes the version byte and the packed document of s (its
// lists sorted by Persist) to w.
func (s *shardCopy) writePacked(w io.Writer) error {
	d := newDocWriter(w)
	if err := d.head(snapshotVersionPacked, 2, s); err != nil {
		return err
	}
	d.out = msgp.AppendString(d.out, "offsets")
	records := s.table.sortedRecords()
	held := 0
	for _, rec := range records {
		held += countOf(recordCount(rec) > 0)
	}
	d.out = msgp.AppendArrayHeader(d.out, uint32(held))
	names := s.table.topics.names
	for _, rec := range records {
		if recordCount(rec) == 0 {
			continue // a simple group's, without offsets
		}
		d.out = msgp.AppendArrayHeader(d.out, 2)
		d.out = msgp.AppendStringFromBytes(d.out, recordID(rec))
		d.out = msgp.AppendArrayHeader(d.out, recordTopicCount(rec))
		var err error
		recordTopics(rec, func(rt recordTopic) bool {
			d.out = appendPackedTopic(d.out, names[rt.id], &rt)
			err = d.spill()
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	d.out = msgp.AppendString(d.out, "simple_groups")
	d.out = msgp.AppendArrayHeader(d.out, uint32(2*len(s.simple)))
	for _, g := range s.simple {
		d.out = msgp.AppendString(d.out, g.ID)
		d.out = msgp.AppendInt64(d.out, g.StateTimestamp)
		if err := d.spill(); err != nil {
			return err
		}
	}
	return d.end()
}

// appendPackedTopic appends the packed record of the topic name, t: its
// name, its parts (whose bytes in memory are the snapshot's), and its
// extras when it has any (a record keeps them only when one is not
// plainExtra, so replicas holding equal offsets write equal bytes).
func appendPackedTopic(b []byte, name string, t *recordTopic) []byte {
	extras := len(t.extras) > 0
	if extras {
		b = msgp.AppendArrayHeader(b, 3)
	} else {
		b = msgp.AppendArrayHeader(b, 2)
	}
	b = msgp.AppendString(b, name)
	b = msgp.AppendBytes(b, t.parts)
	if extras {
		b = msgp.AppendArrayHeader(b, uint32(t.n()))
		for i := range t.n() {
			e := t.extraAt(i)
			b = msgp.AppendArrayHeader(b, 2)
			b = msgp.AppendString(b, e.metadata)
			b = msgp.AppendInt64(b, e.expireTS)
		}
	}
	return b
}

// decodeShardV3 reads the document of a packed snapshot from r, which
// must end after it.
func decodeShardV3(r *msgp.Reader) (*restoredShard, error) {
	s := newRestoredShard()
	pr := packedReader{valueDecoder: newValueDecoder(r), r: r, topics: make(map[string]string)}
	keys, err := r.ReadMapHeader()
	if err != nil {
		return nil, err
	}
	var scratch [maxKeyLen]byte
	for range keys {
		key, err := readKey(r, scratch[:0])
		if err != nil {
			return nil, err
		}
		switch string(key) {
		case "cluster_id":
			s.clusterID, err = readString(r)
		case "consumer_groups":
			err = readArray(r, func() error {
				var g ConsumerGroup
				if err := pr.decodeNext(&g); err != nil {
					return err
				}
				s.consumerGroups[g.ID] = g
				return nil
			})
		case "features":
			err = pr.decodeNext(&s.features)
		case "groups":
			err = readArray(r, func() error {
				var g Group
				if err := pr.decodeNext(&g); err != nil {
					return err
				}
				if s.groups.has(g.ID) {
					return fmt.Errorf("group %q: %w", g.ID, errPackedOrder)
				}
				s.groups.put(g)
				return nil
			})
		case "offsets":
			err = readArray(r, func() error { return pr.readGroup(s.table) })
		case "simple_groups":
			err = pr.readSimpleGroups(&s.groups)
		default:
			err = r.Skip()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	if err := atEnd(r); err != nil {
		return nil, err
	}
	return s, nil
}

// packedReader is the state of one packed snapshot's restore: its
// reader, the topic names read so far (each made a string once, however
// many groups commit to it), and buffers reused from record to record:
// a group's name and offsets, before they go into the table, and a
// topic's name.
type packedReader struct {
	*valueDecoder
	r      *msgp.Reader
	topics map[string]string
	group  []byte
	name   []byte
	g      groupOffsets
	parts  [packedPartSize * 256]byte
}

// readGroup reads one group's record into offsets.
func (pr *packedReader) readGroup(offsets *groupTable) error {
	fields, err := pr.r.ReadArrayHeader()
	if err != nil {
		return err
	}
	if fields < 2 {
		return errPackedShortRec
	}
	if pr.group, err = readStringBytes(pr.r, pr.group); err != nil {
		return err
	}
	if hasOffsets(offsets, pr.group) {
		return fmt.Errorf("group %q: %w", pr.group, errPackedOrder)
	}
	g := &pr.g
	g.topics, g.n = g.topics[:0], 0
	err = readArray(pr.r, func() error {
		k := len(g.topics)
		t := g.nextTopic()
		if err := pr.readTopic(t); err != nil {
			return err
		}
		if len(t.parts) == 0 {
			return fmt.Errorf("topic %q: %w", t.topic, errPackedEmpty)
		}
		if k > 0 && strings.Compare(g.topics[k-1].topic, t.topic) >= 0 {
			return fmt.Errorf("topic %q: %w", t.topic, errPackedOrder)
		}
		g.n += len(t.parts)
		return nil
	})
	if err != nil {
		return fmt.Errorf("group %q: %w", pr.group, err)
	}
	for range fields - 2 {
		if err := pr.r.Skip(); err != nil {
			return err
		}
	}
	if g.n == 0 {
		return fmt.Errorf("group %q: %w", pr.group, errPackedEmpty)
	}
	putOffsets(offsets, pr.group, g)
	return nil
}

// readTopic reads one topic's record into t, reusing its parts' array.
func (pr *packedReader) readTopic(t *topicOffsets) error {
	fields, err := pr.r.ReadArrayHeader()
	if err != nil {
		return err
	}
	if fields < 2 {
		return errPackedShortRec
	}
	if pr.name, err = readStringBytes(pr.r, pr.name); err != nil {
		return err
	}
	t.topic, t.extra = pr.topic(pr.name), nil
	if t.parts, err = pr.readParts(t.parts[:0]); err != nil {
		return fmt.Errorf("topic %q: %w", t.topic, err)
	}
	if fields >= 3 {
		if t.extra, err = pr.readExtras(len(t.parts)); err != nil {
			return fmt.Errorf("topic %q: %w", t.topic, err)
		}
	}
	for range int(fields) - 3 {
		if err := pr.r.Skip(); err != nil {
			return err
		}
	}
	return nil
}

// topic returns name as a string, the same string for every group that
// names it while fewer than maxInternedTopics are known.
func (pr *packedReader) topic(name []byte) string {
	if t, ok := pr.topics[string(name)]; ok {
		return t
	}
	t := string(name)
	if len(pr.topics) < maxInternedTopics {
		pr.topics[t] = t
	}
	return t
}

// readParts reads a topic's parts: a bin of whole offsets, sorted by
// partition. It reads them a buffer at a time, so a header claiming
// gigabytes costs what the snapshot really holds.
func (pr *packedReader) readParts(parts []partitionOffset) ([]partitionOffset, error) {
	size, err := pr.r.ReadBytesHeader()
	if err != nil {
		return nil, err
	}
	if size%packedPartSize != 0 {
		return nil, errPackedParts
	}
	left := int(size / packedPartSize)
	parts = slices.Grow(parts, min(left, maxPartsHint))
	for left > 0 {
		step := min(left, len(pr.parts)/packedPartSize)
		buf := pr.parts[:step*packedPartSize]
		if _, err := pr.r.ReadFull(buf); err != nil {
			return nil, err
		}
		for b := buf; len(b) > 0; b = b[packedPartSize:] {
			p := partitionOffset{
				partition:   int32(binary.LittleEndian.Uint32(b)),
				leaderEpoch: int32(binary.LittleEndian.Uint32(b[4:])),
				offset:      int64(binary.LittleEndian.Uint64(b[8:])),
				commitTS:    int64(binary.LittleEndian.Uint64(b[16:])),
			}
			if k := len(parts); k > 0 && parts[k-1].partition >= p.partition {
				return nil, fmt.Errorf("partition %d: %w", p.partition, errPackedOrder)
			}
			parts = append(parts, p)
		}
		left -= step
	}
	return parts, nil
}

// readExtras reads a topic's extras (or a nil, as none), one per part.
func (pr *packedReader) readExtras(parts int) ([]offsetExtra, error) {
	if pr.r.IsNil() {
		return nil, pr.r.ReadNil()
	}
	n, err := pr.r.ReadArrayHeader()
	if err != nil {
		return nil, err
	}
	if int(n) != parts {
		return nil, fmt.Errorf("%w: %d extras for %d parts", errPackedExtras, n, parts)
	}
	out := make([]offsetExtra, n)
	for i := range out {
		fields, err := pr.r.ReadArrayHeader()
		if err != nil {
			return nil, err
		}
		if fields < 2 {
			return nil, errPackedShortRec
		}
		if out[i].metadata, err = readString(pr.r); err != nil {
			return nil, err
		}
		if out[i].expireTS, err = pr.r.ReadInt64(); err != nil {
			return nil, err
		}
		for range fields - 2 {
			if err := pr.r.Skip(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// readSimpleGroups reads simple_groups into groups.
func (pr *packedReader) readSimpleGroups(groups *classicGroups) error {
	n, err := pr.r.ReadArrayHeader()
	if err != nil {
		return err
	}
	if n%2 != 0 {
		return errPackedPairs
	}
	for range n / 2 {
		if pr.name, err = readStringBytes(pr.r, pr.name); err != nil {
			return err
		}
		ts, err := pr.r.ReadInt64()
		if err != nil {
			return err
		}
		if hasGroup(groups, pr.name) {
			return fmt.Errorf("group %q: %w", pr.name, errPackedOrder)
		}
		groups.putSimple(pr.name, ts)
	}
	return nil
}
