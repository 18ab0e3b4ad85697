package fsm

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/kcoord/kcoord/release"
	"github.com/tinylib/msgp/msgp"
)

// A shard's snapshot, streamed. A snapshot of version 2 is one msgpack
// map, the shardSnapshot document as go-msgpack writes it: its keys
// sorted, groups and consumer groups as go-msgpack encodes them, and one
// {g, o, p, t} map per committed offset, sorted by group, topic and
// partition. Going through that document by reflection cost a node, per
// offset, 613 ns of Snapshot under the FSM's lock (applies wait), 118
// bytes of copy held until Persist ends, and on restore 2.1 µs and 674
// bytes allocated: at ten million offsets a node spent about 20 s of CPU
// restoring before it could serve (BenchmarkShardSnapshot).
//
// So Snapshot copies the packed offsets (shardCopy), Persist writes the
// same bytes record by record with msgp's appenders (groups, consumer
// groups and features, which are few or small, still through go-msgpack),
// and Restore reads them with msgp's reader straight into the packed
// offsets, each group's and topic's name made once for all of its
// records. The bytes are go-msgpack's own (TestSnapshotBytesAreGoMsgpacks):
// nothing persisted changed, and every release reads what the other
// writes.

// shardSnapshot is the snapshot document of a ShardFSM. Version 1 (JSON)
// had no cluster id.
type shardSnapshot struct {
	ClusterID string           `json:"cluster_id,omitempty" codec:"cluster_id"`
	Groups    []Group          `json:"groups" codec:"groups"`
	Offsets   []snapshotOffset `json:"offsets" codec:"offsets"`
	// ConsumerGroups came after JSON snapshots; a snapshot without them
	// restores none.
	ConsumerGroups []ConsumerGroup `json:"-" codec:"consumer_groups,omitempty"`
	// Features is the levels stamped into the shard, sorted by feature;
	// absent until a level above 1 is stamped, so a snapshot of a shard
	// at level 1 is byte for byte what release 0.1.0 writes.
	Features []FeatureLevel `json:"-" codec:"features,omitempty"`
}

// snapshotOffset is one committed offset in a shardSnapshot. JSON and
// msgpack both inline the embedded TopicPartition's fields ("t", "p").
type snapshotOffset struct {
	Group string `json:"g" codec:"g"`
	TopicPartition
	Offset Offset `json:"o" codec:"o"`
}

// shardCopy is the point-in-time copy of a ShardFSM that Snapshot takes
// on raft's FSM goroutine, under the FSM's read lock; Persist writes it
// on raft's snapshot goroutine. Nothing else refers to it.
type shardCopy struct {
	clusterID      string
	groups         []Group // the groups that are not simple
	simple         []SimpleGroup
	consumerGroups []ConsumerGroup
	table          *groupTable // a read-only clone
	features       []FeatureLevel
	// packed is whether the shard is stamped at release.Level3, so that
	// every replica reads the packed snapshot (packedsnapshot.go).
	packed bool
}

// copyShard copies the state of f; the caller holds f.mu.
func copyShard(f *ShardFSM) *shardCopy {
	s := &shardCopy{clusterID: f.clusterID, groups: make([]Group, 0, len(f.groups.full)),
		features: slices.Clone(f.features), packed: kcoordVersion(f.features) >= release.Level3}
	for _, g := range f.groups.full {
		if s.packed && len(g.Members) == 0 {
			// go-msgpack omits an empty Members, so such a group reads
			// back with none: simple, if the rest is. Written as it
			// reads back, it is written alike by a replica that applied
			// it and one that restored it.
			g.Members = nil
			if isSimple(g) {
				s.simple = append(s.simple, SimpleGroup{ID: g.ID, StateTimestamp: g.StateTimestamp})
				continue
			}
		}
		s.groups = append(s.groups, g)
	}
	for _, g := range f.consumerGroups {
		s.consumerGroups = append(s.consumerGroups, g)
	}
	s.table = f.table.readOnlyClone()
	return s
}

// Persist implements raft.FSMSnapshot: it sorts the copy (so equal states
// write equal snapshots) and streams it into sink, packed when the shard
// is stamped for it.
func (s *shardCopy) Persist(sink raft.SnapshotSink) error {
	s.simple = slices.Grow(s.simple, s.table.simpleGroupCount())
	s.table.eachSimpleGroup(func(id []byte, ts int64) {
		s.simple = append(s.simple, SimpleGroup{ID: string(id), StateTimestamp: ts})
	})
	write := s.write
	if s.packed {
		write = s.writePacked
	} else {
		// Version 2 lists every classic group, whole, in one list.
		for _, g := range s.simple {
			s.groups = append(s.groups, Group{ID: g.ID, State: StateEmpty, StateTimestamp: g.StateTimestamp})
		}
		s.simple = nil
	}
	slices.SortFunc(s.groups, func(a, b Group) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(s.simple, func(a, b SimpleGroup) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(s.consumerGroups, func(a, b ConsumerGroup) int { return cmp.Compare(a.ID, b.ID) })
	if err := write(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *shardCopy) Release() {}

// docWriter streams one snapshot document to a writer, in pieces of at
// most msgpack.WriterBufferSize bytes: what msgp appends collects in out,
// which goes to bw before go-msgpack (enc) writes, and whenever it holds
// half a buffer (spill).
type docWriter struct {
	bw  *bufio.Writer
	enc *codec.Encoder
	out []byte
}

func newDocWriter(w io.Writer) *docWriter {
	bw := bufio.NewWriterSize(w, msgpack.WriterBufferSize)
	return &docWriter{bw: bw, enc: codec.NewEncoder(bw, msgpack), out: make([]byte, 0, msgpack.WriterBufferSize)}
}

func (d *docWriter) flush() error {
	_, err := d.bw.Write(d.out)
	d.out = d.out[:0]
	return err
}

func (d *docWriter) spill() error {
	if len(d.out) < cap(d.out)/2 {
		return nil
	}
	return d.flush()
}

// end writes what is left.
func (d *docWriter) end() error {
	if err := d.flush(); err != nil {
		return err
	}
	return d.bw.Flush()
}

// head writes what both versions begin with: the version byte, the
// document's map header (keys more than its own: cluster_id, groups, and
// consumer_groups and features when they hold something), then those
// keys in sorted order, groups last, as go-msgpack writes them.
func (d *docWriter) head(version byte, keys uint32, s *shardCopy) error {
	keys += 2
	if len(s.consumerGroups) > 0 {
		keys++
	}
	if len(s.features) > 0 {
		keys++
	}
	d.out = append(d.out, version)
	d.out = msgp.AppendMapHeader(d.out, keys)
	d.out = msgp.AppendString(d.out, "cluster_id")
	d.out = msgp.AppendString(d.out, s.clusterID)
	if len(s.consumerGroups) > 0 {
		d.out = msgp.AppendString(d.out, "consumer_groups")
		d.out = msgp.AppendArrayHeader(d.out, uint32(len(s.consumerGroups)))
		if err := d.flush(); err != nil {
			return err
		}
		if err := encodeEach(d.enc, s.consumerGroups); err != nil {
			return err
		}
	}
	if len(s.features) > 0 {
		d.out = msgp.AppendString(d.out, "features")
		if err := d.flush(); err != nil {
			return err
		}
		if err := d.enc.Encode(s.features); err != nil {
			return err
		}
	}
	d.out = msgp.AppendString(d.out, "groups")
	d.out = msgp.AppendArrayHeader(d.out, uint32(len(s.groups)))
	if err := d.flush(); err != nil {
		return err
	}
	return encodeEach(d.enc, s.groups)
}

// write writes the version byte and the version-2 document to w: the
// keys of shardSnapshot in go-msgpack's order (sorted), the two omitempty
// ones only when they hold something.
func (s *shardCopy) write(w io.Writer) error {
	d := newDocWriter(w)
	if err := d.head(snapshotVersion, 1, s); err != nil {
		return err
	}
	d.out = msgp.AppendString(d.out, "offsets")
	records := s.table.sortedRecords()
	n := 0
	for _, rec := range records {
		n += recordCount(rec)
	}
	if n == 0 {
		d.out = msgp.AppendNil(d.out)
	} else {
		d.out = msgp.AppendArrayHeader(d.out, uint32(n))
	}
	var group, topic []byte // their encodings, made once per group and topic
	var g groupOffsets
	for _, rec := range records {
		group = msgp.AppendStringFromBytes(group[:0], recordID(rec))
		s.table.decode(rec, &g)
		for ti := range g.topics {
			t := &g.topics[ti]
			topic = msgp.AppendString(topic[:0], t.topic)
			for pi := range t.parts {
				d.out = appendOffsetRecord(d.out, group, topic, t, pi)
				if err := d.spill(); err != nil {
					return err
				}
			}
		}
	}
	return d.end()
}

// encodeEach encodes the elements of items one after another, as
// go-msgpack encodes the elements of a list.
func encodeEach[T any](enc *codec.Encoder, items []T) error {
	for i := range items {
		if err := enc.Encode(&items[i]); err != nil {
			return err
		}
	}
	return nil
}

// appendOffsetRecord appends the snapshotOffset of t's offset at index i
// as go-msgpack encodes it: {g, o, p, t}, o being the Offset's map with
// its keys sorted and metadata only when there is some. group and topic
// are their names already encoded.
func appendOffsetRecord(b, group, topic []byte, t *topicOffsets, i int) []byte {
	o := t.at(i)
	b = append(b, 0x84) // a map of 4
	b = msgp.AppendString(b, "g")
	b = append(b, group...)
	b = msgp.AppendString(b, "o")
	if o.Metadata == "" {
		b = msgp.AppendMapHeader(b, 4)
	} else {
		b = msgp.AppendMapHeader(b, 5)
	}
	b = msgp.AppendString(b, "commit_ts")
	b = msgp.AppendInt64(b, o.CommitTimestamp)
	b = msgp.AppendString(b, "expire_ts")
	b = msgp.AppendInt64(b, o.ExpireTimestamp)
	b = msgp.AppendString(b, "leader_epoch")
	b = msgp.AppendInt32(b, o.LeaderEpoch)
	if o.Metadata != "" {
		b = msgp.AppendString(b, "metadata")
		b = msgp.AppendString(b, o.Metadata)
	}
	b = msgp.AppendString(b, "offset")
	b = msgp.AppendInt64(b, o.Offset)
	b = msgp.AppendString(b, "p")
	b = msgp.AppendInt32(b, t.parts[i].partition)
	b = msgp.AppendString(b, "t")
	return append(b, topic...)
}

// restoredShard is the state a snapshot restores, before it replaces the
// FSM's.
type restoredShard struct {
	clusterID      string
	groups         classicGroups
	consumerGroups map[string]ConsumerGroup
	table          *groupTable // its groups' offsets and simple groups
	features       []FeatureLevel
}

// readShardSnapshot reads a snapshot of any version this build reads.
func readShardSnapshot(r io.Reader) (*restoredShard, error) {
	br := bufio.NewReaderSize(r, msgpack.ReaderBufferSize)
	ver, err := br.Peek(1)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedSnapshot, err)
	}
	version, decode := ver[0], decodeShardV2 // ver is br's buffer, which reads reuse
	switch version {
	case snapshotVersionMsgpack:
	case snapshotVersionPacked:
		decode = decodeShardV3
	default:
		// JSON (version 1), or a version this build does not know,
		// which readSnapshot names.
		var doc shardSnapshot
		if err := readSnapshot(br, &doc); err != nil {
			return nil, err
		}
		return restoredFrom(&doc), nil
	}
	br.Discard(1)
	s, err := decode(msgp.NewReaderSize(br, msgpack.ReaderBufferSize))
	if err != nil {
		return nil, fmt.Errorf("%w: version %d: %v", ErrMalformedSnapshot, version, err)
	}
	return s, nil
}

// newRestoredShard is an empty state to restore into.
func newRestoredShard() *restoredShard {
	table := newGroupTable()
	return &restoredShard{groups: newClassicGroups(table), consumerGroups: make(map[string]ConsumerGroup), table: table}
}

// restoredFrom builds the state of a decoded document (a JSON snapshot).
func restoredFrom(doc *shardSnapshot) *restoredShard {
	s := newRestoredShard()
	s.clusterID, s.features = doc.ClusterID, doc.Features
	for _, g := range doc.Groups {
		s.groups.put(g)
	}
	for _, g := range doc.ConsumerGroups {
		s.consumerGroups[g.ID] = g
	}
	var b offsetsBuilder
	for _, o := range doc.Offsets {
		b.add(s.table, o.Group, o.TopicPartition, o.Offset)
	}
	b.flush(s.table)
	return s
}

// offsetsBuilder gathers a run of one group's offsets, as a snapshot
// lists them, and stores the run in one merge. A group whose offsets come
// in several runs (a JSON snapshot of an old release need not be sorted)
// gets each merged over the one before, so a later duplicate wins.
type offsetsBuilder struct {
	group string
	run   []tpOffset
}

func (b *offsetsBuilder) add(into *groupTable, group string, tp TopicPartition, o Offset) {
	if len(b.run) > 0 && group != b.group {
		b.flush(into)
	}
	b.group = group
	b.run = append(b.run, tpOffset{tp, o})
}

func (b *offsetsBuilder) flush(into *groupTable) {
	if len(b.run) == 0 {
		return
	}
	into.setOffsets(b.group, sortBatch(b.run)) // as Persist writes them, already in order
	clear(b.run)
	b.run = b.run[:0]
}

// valueDecoder decodes single values of a msgp stream by go-msgpack (the
// few or small parts of a snapshot: groups, consumer groups, features),
// each copied out of the stream into one reused buffer first.
type valueDecoder struct {
	r   *msgp.Reader
	raw bytes.Buffer
	dec *codec.Decoder
}

func newValueDecoder(r *msgp.Reader) *valueDecoder {
	return &valueDecoder{r: r, dec: codec.NewDecoderBytes(nil, msgpack)}
}

// decodeNext decodes the next value of the stream into v.
func (d *valueDecoder) decodeNext(v any) error {
	d.raw.Reset()
	if _, err := d.r.CopyNext(&d.raw); err != nil {
		return err
	}
	d.dec.ResetBytes(d.raw.Bytes())
	return d.dec.Decode(v)
}

// errSnapshotTrailing is a snapshot with bytes after its document.
var errSnapshotTrailing = errors.New("bytes after the document")

// atEnd checks that r holds nothing after the document it read.
func atEnd(r *msgp.Reader) error {
	_, err := r.R.Peek(1)
	switch {
	case err == io.EOF:
		return nil
	case err == nil:
		return errSnapshotTrailing
	}
	return err
}

// decodeShardV2 reads the document of a version-2 snapshot from r, which
// must end after it: what go-msgpack writes, with its keys in any order,
// unknown keys skipped and a nil for an absent list (its strings as str,
// its numbers as ints, as go-msgpack writes them).
func decodeShardV2(r *msgp.Reader) (*restoredShard, error) {
	s := newRestoredShard()
	decodeNext := newValueDecoder(r).decodeNext
	if r.IsNil() {
		if err := r.ReadNil(); err != nil {
			return nil, err
		}
	} else {
		keys, err := r.ReadMapHeader()
		if err != nil {
			return nil, err
		}
		var scratch []byte
		for range keys {
			key, err := readKey(r, scratch)
			if err != nil {
				return nil, err
			}
			scratch = key
			switch string(key) {
			case "cluster_id":
				s.clusterID, err = readString(r)
			case "groups":
				err = readArray(r, func() error {
					var g Group
					if err := decodeNext(&g); err != nil {
						return err
					}
					s.groups.put(g)
					return nil
				})
			case "consumer_groups":
				err = readArray(r, func() error {
					var g ConsumerGroup
					if err := decodeNext(&g); err != nil {
						return err
					}
					s.consumerGroups[g.ID] = g
					return nil
				})
			case "features":
				err = decodeNext(&s.features)
			case "offsets":
				err = readOffsets(r, s.table)
			default:
				err = r.Skip()
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	if err := atEnd(r); err != nil {
		return nil, err
	}
	return s, nil
}

// readArray calls each once per element of the array (or nil) next in r.
func readArray(r *msgp.Reader, each func() error) error {
	if r.IsNil() {
		return r.ReadNil()
	}
	n, err := r.ReadArrayHeader()
	if err != nil {
		return err
	}
	for range n {
		if err := each(); err != nil {
			return err
		}
	}
	return nil
}

// readString reads a str, or a nil as "".
func readString(r *msgp.Reader) (string, error) {
	b, err := readStringBytes(r, nil)
	return string(b), err
}

// readOffsets reads the snapshotOffsets next in r into offsets. A group's
// and a topic's name become a string once per run of records that repeat
// it, not once per record.
func readOffsets(r *msgp.Reader, offsets *groupTable) error {
	var b offsetsBuilder
	var scratch, keyScratch []byte
	topic := ""
	err := readArray(r, func() error {
		n, err := r.ReadMapHeader()
		if err != nil {
			return err
		}
		var tp TopicPartition
		var o Offset
		group := ""
		for range n {
			key, err := readKey(r, keyScratch)
			if err != nil {
				return err
			}
			keyScratch = key
			switch string(key) {
			case "g":
				if scratch, err = readStringBytes(r, scratch); err == nil {
					group = b.group
					if string(scratch) != group {
						group = string(scratch)
					}
				}
			case "t":
				if scratch, err = readStringBytes(r, scratch); err == nil && string(scratch) != topic {
					topic = string(scratch)
				}
				tp.Topic = topic
			case "p":
				tp.Partition, err = r.ReadInt32()
			case "o":
				err = readOffset(r, &o)
			default:
				err = r.Skip()
			}
			if err != nil {
				return fmt.Errorf("%q: %w", key, err)
			}
		}
		b.add(offsets, group, tp, o)
		return nil
	})
	b.flush(offsets)
	return err
}

// readStringBytes reads a str (or a nil, as no bytes) into scratch. The
// bytes are read as they arrive, a chunk at a time past the first: a
// header claiming gigabytes costs what the snapshot really holds, not an
// allocation of its claim.
func readStringBytes(r *msgp.Reader, scratch []byte) ([]byte, error) {
	if r.IsNil() {
		return scratch[:0], r.ReadNil()
	}
	n, err := r.ReadStringHeader()
	if err != nil {
		return nil, err
	}
	const chunk = 1 << 20
	b := scratch[:0]
	for left := int(n); left > 0; {
		step := min(left, chunk)
		b = slices.Grow(b, step)
		if _, err := r.ReadFull(b[len(b) : len(b)+step]); err != nil {
			return nil, err
		}
		b, left = b[:len(b)+step], left-step
	}
	return b, nil
}

// maxKeyLen is the longest map key the reader compares; every key a
// writer used is shorter ("consumer_groups", 15 bytes).
const maxKeyLen = 64

// readKey reads a map key (a str) into scratch. A key longer than
// maxKeyLen, which can only be one this build does not know, is skipped
// as it is read and given back empty, so its value is skipped too: a
// header claiming gigabytes costs nothing.
func readKey(r *msgp.Reader, scratch []byte) ([]byte, error) {
	n, err := r.ReadStringHeader()
	if err != nil {
		return nil, err
	}
	if n > maxKeyLen {
		_, err := r.R.Skip(int(n))
		return scratch[:0], err
	}
	b := slices.Grow(scratch[:0], int(n))[:n]
	_, err = r.ReadFull(b)
	return b, err
}

// readOffset reads an Offset's map into o.
func readOffset(r *msgp.Reader, o *Offset) error {
	if r.IsNil() {
		return r.ReadNil()
	}
	n, err := r.ReadMapHeader()
	if err != nil {
		return err
	}
	var scratch [maxKeyLen]byte
	for range n {
		key, err := readKey(r, scratch[:0])
		if err != nil {
			return err
		}
		switch string(key) {
		case "offset":
			o.Offset, err = r.ReadInt64()
		case "leader_epoch":
			o.LeaderEpoch, err = r.ReadInt32()
		case "metadata":
			o.Metadata, err = readString(r)
		case "commit_ts":
			o.CommitTimestamp, err = r.ReadInt64()
		case "expire_ts":
			o.ExpireTimestamp, err = r.ReadInt64()
		default:
			err = r.Skip()
		}
		if err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
	}
	return nil
}
