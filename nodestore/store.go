package nodestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

const (
	// DefaultTimeout is how long Open waits for another process's lock on
	// the directory when Options.Timeout is zero.
	DefaultTimeout = time.Second

	// DefaultSegmentSize is the size at which the active segment is sealed
	// and a new one started, when Options.SegmentSize is zero.
	DefaultSegmentSize = 64 << 20

	// defaultRelocateStep is the most one relocation copies after a
	// commit: about 10 ms of sequential writing, against up to a whole
	// segment.
	defaultRelocateStep = 4 << 20

	// defaultZeroRoom is how far the committer keeps the active segment
	// written with zeros ahead of its last commit (zeroAhead).
	defaultZeroRoom = 1 << 20

	// maxBatch bounds how many queued writes one group commit takes, so one
	// commit stays short and the writers queued behind a full batch are
	// not starved. It is also the queue's capacity.
	maxBatch = 256
)

// Options configures Open. The zero value takes every default.
type Options struct {
	// Timeout bounds waiting for another process's lock on the directory
	// (a second node on the same data dir). Zero means DefaultTimeout.
	Timeout time.Duration

	// SegmentSize is the size at which a segment file is sealed and the
	// next one started. Zero means DefaultSegmentSize.
	SegmentSize int64

	// Import names a bolt file written by an earlier kcoord (DataDir/raft.db,
	// see legacy.go). When it exists, Open copies every shard out of it
	// into the log and removes it once the copy is durable. Any segments
	// already in the directory are then from an import a crash interrupted
	// (the file outlives nothing else), and are deleted first. Empty means
	// no import.
	Import string

	// Logger receives the store's events (a torn tail cut off, an import,
	// Close). Nil means no logging.
	Logger hclog.Logger

	// UnsafeSkipSync plants a bug: commits are acknowledged without their
	// fdatasync, so a power loss can undo what was acknowledged. Only for
	// proving that the chaos suite's power-loss nemesis catches it.
	UnsafeSkipSync bool

	// OnFail, when set, is told of the write or fsync failure that fails
	// the store (see Failed), on the committer, which must not be held up.
	OnFail func(error)

	// ObserveSync, when set, is told how long each group commit's write
	// and fdatasync took (kcoord_log_sync_seconds). The committer calls it
	// after every commit, so it must be quick and must not block.
	ObserveSync func(time.Duration)

	// zeroRoom overrides defaultZeroRoom in tests: 0 takes the default,
	// a negative value writes no room ahead, so files end at their last
	// commit.
	zeroRoom int64
}

// Store is the write-ahead log of every shard of a node, in one directory.
// Get a shard's view with Shard. Its methods are safe for concurrent use.
type Store struct {
	dir     string
	opts    Options
	logger  hclog.Logger
	lock    *os.File
	segSize int64
	// zeros is the room zeroAhead keeps, as that many zero bytes (none:
	// no room).
	zeros []byte
	// relocateStep bounds the bytes one relocate call copies
	// (defaultRelocateStep; tests make it smaller).
	relocateStep int64

	// mu guards the shards' indexes, the segment table and closed. The
	// committer holds it for writing while it publishes a durable batch or
	// changes the segment table; readers hold it for reading, including
	// across the pread of an entry, so a segment is never closed under
	// them.
	mu     sync.RWMutex
	shards map[int32]*shardIndex
	segs   map[uint32]*segment
	closed bool

	// Owned by the committer goroutine (after Open returns).
	active  *segment
	sealed  []*segment // oldest first
	buf     []byte
	pending []*write
	spans   map[*shardIndex]span
	// failed is set when a write to or fsync of a segment failed: what is
	// on disk after it is unknown, so every later write fails with it.
	failed error

	// busySince is when the committer began the batch it is committing
	// (monotonic nanoseconds since start), 0 between batches: Busy reads it
	// so a watchdog can tell a disk that stopped answering without waiting
	// for it.
	start     time.Time
	busySince atomic.Int64
	// failure holds failed for readers other than the committer (Failed).
	failure atomic.Pointer[error]
	faults  Faults

	queue     chan *write
	closing   chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	commits atomic.Uint64
	writes  atomic.Uint64
}

// write is one queued write and where its outcome goes. Exactly one of its
// kinds is set; the caller fills it and the committer validates, frames,
// syncs and publishes it.
type write struct {
	x    *shardIndex
	kind byte
	// kindLogs: encoded entries, the first of them at index first.
	entries [][]byte
	first   uint64
	// kindDelete: the range asked for, both included.
	min, max uint64
	// kindSet
	key, val []byte

	// pause, in tests only, parks the committer inside its batch.
	pause func()

	// done receives the write's result exactly once; buffered, so the
	// committer never waits for a writer.
	done chan error

	// Set by the committer while it frames the batch: where the record's
	// entries are in the batch buffer, and the clamped range of a delete.
	at     []loc
	lo, hi uint64
	noop   bool
}

// Open opens the log in dir, creating the directory if it does not exist,
// reads every segment to rebuild the shards' indexes and starts the
// committer goroutine. A record a crash cut short at the end of the last
// segment is dropped (it was never acknowledged); anything else unreadable
// fails Open with ErrCorrupt. The directory stays locked until Close; a
// second Open of it, from this process or another, fails with ErrLocked
// after opts.Timeout.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.SegmentSize == 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nodestore: %w", err)
	}
	lock, err := lockDir(dir, opts.Timeout)
	if err != nil {
		return nil, err
	}
	importing := false
	if opts.Import != "" {
		if importing, err = restartImport(dir, opts.Import); err != nil {
			_ = lock.Close()
			return nil, err
		}
	}
	s := &Store{
		dir:     dir,
		opts:    opts,
		logger:  opts.Logger,
		lock:    lock,
		segSize: opts.SegmentSize,

		relocateStep: defaultRelocateStep,
		shards:       map[int32]*shardIndex{},
		segs:         map[uint32]*segment{},
		spans:        map[*shardIndex]span{},
		start:        time.Now(),
		queue:        make(chan *write, maxBatch),
		closing:      make(chan struct{}),
		done:         make(chan struct{}),
	}
	switch {
	case opts.zeroRoom == 0:
		s.zeros = make([]byte, defaultZeroRoom)
	case opts.zeroRoom > 0:
		s.zeros = make([]byte, opts.zeroRoom)
	}
	if err := s.load(); err != nil {
		s.closeFiles()
		return nil, err
	}
	go s.commitLoop()
	if importing {
		if err := s.importLegacy(opts.Import); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// lockDir takes an exclusive flock on dir/LOCK, retrying until timeout.
func lockDir(dir string, timeout time.Duration) (*os.File, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("nodestore: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %s (is another node using this data dir?)", ErrLocked, dir)
			}
			return nil, fmt.Errorf("nodestore: lock %s: %w", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Path is the log's directory.
func (s *Store) Path() string { return s.dir }

// Close stops the committer and closes the files. The batch being
// committed finishes; writes still queued, and every write and read after
// Close, fail with ErrClosed. Call it after every Raft that uses the store
// has shut down. Close blocks until the committer has exited and reads in
// progress have ended; calling it again returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		<-s.done
		s.closeErr = s.closeFiles()
		st := s.Stats()
		s.logger.Info("node log store closed", "dir", s.dir, "commits", st.Commits, "writes", st.Writes, "error", s.closeErr)
	})
	return s.closeErr
}

// closeFiles marks the store closed and closes every segment and the
// lock, which releases it.
func (s *Store) closeFiles() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, seg := range s.segs {
		errs = append(errs, seg.f.Close())
	}
	errs = append(errs, s.lock.Close())
	return errors.Join(errs...)
}

// Stats counts what the committer has done since Open.
type Stats struct {
	// Commits is the number of group commits of writes: one write(2) and
	// one fdatasync each. Rotation, relocation and Open's checkpoint write
	// and sync besides, and are not counted.
	Commits uint64
	// Writes is the number of writes (StoreLogs, DeleteRange, Set, ...)
	// they held. Writes/Commits is the mean group-commit size.
	Writes uint64
	// Segments is the number of segment files.
	Segments int
}

// Stats returns the counters so far. Safe to call at any time.
func (s *Store) Stats() Stats {
	// Read commits first: writes is added before commits, so Writes >=
	// Commits holds for every snapshot.
	c := s.commits.Load()
	st := Stats{Commits: c, Writes: s.writes.Load()}
	s.mu.RLock()
	st.Segments = len(s.segs)
	s.mu.RUnlock()
	return st
}

// commitLoop is the store's only writer, running in its own goroutine from
// Open until Close.
//
// Group commit without a timer: the loop takes the first queued write, then
// whatever else is queued at that moment (up to maxBatch), and commits them
// with one write(2) and one fdatasync. While that commit runs, new writes
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
		s.busySince.Store(max(int64(time.Since(s.start)), 1))
		s.commit(batch)
		s.busySince.Store(0)
		clear(batch) // drop the entries the writes hold until the next batch
	}
}

// commit validates, frames, appends and syncs a batch, publishes what it
// wrote to the indexes and answers each write. A write that is refused
// (ErrNonSequential) is answered at once and the others go on. A failed
// append or fsync fails the whole batch and every later write (failed).
func (s *Store) commit(batch []*write) {
	if s.failed != nil {
		answer(batch, s.failed)
		return
	}
	buf, commit := beginCommit(s.buf[:0])
	clear(s.spans)
	// pending share the batch's fate: the writes with a record in buf, and
	// the no-ops, which were judged against the writes before them.
	pending, records := s.pending[:0], 0
	defer func() { clear(pending) }() // drop the writes until the next batch
	for _, w := range batch {
		if w.pause != nil {
			w.pause()
			w.done <- nil
			continue
		}
		var err error
		if buf, err = s.frame(buf, w); err != nil {
			w.done <- err
			continue
		}
		pending = append(pending, w)
		if !w.noop {
			records++
		}
	}
	s.buf, s.pending = buf, pending
	if records == 0 {
		answer(pending, nil)
		return
	}
	endCommit(buf, commit)
	base, err := s.append(buf)
	if err != nil {
		answer(pending, err)
		return
	}
	s.mu.Lock()
	for _, w := range pending {
		if !w.noop {
			s.publish(w, base)
		}
	}
	s.mu.Unlock()
	s.writes.Add(uint64(records))
	s.commits.Add(1)
	answer(pending, nil)
	s.collect()
	if s.relocate() {
		s.collect()
	}
}

// answer gives every write in ws the result err.
func answer(ws []*write, err error) {
	for _, w := range ws {
		w.done <- err
	}
}

// frame checks w against its shard's bounds as the writes before it in the
// batch leave them, and appends its record to buf. Committer only.
func (s *Store) frame(buf []byte, w *write) ([]byte, error) {
	sp, ok := s.spans[w.x]
	if !ok {
		sp.first, sp.last = w.x.bounds()
	}
	switch w.kind {
	case kindLogs:
		if !sp.empty() && w.first != sp.last+1 {
			return buf, fmt.Errorf("%w: shard %d: storing index %d after %d", ErrNonSequential, w.x.id, w.first, sp.last)
		}
		if sp.empty() {
			sp.first = w.first
		}
		sp.last = w.first + uint64(len(w.entries)) - 1
		buf, w.at = appendLogsRecord(buf, w.x.id, w.entries)
	case kindDelete:
		w.lo, w.hi = max(w.min, sp.first), min(w.max, sp.last)
		if sp.empty() || w.lo > w.hi {
			w.noop = true
			return buf, nil
		}
		switch {
		case w.lo == sp.first && w.hi == sp.last:
			sp = span{}
		case w.lo == sp.first:
			sp.first = w.hi + 1
		case w.hi == sp.last:
			sp.last = w.lo - 1
		default:
			return buf, fmt.Errorf("%w: shard %d: deleting %d-%d from the middle of %d-%d", ErrNonSequential, w.x.id, w.lo, w.hi, sp.first, sp.last)
		}
		buf = appendDeleteRecord(buf, w.x.id, w.lo, w.hi)
	case kindSet:
		buf = appendSetRecord(buf, w.x.id, w.key, w.val)
	}
	s.spans[w.x] = sp
	return buf, nil
}

// append writes buf, one commit (beginCommit, endCommit), at the end of
// the active segment, sealing it first
// and starting the next one when buf would take it past the segment size,
// and fdatasyncs it. It returns the offset where buf begins. Any failure
// is sticky (s.failed). Committer only.
func (s *Store) append(buf []byte) (int64, error) {
	if s.active.size > int64(len(segmentMagic)) && s.active.size+int64(len(buf)) > s.segSize {
		if err := s.rotate(); err != nil {
			return 0, s.fail(err)
		}
	}
	base := s.active.size
	stampCommit(buf, s.active.seq)
	if err := s.zeroAhead(s.active, base+int64(len(buf))); err != nil {
		return 0, s.fail(err)
	}
	began := time.Now()
	if err := s.faults.beforeWrite(s.closing); err != nil {
		return 0, s.fail(err)
	}
	if _, err := s.active.f.WriteAt(buf, base); err != nil {
		return 0, s.fail(err)
	}
	if err := s.faults.beforeSync(s.closing); err != nil {
		return 0, s.fail(err)
	}
	if !s.opts.UnsafeSkipSync { // the planted bug acknowledges it anyway
		if err := syscall.Fdatasync(int(s.active.f.Fd())); err != nil {
			return 0, s.fail(err)
		}
	}
	if s.opts.ObserveSync != nil {
		s.opts.ObserveSync(time.Since(began))
	}
	s.active.size += int64(len(buf))
	return base, nil
}

// zeroAhead makes sure the commit about to end at end lies in seg's
// zeroed room, writing the next len(s.zeros) bytes of zeros (never past the
// segment size) when it would not. The commit's flush makes them durable
// with it. Committer only.
//
// Why: fdatasync of a write that grows the file must also commit the new
// file size and block allocation to the file system's journal, where a
// write over blocks already written and synced flushes only the data. On
// this machine's ext4 that is 217 µs against 153 µs at p50 for a lone
// flush; with three in-process nodes a one-client commit went from 1.12
// to 0.87 ms at p50. One commit a room pays the growth instead.
func (s *Store) zeroAhead(seg *segment, end int64) error {
	if end <= seg.zeroed {
		return nil
	}
	to := max(min(end+int64(len(s.zeros)), s.segSize), end)
	if to > end {
		if _, err := seg.f.WriteAt(s.zeros[:to-end], end); err != nil {
			return err
		}
	}
	seg.zeroed = to
	return nil
}

// fail makes err the store's sticky failure: every later write fails with
// it. Committer only.
func (s *Store) fail(err error) error {
	s.failed = fmt.Errorf("%w: %s: %w", ErrFailed, s.active.f.Name(), err)
	s.failure.Store(&s.failed)
	s.logger.Error("node log store failed; every later write fails until the node restarts", "error", err)
	if s.opts.OnFail != nil {
		s.opts.OnFail(s.failed)
	}
	return s.failed
}

// Busy reports how long the committer has been committing its current
// batch (writing, syncing, rotating or reclaiming segments), 0 when it is
// between batches. A disk that stops answering shows as a Busy that keeps
// growing. It reads one atomic: a watchdog may call it from any goroutine,
// however stuck the committer is.
func (s *Store) Busy() time.Duration {
	since := s.busySince.Load()
	if since == 0 {
		return 0
	}
	return max(time.Since(s.start)-time.Duration(since), 0)
}

// Failed returns the error that failed a write or fsync of the log (it
// wraps ErrFailed), after which every write fails; nil while the store
// takes writes. Any goroutine; it never blocks.
func (s *Store) Failed() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// rotate seals the active segment and starts the next, which begins with
// every shard's stable values, so that no older segment is needed for
// them. Committer only.
func (s *Store) rotate() error {
	next, err := createSegment(s.dir, s.active.seq+1)
	if err != nil {
		return err
	}
	// The checkpoint is a commit of its own, synced before the batch that
	// follows: a commit is only written once the one before it is durable,
	// which is how Open tells a torn commit from a corrupt one.
	buf := s.checkpoint()
	if buf != nil {
		stampCommit(buf, next.seq)
	}
	err = s.zeroAhead(next, next.size+int64(len(buf)))
	if err == nil {
		_, err = next.f.WriteAt(buf, next.size)
	}
	if err != nil {
		_ = next.f.Close()
		return err
	}
	if err := syscall.Fdatasync(int(next.f.Fd())); err != nil {
		_ = next.f.Close()
		return err
	}
	next.size += int64(len(buf))
	s.mu.Lock()
	s.sealed = append(s.sealed, s.active)
	s.active = next
	s.segs[next.seq] = next
	s.mu.Unlock()
	return nil
}

// checkpoint returns a commit of a kindSet record for every stable value
// of every shard: what a segment needs so that no older one is needed for
// them. Nil when there is no stable value.
func (s *Store) checkpoint() []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	buf, commit := beginCommit(nil)
	for _, x := range s.shards {
		for k, v := range x.stable {
			buf = appendSetRecord(buf, x.id, []byte(k), v)
		}
	}
	if len(buf) == commitHeaderLen {
		return nil
	}
	endCommit(buf, commit)
	return buf
}

// publish applies a durable write to its shard's index; its record begins
// at offset base of the active segment. Committer only, holding s.mu.
func (s *Store) publish(w *write, base int64) {
	x := w.x
	switch w.kind {
	case kindLogs:
		if len(x.locs) == 0 {
			x.first = w.first
		}
		for _, l := range w.at {
			l.seq, l.off = s.active.seq, base+l.off
			x.locs = append(x.locs, l)
			s.active.live++
			s.active.liveBytes += int64(l.n)
		}
	case kindDelete:
		lo, hi := int(w.lo-x.first), int(w.hi-x.first)
		for _, l := range x.locs[lo : hi+1] {
			seg := s.segs[l.seq]
			seg.live--
			seg.liveBytes -= int64(l.n)
		}
		switch {
		case lo == 0 && hi == len(x.locs)-1:
			x.locs = nil
		case lo == 0:
			// A fresh array, so the deleted prefix's memory goes.
			x.locs = slices.Clone(x.locs[hi+1:])
			x.first = w.hi + 1
		default:
			x.locs = x.locs[:lo]
		}
	case kindSet:
		x.stable[string(w.key)] = w.val
	}
}

// collect removes the oldest sealed segments while no entry lives in them.
// Only the oldest ever goes: a record in a segment may undo entries of the
// segments before it (a delete), so removing a segment while an older one
// remains could bring those entries back on the next Open. Committer only.
func (s *Store) collect() {
	for len(s.sealed) > 0 && s.sealed[0].live == 0 {
		seg := s.sealed[0]
		// Each removal is durable before the next: a newer segment may
		// hold the deletes of an older one's entries. One that fails stays
		// in the table and is tried again after the next commit.
		if err := os.Remove(seg.f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.logger.Warn("could not remove a log segment", "segment", seg.f.Name(), "error", err)
			return
		}
		if err := syncDir(s.dir); err != nil {
			s.logger.Warn("could not sync the log directory", "dir", s.dir, "error", err)
			return
		}
		s.mu.Lock()
		delete(s.segs, seg.seq)
		s.sealed = s.sealed[1:]
		s.mu.Unlock()
		_ = seg.f.Close()
	}
}

// relocate copies the live entries of the oldest sealed segment into the
// active one once the segments hold more than twice what lives in them
// plus two segments' worth, so that a shard that writes rarely does not
// keep every segment since its last compaction on disk. The copies are
// records like any other; once they are durable and the oldest segment
// holds nothing live, collect removes it. It reports whether it moved
// anything. One call, after a commit, moves at most relocateStep bytes, so
// a mostly live segment is moved over several commits and no commit waits
// behind a copy of a whole segment. Committer only.
func (s *Store) relocate() bool {
	if len(s.sealed) == 0 {
		return false
	}
	var total, live int64
	for _, seg := range s.sealed {
		total += seg.size
		live += seg.liveBytes
	}
	total += s.active.size
	live += s.active.liveBytes
	if total <= 2*live+2*s.segSize {
		return false
	}
	old := s.sealed[0]
	type moved struct {
		x  *shardIndex
		i  int // position in x.locs
		b  []byte
		at loc // where it is in buf, then in the active segment
	}
	var moves []moved
	var size int64
	s.mu.RLock()
scan:
	for _, x := range s.shards {
		for i, l := range x.locs {
			if l.seq != old.seq {
				continue
			}
			if size >= s.relocateStep {
				break scan
			}
			size += int64(l.n)
			b := make([]byte, l.n)
			if _, err := old.f.ReadAt(b, l.off); err != nil {
				s.mu.RUnlock()
				s.logger.Warn("could not read a log entry to relocate it", "segment", old.f.Name(), "error", err)
				return false
			}
			moves = append(moves, moved{x: x, i: i, b: b})
		}
	}
	s.mu.RUnlock()
	if len(moves) == 0 {
		return true // nothing lives in it: collect removes it
	}
	// One record per shard (moves are grouped by shard); entries carry
	// their index.
	buf, commit := beginCommit(nil)
	for i := 0; i < len(moves); {
		j := i + 1
		for j < len(moves) && moves[j].x == moves[i].x {
			j++
		}
		entries := make([][]byte, 0, j-i)
		for _, m := range moves[i:j] {
			entries = append(entries, m.b)
		}
		var at []loc
		buf, at = appendLogsRecord(buf, moves[i].x.id, entries)
		for k := range at {
			moves[i+k].at = at[k]
		}
		i = j
	}
	endCommit(buf, commit)
	base, err := s.append(buf)
	if err != nil {
		return false
	}
	s.mu.Lock()
	for _, m := range moves {
		l := m.at
		l.seq, l.off = s.active.seq, base+l.off
		m.x.locs[m.i] = l
		old.live--
		old.liveBytes -= int64(l.n)
		s.active.live++
		s.active.liveBytes += int64(l.n)
	}
	s.mu.Unlock()
	s.logger.Info("relocated live log entries out of the oldest segment", "segment", old.f.Name(), "entries", len(moves), "bytes", len(buf))
	return true
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

// do queues w for the committer and blocks until it is durable or has
// failed. Called by any goroutine.
func (s *Store) do(w *write) error {
	select {
	case <-s.closing:
		return ErrClosed
	default:
	}
	w.done = make(chan error, 1)
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
