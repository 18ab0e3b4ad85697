package nodestore

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// ShardStore is one shard's raft.LogStore and raft.StableStore inside a
// Store. It holds no resources of its own: closing the Store ends it.
// Raft's goroutines call it concurrently; writes block until durable (see
// the package doc), reads run on the caller's goroutine from memory and,
// for an entry, one pread.
type ShardStore struct {
	s *Store
	x *shardIndex
}

var (
	_ raft.LogStore          = (*ShardStore)(nil)
	_ raft.StableStore       = (*ShardStore)(nil)
	_ raft.MonotonicLogStore = (*ShardStore)(nil)
)

// Shard returns shard id's view of the store. Any int32 is a valid id; a
// shard never written to has an empty log and no stable values, and costs
// nothing on disk. Calling Shard again for an id returns another view of
// the same data. Safe for concurrent use.
func (s *Store) Shard(id int32) (*ShardStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	x, ok := s.shards[id]
	if !ok {
		x = newShardIndex(id)
		s.shards[id] = x
	}
	return &ShardStore{s: s, x: x}, nil
}

// ID is the shard id the view was made for.
func (ss *ShardStore) ID() int32 { return ss.x.id }

// IsMonotonic implements raft.MonotonicLogStore: StoreLogs only appends
// right after the last stored index (or anywhere on an empty log), so Raft
// deletes the whole log after restoring a snapshot rather than leaving a
// gap before the snapshot's index.
func (ss *ShardStore) IsMonotonic() bool { return true }

// FirstIndex implements raft.LogStore: the lowest stored index, 0 when the
// log is empty.
func (ss *ShardStore) FirstIndex() (uint64, error) {
	first, _, err := ss.bounds()
	return first, err
}

// LastIndex implements raft.LogStore: the highest stored index, 0 when the
// log is empty.
func (ss *ShardStore) LastIndex() (uint64, error) {
	_, last, err := ss.bounds()
	return last, err
}

// bounds returns the shard's first and last index, read under s.mu.
func (ss *ShardStore) bounds() (first, last uint64, err error) {
	ss.s.mu.RLock()
	defer ss.s.mu.RUnlock()
	if ss.s.closed {
		return 0, 0, ErrClosed
	}
	first, last = ss.x.bounds()
	return first, last, nil
}

// GetLog implements raft.LogStore. A missing index returns
// raft.ErrLogNotFound (not wrapped: raft compares with ==).
func (ss *ShardStore) GetLog(index uint64, log *raft.Log) error {
	b, err := ss.read(index)
	if err != nil {
		return err
	}
	if err := decodeLog(b, log); err != nil {
		return fmt.Errorf("shard %d index %d: %w", ss.x.id, index, err)
	}
	if log.Index != index {
		return fmt.Errorf("%w: shard %d: index %d holds entry %d", ErrCorrupt, ss.x.id, index, log.Index)
	}
	return nil
}

// read returns the stored bytes of index, read while s.mu is held so that
// the segment is not closed under the read.
func (ss *ShardStore) read(index uint64) ([]byte, error) {
	ss.s.mu.RLock()
	defer ss.s.mu.RUnlock()
	if ss.s.closed {
		return nil, ErrClosed
	}
	first, last := ss.x.bounds()
	if index < first || index > last || last == 0 {
		return nil, raft.ErrLogNotFound
	}
	l := ss.x.locs[index-first]
	b := make([]byte, l.n)
	if _, err := ss.s.segs[l.seq].f.ReadAt(b, l.off); err != nil {
		return nil, fmt.Errorf("nodestore: shard %d index %d: %w", ss.x.id, index, err)
	}
	return b, nil
}

// StoreLog implements raft.LogStore; see StoreLogs.
func (ss *ShardStore) StoreLog(log *raft.Log) error {
	return ss.StoreLogs([]*raft.Log{log})
}

// StoreLogs implements raft.LogStore. The entries must have consecutive
// indexes, starting right after the last stored one or anywhere on an
// empty log, or the write fails with ErrNonSequential (Raft, told by
// IsMonotonic, never does otherwise). They are one write: all of them are
// durable when it returns nil, and none is kept if it fails. The entries
// are encoded on the caller's goroutine, not the committer's, into one
// pooled buffer: the committer copies them into its batch, and nothing
// holds them once the write is answered.
func (ss *ShardStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	w := &write{x: ss.x, kind: kindLogs, first: logs[0].Index, entries: make([][]byte, len(logs))}
	size := 0
	for i, l := range logs {
		if l.Index != w.first+uint64(i) || l.Index == 0 {
			return fmt.Errorf("%w: shard %d: entry %d of a batch starting at %d is index %d", ErrNonSequential, ss.x.id, i, w.first, l.Index)
		}
		size += encodedLogLen(l)
	}
	buf := getEncodeBuf(size)
	defer putEncodeBuf(buf)
	b := *buf
	for i, l := range logs {
		start := len(b)
		b = appendLog(b, l)
		w.entries[i] = b[start:len(b):len(b)]
	}
	*buf = b
	return ss.s.do(w)
}

// encodeBufs holds StoreLogs' buffers, so that a write's entries cost no
// allocation of their size: they are most of what a node allocates for
// its log.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledEncodeBuf is the largest buffer encodeBufs keeps: a batch of
// big entries (a snapshot's worth of a follower catching up) is rare, and
// its buffer is let go.
const maxPooledEncodeBuf = 1 << 20

// getEncodeBuf returns an empty pooled buffer that holds at least size
// bytes.
func getEncodeBuf(size int) *[]byte {
	buf := encodeBufs.Get().(*[]byte)
	if cap(*buf) < size {
		*buf = make([]byte, 0, size)
	}
	*buf = (*buf)[:0]
	return buf
}

func putEncodeBuf(buf *[]byte) {
	if cap(*buf) <= maxPooledEncodeBuf {
		encodeBufs.Put(buf)
	}
}

// DeleteRange implements raft.LogStore: it deletes every stored index in
// [min, max], both bounds included, as one write, durable when it returns
// nil. Indexes in the range that are not stored are skipped; a range that
// holds none deletes nothing. Raft deletes a prefix (compaction) or a
// suffix (a conflicting tail); a range strictly inside the log would leave
// it with a hole and fails with ErrNonSequential.
func (ss *ShardStore) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	return ss.s.do(&write{x: ss.x, kind: kindDelete, min: min, max: max})
}

// Set implements raft.StableStore; durable when it returns nil.
func (ss *ShardStore) Set(key, val []byte) error {
	return ss.s.do(&write{x: ss.x, kind: kindSet, key: clone(key), val: clone(val)})
}

// Get implements raft.StableStore. A key never set returns ErrKeyNotFound
// (text "not found", which raft checks for); the value is a copy.
func (ss *ShardStore) Get(key []byte) ([]byte, error) {
	ss.s.mu.RLock()
	defer ss.s.mu.RUnlock()
	if ss.s.closed {
		return nil, ErrClosed
	}
	v, ok := ss.x.stable[string(key)]
	if !ok {
		return nil, ErrKeyNotFound
	}
	return clone(v), nil
}

// SetUint64 implements raft.StableStore (big-endian, 8 bytes); durable when
// it returns nil. Raft stores its current term and vote through it.
func (ss *ShardStore) SetUint64(key []byte, val uint64) error {
	return ss.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore. A key never set returns
// ErrKeyNotFound; a value that is not 8 bytes returns ErrCorrupt.
func (ss *ShardStore) GetUint64(key []byte) (uint64, error) {
	v, err := ss.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: shard %d: stable key %q holds %d bytes, not a uint64", ErrCorrupt, ss.x.id, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func clone(b []byte) []byte { return append(make([]byte, 0, len(b)), b...) }
