package nodestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// load rebuilds the shards' indexes from the segments, in order, and opens
// them: the last for appending, the others for reading. A torn record at
// the end of the last segment is cut off; one anywhere else is ErrCorrupt.
// With no segment at all it creates the first. Called by Open before the
// committer starts.
//
// It then appends a checkpoint of every shard's stable values to the
// active segment and syncs it. A crash right after a rotation can leave
// the new segment without all of its checkpoint (as little as the magic,
// which createSegment syncs), and the older segments that still
// hold those values may be removed once their entries are compacted; the
// checkpoint written here makes the active segment hold them again.
func (s *Store) load() error {
	seqs, err := listSegments(s.dir)
	if err != nil {
		return fmt.Errorf("nodestore: %w", err)
	}
	logs := map[int32]*replayLog{}
	index := func(id int32) *shardIndex {
		x, ok := s.shards[id]
		if !ok {
			x = newShardIndex(id)
			s.shards[id] = x
			logs[id] = &replayLog{}
		}
		return x
	}
	apply := func(r *record) error {
		x := index(r.shard)
		switch r.kind {
		case kindLogs:
			return logs[r.shard].set(x.id, r.indexes, r.entries)
		case kindDelete:
			logs[r.shard].delete(r.min, r.max)
		case kindSet:
			x.stable[string(r.key)] = r.val
		}
		return nil
	}
	var buf []byte // one buffer for every segment: a restart reads hundreds of MB
	for i, seq := range seqs {
		last := i == len(seqs)-1
		seg, err := s.replaySegment(seq, last, &buf, apply)
		if err != nil {
			return err
		}
		s.segs[seq] = seg
		if last {
			s.active = seg
		} else {
			s.sealed = append(s.sealed, seg)
		}
	}
	if s.active == nil {
		if s.active, err = createSegment(s.dir, 1); err != nil {
			return fmt.Errorf("nodestore: %w", err)
		}
		s.segs[1] = s.active
	}
	for id, rl := range logs {
		if err := s.shards[id].rebuild(rl, s.segs); err != nil {
			return err
		}
	}
	if buf := s.checkpoint(); buf != nil {
		if _, err := s.append(buf); err != nil {
			return err
		}
	}
	return nil
}

// replaySegment reads segment seq into *buf (grown as needed, and kept
// for the next segment: records keep no reference into it) and applies
// its records. The last segment is opened for appending after its valid
// records, cutting off a torn tail; the others are opened read-only and
// must be whole.
func (s *Store) replaySegment(seq uint32, last bool, buf *[]byte, apply func(*record) error) (*segment, error) {
	path := filepath.Join(s.dir, segmentName(seq))
	data, err := readInto(path, buf)
	if err != nil {
		return nil, fmt.Errorf("nodestore: %w", err)
	}
	end, scanErr := scanSegment(seq, data, apply)
	if scanErr != nil && (!errors.Is(scanErr, errTorn) || !last) {
		if errors.Is(scanErr, errTorn) {
			scanErr = fmt.Errorf("%w: segment %s: the commit at offset %d is cut short or fails its checksum", ErrCorrupt, path, end)
		}
		return nil, scanErr
	}
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("nodestore: %w", err)
	}
	seg := &segment{seq: seq, f: f, size: end, zeroed: int64(len(data))}
	// scanErr is errTorn here, for the last segment only: either bytes
	// follow the valid records, or not even the magic is whole (a file of
	// 0 bytes included: a crash right after its creation).
	if scanErr != nil {
		s.logger.Warn("cutting off the end of the log that a crash left unfinished", "segment", path, "at", end, "bytes", int64(len(data))-end)
		if err := s.cutTail(seg); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("nodestore: %w", err)
		}
	}
	return seg, nil
}

// readInto reads the file at path into *buf, growing it when the file is
// larger, and returns the file's bytes.
func readInto(path string, buf *[]byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := int(fi.Size())
	if cap(*buf) < size {
		*buf = make([]byte, size)
	}
	data := (*buf)[:size]
	n, err := io.ReadFull(f, data)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return data[:n], nil
}

// cutTail truncates seg to its valid records, rewriting the magic if not
// even that was whole, and syncs it.
func (s *Store) cutTail(seg *segment) error {
	if seg.size < int64(len(segmentMagic)) {
		seg.size = 0
	}
	seg.zeroed = seg.size
	if err := seg.f.Truncate(seg.size); err != nil {
		return err
	}
	if seg.size == 0 {
		if _, err := seg.f.WriteAt([]byte(segmentMagic), 0); err != nil {
			return err
		}
		seg.size = int64(len(segmentMagic))
	}
	return seg.f.Sync()
}

// rebuild sets x's entries from what replay found, which must be one run
// of consecutive indexes, and counts them in their segments.
func (x *shardIndex) rebuild(rl *replayLog, segs map[uint32]*segment) error {
	if rl.count == 0 {
		return nil
	}
	// delete trims absent entries off both ends: a gap left is a hole.
	if rl.count != len(rl.locs) {
		return fmt.Errorf("%w: shard %d: the log holds %d entries between %d and %d, not one run", ErrCorrupt, x.id, rl.count, rl.base, rl.base+uint64(len(rl.locs))-1)
	}
	x.first = rl.base
	x.locs = slices.Clone(rl.locs)
	for _, l := range x.locs {
		seg := segs[l.seq]
		seg.live++
		seg.liveBytes += int64(l.n)
	}
	return nil
}

// replayLog is where replay has found a shard's entries so far: index
// base+i is at locs[i], or absent where that loc is zero (a stored
// entry is never 0 bytes). Replay meets the shard's writes in the order
// they were made, so the entries present are one run but for those a
// relocation copied (Store.relocate): their copies come in a later
// segment than entries with higher indexes, and fill the run in from
// below. A map per shard did the same and was 40% of a restart's replay.
type replayLog struct {
	base  uint64
	locs  []loc
	count int // entries present
}

// maxReplaySpan bounds how far apart the entries a shard's replay holds
// at once may be (1 GiB of locs): a record naming an index further off is
// corrupt (a live log is thousands of entries long), and is refused
// before it allocates.
const maxReplaySpan = 1 << 26

// set records the entries of a kindLogs record of shard id.
func (rl *replayLog) set(id int32, indexes []uint64, entries []loc) error {
	if len(indexes) == 0 {
		return nil
	}
	lo, hi := slices.Min(indexes), slices.Max(indexes)
	if rl.count == 0 {
		rl.base, rl.locs = lo, rl.locs[:0]
	}
	top := hi
	if len(rl.locs) > 0 {
		top = max(hi, rl.base+uint64(len(rl.locs))-1)
	}
	if bottom := min(lo, rl.base); top-bottom >= maxReplaySpan {
		return fmt.Errorf("%w: shard %d: entries %d and %d in the log at once", ErrCorrupt, id, bottom, top)
	}
	if lo < rl.base { // relocated copies: grow at the front, once a record
		grown := make([]loc, int(rl.base-lo)+len(rl.locs), int(rl.base-lo)+cap(rl.locs))
		copy(grown[rl.base-lo:], rl.locs)
		rl.base, rl.locs = lo, grown
	}
	if n := int(hi-rl.base) + 1; n > len(rl.locs) {
		rl.locs = append(rl.locs, make([]loc, n-len(rl.locs))...)
	}
	for i, k := range indexes {
		p := &rl.locs[k-rl.base]
		if p.n == 0 {
			rl.count++
		}
		*p = entries[i]
	}
	return nil
}

// delete removes the entries from lo to hi, then trims absent entries
// off both ends.
func (rl *replayLog) delete(lo, hi uint64) {
	if rl.count == 0 || hi < lo {
		return
	}
	last := rl.base + uint64(len(rl.locs)) - 1
	if from, to := max(lo, rl.base), min(hi, last); from <= to {
		for i := from - rl.base; i <= to-rl.base; i++ { // slice positions: no index wraps
			if p := &rl.locs[i]; p.n != 0 {
				*p = loc{}
				rl.count--
			}
		}
	}
	i := 0
	for i < len(rl.locs) && rl.locs[i].n == 0 {
		i++
	}
	rl.locs, rl.base = rl.locs[i:], rl.base+uint64(i)
	j := len(rl.locs)
	for j > 0 && rl.locs[j-1].n == 0 {
		j--
	}
	rl.locs = rl.locs[:j]
}
