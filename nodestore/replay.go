package nodestore

import (
	"errors"
	"fmt"
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
	logs := map[int32]map[uint64]loc{}
	index := func(id int32) *shardIndex {
		x, ok := s.shards[id]
		if !ok {
			x = newShardIndex(id)
			s.shards[id] = x
			logs[id] = map[uint64]loc{}
		}
		return x
	}
	apply := func(r *record) error {
		x := index(r.shard)
		m := logs[r.shard]
		switch r.kind {
		case kindLogs:
			for i, l := range r.entries {
				m[r.indexes[i]] = l
			}
		case kindDelete:
			for k := range m {
				if k >= r.min && k <= r.max {
					delete(m, k)
				}
			}
		case kindSet:
			x.stable[string(r.key)] = r.val
		}
		return nil
	}
	for i, seq := range seqs {
		last := i == len(seqs)-1
		seg, err := s.replaySegment(seq, last, apply)
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
	for id, m := range logs {
		if err := s.shards[id].rebuild(m, s.segs); err != nil {
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

// replaySegment reads segment seq and applies its records. The last
// segment is opened for appending after its valid records, cutting off a
// torn tail; the others are opened read-only and must be whole.
func (s *Store) replaySegment(seq uint32, last bool, apply func(*record) error) (*segment, error) {
	path := filepath.Join(s.dir, segmentName(seq))
	data, err := os.ReadFile(path)
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
func (x *shardIndex) rebuild(m map[uint64]loc, segs map[uint32]*segment) error {
	if len(m) == 0 {
		return nil
	}
	idx := make([]uint64, 0, len(m))
	for k := range m {
		idx = append(idx, k)
	}
	slices.Sort(idx)
	first, last := idx[0], idx[len(idx)-1]
	if last-first+1 != uint64(len(idx)) {
		return fmt.Errorf("%w: shard %d: the log holds %d entries between %d and %d, not one run", ErrCorrupt, x.id, len(idx), first, last)
	}
	x.first = first
	x.locs = make([]loc, len(idx))
	for i, k := range idx {
		l := m[k]
		x.locs[i] = l
		seg := segs[l.seq]
		seg.live++
		seg.liveBytes += int64(l.n)
	}
	return nil
}
