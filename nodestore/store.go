package nodestore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/bbolt"
)

const (
	// DefaultTimeout is how long Open waits for another process's lock on
	// the file when Options.Timeout is zero.
	DefaultTimeout = time.Second

	// maxBatch bounds how many queued writes one transaction takes, so one
	// commit stays short and the writers queued behind a full batch are
	// not starved. It is also the queue's capacity.
	maxBatch = 256
)

// Options configures Open. The zero value takes every default.
type Options struct {
	// Timeout bounds waiting for another process's lock on the file (a
	// second node on the same data dir). Zero means DefaultTimeout.
	Timeout time.Duration

	// Logger receives the store's events (a failed group commit, Close).
	// Nil means no logging.
	Logger hclog.Logger
}

// Store is one bolt file holding the Raft logs and stable stores of every
// shard of a node. Get a shard's view with Shard. Its methods are safe for
// concurrent use.
type Store struct {
	db     *bbolt.DB
	logger hclog.Logger

	// queue carries writes to the committer. Writers send; only the
	// committer receives.
	queue chan *write
	// closing is closed by Close: no new write is accepted and the
	// committer fails what is still queued, then exits.
	closing chan struct{}
	// done is closed by the committer when it has exited.
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	commits atomic.Uint64 // transactions committed
	writes  atomic.Uint64 // writes committed
}

// write is one queued write and where its outcome goes.
type write struct {
	// apply runs inside a bolt write transaction on the committer
	// goroutine, possibly sharing it with other writes, and possibly twice
	// (again alone after a failed shared transaction). It must only touch
	// tx, must not block, and must not assume that the pages it reads are
	// untouched by the writes before it in the transaction (see
	// ShardStore.DeleteRange).
	apply func(tx *bbolt.Tx) error
	// done receives the write's result exactly once; buffered, so the
	// committer never waits for a writer.
	done chan error
}

// Open opens the store at path, creating the file if it does not exist,
// and starts its committer goroutine. The file stays locked until Close; a
// second Open of the same file, from this process or another, fails with
// ErrLocked after opts.Timeout.
func Open(path string, opts Options) (*Store, error) {
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	// NoFreelistSync: commits do not write the free page list (bolt
	// rebuilds it by scanning when the file is opened), one page write
	// less per commit; durability of the data is unchanged.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.Timeout, NoFreelistSync: true})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (is another node using this data dir?)", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("nodestore: open %s: %w", path, err)
	}
	s := &Store{
		db:      db,
		logger:  opts.Logger,
		queue:   make(chan *write, maxBatch),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go s.commitLoop()
	return s, nil
}

// Path is the file's path.
func (s *Store) Path() string { return s.db.Path() }

// Close stops the committer and closes the file. The transaction being
// committed finishes; writes still queued, and every write and read after
// Close, fail with ErrClosed. Call it after every Raft that uses the store
// has shut down. Close blocks until the committer has exited, reads in
// progress have ended and bolt has released the file; calling it again
// returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		<-s.done
		s.closeErr = s.db.Close()
		st := s.Stats()
		s.logger.Info("node log store closed", "path", s.db.Path(), "commits", st.Commits, "writes", st.Writes, "error", s.closeErr)
	})
	return s.closeErr
}

// Stats counts what the committer has done since Open.
type Stats struct {
	// Commits is the number of write transactions committed.
	Commits uint64
	// Writes is the number of writes (StoreLogs, DeleteRange, Set, ...)
	// they held. Writes/Commits is the mean group-commit size.
	Writes uint64
}

// Stats returns the counters so far. Safe to call at any time.
func (s *Store) Stats() Stats {
	// Read commits first: writes is added before commits, so Writes >=
	// Commits holds for every snapshot.
	c := s.commits.Load()
	return Stats{Commits: c, Writes: s.writes.Load()}
}

// commitLoop is the store's only writer, running in its own goroutine from
// Open until Close.
//
// Group commit without a timer: the loop takes the first queued write, then
// whatever else is queued at that moment (up to maxBatch), and commits them
// in one transaction. While that transaction writes and fsyncs, new writes
// queue up, and they form the next batch. So the batch grows with the load
// by itself, N shards writing together pay about one fsync rather than N,
// and a lone writer never waits for company: its latency is its own commit
// plus, at worst, the one in progress when it arrived.
func (s *Store) commitLoop() {
	defer close(s.done)
	batch := make([]*write, 0, maxBatch)
	for {
		// Close wins over queued writes: once it is seen, nothing more is
		// committed, whatever is queued.
		select {
		case <-s.closing:
			s.failQueued()
			return
		default:
		}
		select {
		case <-s.closing:
			s.failQueued()
			return
		case w := <-s.queue:
			batch = append(batch[:0], w)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case w := <-s.queue:
				batch = append(batch, w)
			default:
				break drain
			}
		}
		s.commit(batch)
		clear(batch) // drop the closures' captured entries until the next batch
	}
}

// commit runs a batch in one transaction and answers each write. If the
// transaction fails (a write's error, or the commit itself), nothing of it
// is kept and each write is committed again alone, so one bad write does
// not fail the others and each gets its own result. Writes are idempotent,
// so running a write again after its shared transaction failed is safe even
// when that failure was an fsync whose data reached the disk after all.
func (s *Store) commit(batch []*write) {
	err := s.db.Update(func(tx *bbolt.Tx) error {
		for _, w := range batch {
			if err := w.apply(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.count(len(batch))
	}
	if err == nil || len(batch) == 1 {
		for _, w := range batch {
			w.done <- err
		}
		return
	}
	s.logger.Warn("group commit failed; committing its writes one by one", "writes", len(batch), "error", err)
	for _, w := range batch {
		err := s.db.Update(w.apply)
		if err == nil {
			s.count(1)
		}
		w.done <- err
	}
}

func (s *Store) count(writes int) {
	s.writes.Add(uint64(writes))
	s.commits.Add(1)
}

// failQueued answers every write still queued with ErrClosed. Only the
// committer calls it, as it exits.
func (s *Store) failQueued() {
	for {
		select {
		case w := <-s.queue:
			w.done <- ErrClosed
		default:
			return
		}
	}
}

// do queues apply for the committer and blocks until it is durable or has
// failed. Called by any goroutine.
func (s *Store) do(apply func(tx *bbolt.Tx) error) error {
	select {
	case <-s.closing:
		return ErrClosed
	default:
	}
	w := &write{apply: apply, done: make(chan error, 1)}
	select {
	case s.queue <- w:
	case <-s.closing:
		return ErrClosed
	}
	select {
	case err := <-w.done:
		return err
	case <-s.done:
		// The committer has exited. It answers every write it took
		// before exiting, w included if it took w; a write queued after
		// its last look at the queue is never taken.
		select {
		case err := <-w.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// view runs fn in a read transaction on the caller's goroutine.
func (s *Store) view(fn func(tx *bbolt.Tx) error) error {
	err := s.db.View(fn)
	if errors.Is(err, bbolt.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}
