package nodestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A segment is one file of the write-ahead log, named by its sequence
// number (segmentName). Every segment starts with segmentMagic and then
// holds commits: what one fdatasync made durable. A commit is a commit
// record whose body is
//
//	kindCommit(1) segment(4, its sequence number) len(records)(4)
//
// followed by that many bytes of records. Every record is framed as
//
//	len(body)(4) crc32c(body)(4) body
//
// with all integers big-endian. The body of a record in a commit is
//
//	kind(1) shard(4, int32)
//	kindLogs:   count(uvarint), then count × (len(uvarint) entry)
//	            where entry is the encoding of encoding.go
//	kindDelete: min(8) max(8), the indexes deleted, both included
//	kindSet:    len(key)(uvarint) key value
//
// A segment may end with zeros after its last commit: the room the
// committer writes ahead (Store.zeroAhead). Replay stops there.
//
// The commit frame tells a torn write from corruption: a crash can only
// tear the last commit of the last segment (the next commit is written
// once this one is durable), so a bad commit that ends before the end of
// the file, or a bad record in one, is corruption, not a crash.
//
// Commits are applied whole, in file order, and segments in sequence
// order. A
// kindLogs record sets the indexes its entries name; it is also how live
// entries of an old segment are copied into the active one before the old
// one is removed (Store.relocate), so on replay it may set indexes below
// the shard's current first index.
const segmentMagic = "KCWAL\x00\x00\x01"

const (
	kindLogs   byte = 1
	kindDelete byte = 2
	kindSet    byte = 3
	kindCommit byte = 4
)

// commitHeaderLen is a commit record: its frame and a 9-byte body.
const commitHeaderLen = recordHeaderLen + bodyHeaderLen + 4

// recordHeaderLen is len(body) and its checksum.
const recordHeaderLen = 8

// bodyHeaderLen is kind and shard.
const bodyHeaderLen = 5

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segment is one open file of the log. The committer appends to the active
// one; readers pread entries from any. live and liveBytes count the
// entries of every shard's index that point into it, kept by the
// committer under Store.mu.
type segment struct {
	seq  uint32
	f    *os.File
	size int64 // bytes written and durable; the next record goes here
	// zeroed is where the zeros the committer wrote ahead of size end
	// (zeroAhead); commits below it overwrite blocks already written.
	// Committer only. Sealed segments keep the zeros past their last
	// commit.
	zeroed    int64
	live      int
	liveBytes int64
}

func segmentName(seq uint32) string { return fmt.Sprintf("%08x.wal", seq) }

// listSegments returns the sequence numbers of dir's segment files in
// order.
func listSegments(dir string) ([]uint32, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint32
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".wal")
		if !ok || len(name) != 8 {
			continue
		}
		seq, err := strconv.ParseUint(name, 16, 32)
		if err != nil {
			continue
		}
		seqs = append(seqs, uint32(seq))
	}
	slices.Sort(seqs)
	return seqs, nil
}

// createSegment creates segment seq in dir with its magic written, and
// makes the file's name durable. The caller fsyncs the data it appends.
func createSegment(dir string, seq uint32) (*segment, error) {
	f, err := os.OpenFile(filepath.Join(dir, segmentName(seq)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write([]byte(segmentMagic)); err != nil {
		_ = f.Close()
		return nil, err
	}
	// The magic is durable before any commit follows it, so a crash can
	// leave a segment short of its magic but never with a damaged one.
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &segment{seq: seq, f: f, size: int64(len(segmentMagic)), zeroed: int64(len(segmentMagic))}, nil
}

// syncDir makes the creation and removal of dir's files durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// beginRecord appends a record's header, kind and shard to buf; the
// caller appends the rest of the body and then calls endRecord with start,
// which fills in the length and checksum. The append*Record functions are
// the only callers.
func beginRecord(buf []byte, kind byte, shard int32) (out []byte, start int) {
	start = len(buf)
	buf = append(buf, make([]byte, recordHeaderLen)...)
	buf = append(buf, kind)
	buf = binary.BigEndian.AppendUint32(buf, uint32(shard))
	return buf, start
}

func endRecord(buf []byte, start int) {
	body := buf[start+recordHeaderLen:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(body, castagnoli))
}

// appendLogsRecord appends a kindLogs record of shard's encoded entries to
// buf, and returns where each entry is in buf: offsets from buf's start,
// the segment left to the caller.
func appendLogsRecord(buf []byte, shard int32, entries [][]byte) ([]byte, []loc) {
	buf, start := beginRecord(buf, kindLogs, shard)
	buf = binary.AppendUvarint(buf, uint64(len(entries)))
	at := make([]loc, len(entries))
	for i, e := range entries {
		buf = binary.AppendUvarint(buf, uint64(len(e)))
		at[i] = loc{off: int64(len(buf)), n: uint32(len(e))}
		buf = append(buf, e...)
	}
	endRecord(buf, start)
	return buf, at
}

// appendDeleteRecord appends a kindDelete record of shard's indexes lo to
// hi to buf.
func appendDeleteRecord(buf []byte, shard int32, lo, hi uint64) []byte {
	buf, start := beginRecord(buf, kindDelete, shard)
	buf = binary.BigEndian.AppendUint64(buf, lo)
	buf = binary.BigEndian.AppendUint64(buf, hi)
	endRecord(buf, start)
	return buf
}

// appendSetRecord appends a kindSet record of shard's stable key to buf.
func appendSetRecord(buf []byte, shard int32, key, val []byte) []byte {
	buf, start := beginRecord(buf, kindSet, shard)
	buf = binary.AppendUvarint(buf, uint64(len(key)))
	buf = append(buf, key...)
	buf = append(buf, val...)
	endRecord(buf, start)
	return buf
}

// beginCommit appends the room for a commit record to buf; endCommit fills
// it in once the commit's records follow it, and stampCommit, once the
// segment it goes to is known, names that segment in it: a whole commit of
// another segment (stale blocks a crash may leave past the end of this
// one) is then not one of this segment's.
func beginCommit(buf []byte) (out []byte, start int) {
	start = len(buf)
	return append(buf, make([]byte, commitHeaderLen)...), start
}

func endCommit(buf []byte, start int) {
	hdr := buf[start : start+commitHeaderLen]
	body := hdr[recordHeaderLen:]
	body[0] = kindCommit
	binary.BigEndian.PutUint32(body[5:], uint32(len(buf)-start-commitHeaderLen))
	binary.BigEndian.PutUint32(hdr, uint32(len(body)))
}

// stampCommit names segment seq in the commit at the start of buf and
// seals its header with its checksum.
func stampCommit(buf []byte, seq uint32) {
	hdr := buf[:commitHeaderLen]
	body := hdr[recordHeaderLen:]
	binary.BigEndian.PutUint32(body[1:], seq)
	binary.BigEndian.PutUint32(hdr[4:], crc32.Checksum(body, castagnoli))
}

// record is one decoded record of a segment, as replay sees it. entries
// are the offsets (in the file) and lengths of a kindLogs record's entries.
type record struct {
	kind     byte
	shard    int32
	entries  []loc
	indexes  []uint64 // the index each of entries names
	min, max uint64
	key, val []byte
}

// errTorn is the last commit of a segment cut short by a crash: it ends
// past the end of the file, or it ends at the end of the file and does not
// check out. In the last segment it was never acknowledged; anywhere else
// it is corruption.
var errTorn = errors.New("torn commit")

// scanSegment reads every commit of segment seq, whose content is data,
// and calls fn for each of its records in order, once the whole commit has
// checked out. It returns the offset where the valid commits end (zeros
// after them are the room zeroAhead wrote, and end the segment), errTorn
// if a torn commit follows them, and ErrCorrupt for a bad commit that is
// not the last (or not even the magic when the file is longer).
func scanSegment(seq uint32, data []byte, fn func(r *record) error) (int64, error) {
	if len(data) < len(segmentMagic) || string(data[:len(segmentMagic)]) != segmentMagic {
		if len(data) <= len(segmentMagic) && string(data) == segmentMagic[:len(data)] {
			return 0, errTorn
		}
		return 0, fmt.Errorf("%w: segment %s does not start with the log's magic", ErrCorrupt, segmentName(seq))
	}
	off := len(segmentMagic)
	var recs []*record
	for off < len(data) {
		if allZero(data[off:]) {
			return int64(off), nil // the room zeroed ahead of the commits
		}
		end, err := checkCommit(seq, data, off, &recs)
		if err != nil {
			return int64(off), err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return int64(off), err
			}
		}
		off = end
	}
	return int64(off), nil
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkCommit decodes the commit at off into recs and returns where it
// ends. A commit that does not check out is the torn last one (errTorn)
// only if no whole commit follows it anywhere in the file: the next commit
// is written once this one is durable, so one that follows proves the
// damage came after, from the disk. What a crash leaves past the last
// commit (nothing, zeros, part of the commit in flight, or on some file
// systems stale bytes) holds no whole commit.
func checkCommit(seq uint32, data []byte, off int, recs *[]*record) (int, error) {
	end, err := decodeCommit(seq, data, off, recs)
	if err == nil {
		return end, nil
	}
	for p := off + 1; p+commitHeaderLen <= len(data); p++ {
		if data[p+recordHeaderLen] != kindCommit || binary.BigEndian.Uint32(data[p:]) != bodyHeaderLen+4 {
			continue
		}
		var later []*record
		if _, lerr := decodeCommit(seq, data, p, &later); lerr == nil {
			return 0, fmt.Errorf("%w: segment %s offset %d: a damaged commit before a whole one at offset %d: %v", ErrCorrupt, segmentName(seq), off, p, err)
		}
	}
	return 0, errTorn
}

// decodeCommit decodes the commit at off into recs and returns where it
// ends, or the first thing wrong with it.
func decodeCommit(seq uint32, data []byte, off int, recs *[]*record) (int, error) {
	*recs = (*recs)[:0]
	bad := func(what string) (int, error) { return 0, errors.New(what) }
	if len(data)-off < commitHeaderLen {
		return bad("a commit header cut short")
	}
	hdr := data[off : off+commitHeaderLen]
	body := hdr[recordHeaderLen:]
	if binary.BigEndian.Uint32(hdr) != bodyHeaderLen+4 || body[0] != kindCommit ||
		crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
		return bad("not a commit header")
	}
	if binary.BigEndian.Uint32(body[1:]) != seq {
		return bad("a commit of another segment")
	}
	start := off + commitHeaderLen
	end := start + int(binary.BigEndian.Uint32(body[5:]))
	if end > len(data) {
		return bad("a commit cut short")
	}
	for at := start; at < end; {
		if end-at < recordHeaderLen {
			return bad("a record cut short")
		}
		n := int(binary.BigEndian.Uint32(data[at:]))
		sum := binary.BigEndian.Uint32(data[at+4:])
		bodyAt := at + recordHeaderLen
		if n < bodyHeaderLen || n > end-bodyAt {
			return bad("a record's length")
		}
		rb := data[bodyAt : bodyAt+n]
		if crc32.Checksum(rb, castagnoli) != sum {
			return bad("a record fails its checksum")
		}
		r, err := decodeRecord(seq, rb, int64(bodyAt))
		if err != nil {
			return 0, err
		}
		*recs = append(*recs, r)
		at = bodyAt + n
	}
	return end, nil
}

// decodeRecord decodes a checksummed body found at offset at of segment
// seq.
func decodeRecord(seq uint32, body []byte, at int64) (*record, error) {
	r := &record{kind: body[0], shard: int32(binary.BigEndian.Uint32(body[1:]))}
	rest := body[bodyHeaderLen:]
	bad := func(what string) error {
		return fmt.Errorf("%w: segment %s offset %d: %s", ErrCorrupt, segmentName(seq), at, what)
	}
	switch r.kind {
	case kindLogs:
		count, k := binary.Uvarint(rest)
		if k <= 0 {
			return nil, bad("entry count")
		}
		rest = rest[k:]
		pos := at + bodyHeaderLen + int64(k)
		if count > uint64(len(rest)) {
			return nil, bad("entry count")
		}
		r.entries = make([]loc, 0, count)
		r.indexes = make([]uint64, 0, count)
		for range count {
			n, k := binary.Uvarint(rest)
			if k <= 0 || n > uint64(len(rest)-k) || n < logHeaderLen || rest[k] != logEncodingVersion {
				return nil, bad("entry")
			}
			r.entries = append(r.entries, loc{seq: seq, off: pos + int64(k), n: uint32(n)})
			r.indexes = append(r.indexes, binary.BigEndian.Uint64(rest[k+1:]))
			rest = rest[k+int(n):]
			pos += int64(k) + int64(n)
		}
		if len(rest) != 0 {
			return nil, bad("bytes after the entries")
		}
	case kindDelete:
		if len(rest) != 16 {
			return nil, bad("delete range")
		}
		r.min, r.max = binary.BigEndian.Uint64(rest), binary.BigEndian.Uint64(rest[8:])
	case kindSet:
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, bad("stable key")
		}
		r.key = clone(rest[k : k+int(n)])
		r.val = clone(rest[k+int(n):])
	default:
		return nil, bad(fmt.Sprintf("record kind %d", r.kind))
	}
	return r, nil
}
