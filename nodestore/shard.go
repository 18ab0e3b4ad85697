package nodestore

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// ShardStore is one shard's raft.LogStore and raft.StableStore inside a
// Store. It holds no resources of its own: closing the Store ends it.
// Raft's goroutines call it concurrently; writes block until durable (see
// the package doc), reads run on the caller's goroutine.
type ShardStore struct {
	s      *Store
	id     int32
	logs   []byte // bucket name, "logs/<id>"
	stable []byte // bucket name, "stable/<id>"
}

var (
	_ raft.LogStore    = (*ShardStore)(nil)
	_ raft.StableStore = (*ShardStore)(nil)
)

// Shard returns shard id's view of the store, creating its buckets (one
// write, durable when Shard returns) if this is the shard's first use. Any
// int32 is a valid id. Calling Shard again for an id returns another view
// of the same data. Safe for concurrent use: shards started in parallel
// have their bucket creations share commits.
func (s *Store) Shard(id int32) (*ShardStore, error) {
	ss := &ShardStore{
		s:      s,
		id:     id,
		logs:   fmt.Appendf(nil, "logs/%d", id),
		stable: fmt.Appendf(nil, "stable/%d", id),
	}
	err := s.do(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(ss.logs); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(ss.stable)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nodestore: shard %d: %w", id, err)
	}
	return ss, nil
}

// ID is the shard id the view was made for.
func (ss *ShardStore) ID() int32 { return ss.id }

// bucket returns one of the shard's buckets, which Shard created.
func bucket(tx *bbolt.Tx, name []byte) (*bbolt.Bucket, error) {
	if b := tx.Bucket(name); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("%w: bucket %s is missing", ErrCorrupt, name)
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v) }

// FirstIndex implements raft.LogStore: the lowest stored index, 0 when the
// log is empty.
func (ss *ShardStore) FirstIndex() (uint64, error) {
	var idx uint64
	err := ss.s.view(func(tx *bbolt.Tx) error {
		b, err := bucket(tx, ss.logs)
		if err != nil {
			return err
		}
		if k, _ := b.Cursor().First(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// LastIndex implements raft.LogStore: the highest stored index, 0 when the
// log is empty.
func (ss *ShardStore) LastIndex() (uint64, error) {
	var idx uint64
	err := ss.s.view(func(tx *bbolt.Tx) error {
		b, err := bucket(tx, ss.logs)
		if err != nil {
			return err
		}
		if k, _ := b.Cursor().Last(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// GetLog implements raft.LogStore. A missing index returns
// raft.ErrLogNotFound (not wrapped: raft compares with ==).
func (ss *ShardStore) GetLog(index uint64, log *raft.Log) error {
	return ss.s.view(func(tx *bbolt.Tx) error {
		b, err := bucket(tx, ss.logs)
		if err != nil {
			return err
		}
		v := b.Get(u64(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := decodeLog(v, log); err != nil {
			return fmt.Errorf("shard %d index %d: %w", ss.id, index, err)
		}
		if log.Index != index {
			return fmt.Errorf("%w: shard %d: index %d holds entry %d", ErrCorrupt, ss.id, index, log.Index)
		}
		return nil
	})
}

// StoreLog implements raft.LogStore; see StoreLogs.
func (ss *ShardStore) StoreLog(log *raft.Log) error {
	return ss.StoreLogs([]*raft.Log{log})
}

// StoreLogs implements raft.LogStore. The entries are one write: all of
// them are durable when it returns nil, and none is kept if the write
// fails. An entry at an index already stored replaces it. The entries are
// encoded on the caller's goroutine, not the committer's.
func (ss *ShardStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	keys := make([][]byte, len(logs))
	vals := make([][]byte, len(logs))
	for i, l := range logs {
		keys[i] = u64(l.Index)
		vals[i] = encodeLog(l)
	}
	return ss.s.do(func(tx *bbolt.Tx) error {
		b, err := bucket(tx, ss.logs)
		if err != nil {
			return err
		}
		for i := range keys {
			if err := b.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRange implements raft.LogStore: it deletes every stored index in
// [min, max], both bounds included, as one write, durable when it returns
// nil. Indexes in the range that are not stored are skipped; min > max
// deletes nothing.
//
// The indexes are collected first and deleted after, never by
// Cursor.Delete inside the cursor loop. bbolt's cursor walks a page's
// in-memory node once the page was modified in the transaction, and a
// delete shifts that node's entries left, so the following Next skips one
// key (etcd-io/bbolt#146, boltdb/bolt#357). In a transaction of its own,
// as in raft-boltdb, the pages it walks are untouched and the loop works,
// but here the transaction may hold the same shard's earlier writes: the
// appends on the last page, or another DeleteRange.
func (ss *ShardStore) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	return ss.s.do(func(tx *bbolt.Tx) error {
		b, err := bucket(tx, ss.logs)
		if err != nil {
			return err
		}
		var doomed []uint64
		c := b.Cursor()
		for k, _ := c.Seek(u64(min)); k != nil; k, _ = c.Next() {
			idx := binary.BigEndian.Uint64(k)
			if idx > max {
				break
			}
			doomed = append(doomed, idx)
		}
		for _, idx := range doomed {
			if err := b.Delete(u64(idx)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Set implements raft.StableStore; durable when it returns nil.
func (ss *ShardStore) Set(key, val []byte) error {
	key, val = clone(key), clone(val) // bolt keeps references until commit
	return ss.s.do(func(tx *bbolt.Tx) error {
		b, err := bucket(tx, ss.stable)
		if err != nil {
			return err
		}
		return b.Put(key, val)
	})
}

// Get implements raft.StableStore. A key never set returns ErrKeyNotFound
// (text "not found", which raft checks for); the value is a copy.
func (ss *ShardStore) Get(key []byte) ([]byte, error) {
	var out []byte
	err := ss.s.view(func(tx *bbolt.Tx) error {
		b, err := bucket(tx, ss.stable)
		if err != nil {
			return err
		}
		v := b.Get(key)
		if v == nil {
			return ErrKeyNotFound
		}
		out = append(make([]byte, 0, len(v)), v...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetUint64 implements raft.StableStore (big-endian, 8 bytes); durable when
// it returns nil. Raft stores its current term and vote through it.
func (ss *ShardStore) SetUint64(key []byte, val uint64) error { return ss.Set(key, u64(val)) }

// GetUint64 implements raft.StableStore. A key never set returns
// ErrKeyNotFound; a value that is not 8 bytes returns ErrCorrupt.
func (ss *ShardStore) GetUint64(key []byte) (uint64, error) {
	v, err := ss.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: shard %d: stable key %q holds %d bytes, not a uint64", ErrCorrupt, ss.id, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func clone(b []byte) []byte { return append(make([]byte, 0, len(b)), b...) }
