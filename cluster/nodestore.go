package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// Log store kinds, recorded in node.json: a data dir keeps the kind it was
// created with.
const (
	// LogStoreNode is one bolt file per node for every shard's Raft log and
	// stable store, with group commit: appends that arrive together from
	// different shards share one transaction and one fsync.
	LogStoreNode = "node"
	// LogStoreShard is raft-boltdb, one file per shard: each shard's
	// appends pay their own transaction and fsyncs.
	LogStoreShard = "shard"
)

// maxGroupCommit bounds how many queued writes one transaction takes.
const maxGroupCommit = 256

// NodeStore holds the Raft logs and stable stores of every shard of a node
// in one bolt file. Raft's goroutines of all shards call it concurrently:
// reads run in their own read transactions; writes are queued to one
// committer goroutine that commits everything queued so far in a single
// transaction, so N shards appending together cost one fsync, not N, and a
// lone writer waits for nothing but its own commit.
type NodeStore struct {
	db     *bbolt.DB
	queue  chan *storeWrite
	done   chan struct{}
	closed chan struct{}
	once   sync.Once
}

// storeWrite is one queued write and where its outcome goes.
type storeWrite struct {
	fn  func(tx *bbolt.Tx) error
	err chan error
}

// OpenNodeStore opens (creating) the node's log store at path.
func OpenNodeStore(path string) (*NodeStore, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: boltOpenTimeout, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("open %s (is another node using this data dir?): %w", path, err)
	}
	s := &NodeStore{db: db, queue: make(chan *storeWrite, maxGroupCommit), done: make(chan struct{}), closed: make(chan struct{})}
	go s.commitLoop()
	return s, nil
}

// Close stops the committer and closes the file. Writes after Close fail
// with ErrShutdown.
func (s *NodeStore) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closed)
		<-s.done
		err = s.db.Close()
	})
	return err
}

// commitLoop is the store's one writer: it takes the first queued write,
// everything queued behind it, and commits them in one transaction.
func (s *NodeStore) commitLoop() {
	defer close(s.done)
	batch := make([]*storeWrite, 0, maxGroupCommit)
	for {
		select {
		case <-s.closed:
			s.failQueued()
			return
		case w := <-s.queue:
			batch = append(batch[:0], w)
		}
	drain:
		for len(batch) < maxGroupCommit {
			select {
			case w := <-s.queue:
				batch = append(batch, w)
			default:
				break drain
			}
		}
		s.commit(batch)
	}
}

// commit runs a batch in one transaction. If it fails, each write is
// retried alone so one bad write does not fail the others.
func (s *NodeStore) commit(batch []*storeWrite) {
	err := s.db.Update(func(tx *bbolt.Tx) error {
		for _, w := range batch {
			if err := w.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(batch) == 1 {
		for _, w := range batch {
			w.err <- err
		}
		return
	}
	for _, w := range batch {
		w.err <- s.db.Update(w.fn)
	}
}

func (s *NodeStore) failQueued() {
	for {
		select {
		case w := <-s.queue:
			w.err <- ErrShutdown
		default:
			return
		}
	}
}

// write queues fn and waits until it is durable.
func (s *NodeStore) write(fn func(tx *bbolt.Tx) error) error {
	w := &storeWrite{fn: fn, err: make(chan error, 1)}
	select {
	case <-s.closed:
		return ErrShutdown
	default:
	}
	select {
	case s.queue <- w:
	case <-s.closed:
		return ErrShutdown
	}
	select {
	case err := <-w.err:
		return err
	case <-s.done:
		// The committer stopped; it may have taken w before it did.
		select {
		case err := <-w.err:
			return err
		default:
			return ErrShutdown
		}
	}
}

// Shard returns the log and stable store of one shard.
func (s *NodeStore) Shard(id int32) (*ShardStore, error) {
	ss := &ShardStore{s: s, logs: []byte(fmt.Sprintf("logs/%d", id)), stable: []byte(fmt.Sprintf("stable/%d", id))}
	err := s.write(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(ss.logs); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(ss.stable)
		return err
	})
	return ss, err
}

// ShardStore is one shard's raft.LogStore and raft.StableStore inside a
// NodeStore.
type ShardStore struct {
	s      *NodeStore
	logs   []byte
	stable []byte
}

var (
	_ raft.LogStore    = (*ShardStore)(nil)
	_ raft.StableStore = (*ShardStore)(nil)
)

// errNotFound is what raft expects from GetLog and Get for a missing key.
var errNotFound = errors.New("not found")

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// FirstIndex implements raft.LogStore.
func (ss *ShardStore) FirstIndex() (uint64, error) {
	var idx uint64
	err := ss.s.db.View(func(tx *bbolt.Tx) error {
		if k, _ := tx.Bucket(ss.logs).Cursor().First(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// LastIndex implements raft.LogStore.
func (ss *ShardStore) LastIndex() (uint64, error) {
	var idx uint64
	err := ss.s.db.View(func(tx *bbolt.Tx) error {
		if k, _ := tx.Bucket(ss.logs).Cursor().Last(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// GetLog implements raft.LogStore.
func (ss *ShardStore) GetLog(index uint64, log *raft.Log) error {
	return ss.s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(ss.logs).Get(u64(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		return decodeLog(v, log)
	})
}

// StoreLog implements raft.LogStore.
func (ss *ShardStore) StoreLog(log *raft.Log) error {
	return ss.StoreLogs([]*raft.Log{log})
}

// StoreLogs implements raft.LogStore; the logs are durable when it returns.
func (ss *ShardStore) StoreLogs(logs []*raft.Log) error {
	encoded := make([][]byte, len(logs))
	for i, l := range logs {
		encoded[i] = encodeLog(l)
	}
	return ss.s.write(func(tx *bbolt.Tx) error {
		b := tx.Bucket(ss.logs)
		for i, l := range logs {
			if err := b.Put(u64(l.Index), encoded[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRange implements raft.LogStore (inclusive bounds).
func (ss *ShardStore) DeleteRange(min, max uint64) error {
	return ss.s.write(func(tx *bbolt.Tx) error {
		c := tx.Bucket(ss.logs).Cursor()
		for k, _ := c.Seek(u64(min)); k != nil && binary.BigEndian.Uint64(k) <= max; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Set implements raft.StableStore.
func (ss *ShardStore) Set(key, val []byte) error {
	return ss.s.write(func(tx *bbolt.Tx) error { return tx.Bucket(ss.stable).Put(key, val) })
}

// Get implements raft.StableStore; a missing key is an error, as raft
// expects ("not found").
func (ss *ShardStore) Get(key []byte) ([]byte, error) {
	var out []byte
	err := ss.s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(ss.stable).Get(key)
		if v == nil {
			return errNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// SetUint64 implements raft.StableStore.
func (ss *ShardStore) SetUint64(key []byte, val uint64) error { return ss.Set(key, u64(val)) }

// GetUint64 implements raft.StableStore.
func (ss *ShardStore) GetUint64(key []byte) (uint64, error) {
	v, err := ss.Get(key)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(v), nil
}

// Log entry encoding, version 1: version(1) index(8) term(8) type(1)
// appendedAt(8, Unix ns) len(data)(4) data len(extensions)(4) extensions.
const logEncodingVersion = 1

func encodeLog(l *raft.Log) []byte {
	b := make([]byte, 0, 34+len(l.Data)+len(l.Extensions))
	b = append(b, logEncodingVersion)
	b = binary.BigEndian.AppendUint64(b, l.Index)
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Extensions)))
	return append(b, l.Extensions...)
}

// decodeLog copies everything out of v (bolt's memory is only valid inside
// the transaction).
func decodeLog(v []byte, l *raft.Log) error {
	bad := fmt.Errorf("cluster: corrupt log entry of %d bytes", len(v))
	if len(v) < 30 || v[0] != logEncodingVersion {
		return bad
	}
	l.Index = binary.BigEndian.Uint64(v[1:])
	l.Term = binary.BigEndian.Uint64(v[9:])
	l.Type = raft.LogType(v[17])
	if at := int64(binary.BigEndian.Uint64(v[18:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	} else {
		l.AppendedAt = time.Time{}
	}
	n := int(binary.BigEndian.Uint32(v[26:]))
	rest := v[30:]
	if len(rest) < n+4 {
		return bad
	}
	l.Data = append([]byte(nil), rest[:n]...)
	rest = rest[n:]
	m := int(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if len(rest) != m {
		return bad
	}
	l.Extensions = nil
	if m > 0 {
		l.Extensions = append([]byte(nil), rest...)
	}
	return nil
}
