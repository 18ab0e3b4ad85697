package nodestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/kcoord/kcoord/internal/testlog"
)

// openTestStore opens a store in a fresh temp dir, closed when the test ends.
func openTestStore(t testing.TB) *Store {
	t.Helper()
	return openTestStoreAt(t, filepath.Join(t.TempDir(), "wal"))
}

func openTestStoreAt(t testing.TB, dir string) *Store {
	t.Helper()
	return openTestStoreWith(t, dir, Options{})
}

// openTestStoreWith opens the store in dir with opts, logging to t.Log
// unless opts has a Logger, and closes it when the test ends.
func openTestStoreWith(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// reopen closes s and opens its directory again with the same options, as
// a node restart does.
func reopen(t testing.TB, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	opts := s.opts
	opts.Import = ""
	return openTestStoreWith(t, s.Path(), opts)
}

// testLogger is an hclog logger writing to t.Log; benchmarks log nothing.
func testLogger(t testing.TB) hclog.Logger {
	if _, ok := t.(*testing.B); ok {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: "nodestore", Level: hclog.Debug, Output: testlog.Writer(t)})
}

// logRecorder is an hclog logger writing to t.Log that also keeps the
// lines, so a test can check that the store warned.
type logRecorder struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
}

func recordLogs(t testing.TB) (*logRecorder, hclog.Logger) {
	r := &logRecorder{t: t}
	return r, hclog.New(&hclog.LoggerOptions{Name: "nodestore", Level: hclog.Debug, Output: r})
}

func (r *logRecorder) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	r.t.Log(line)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	return len(p), nil
}

// warnings returns the lines logged at level WARN or above.
func (r *logRecorder) warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(l, "[WARN]") || strings.Contains(l, "[ERROR]") {
			out = append(out, l)
		}
	}
	return out
}

// segmentFiles returns the paths of dir's segment files, oldest first.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(paths)
	return paths
}

// segmentBytes is the total size of dir's segment files.
func segmentBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	for _, p := range segmentFiles(t, dir) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// flipByte inverts the byte at offset off of the file at path (from the
// end when off is negative).
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// recordLen is the length on disk of a StoreLogs of logs committed alone:
// the commit header, then the record's header, kind and shard, the entry
// count and each entry with its length (segment.go).
func recordLen(logs []*raft.Log) int64 {
	n := int64(commitHeaderLen + recordHeaderLen + bodyHeaderLen + len(binary.AppendUvarint(nil, uint64(len(logs)))))
	for _, l := range logs {
		e := encodeLog(l)
		n += int64(len(binary.AppendUvarint(nil, uint64(len(e)))) + len(e))
	}
	return n
}

// wantTerm fails unless the shard's CurrentTerm is want.
func wantTerm(t testing.TB, ss *ShardStore, want uint64) {
	t.Helper()
	if v, err := ss.GetUint64([]byte("CurrentTerm")); err != nil || v != want {
		t.Fatalf("shard %d CurrentTerm = %d, %v; want %d", ss.ID(), v, err, want)
	}
}

func shard(t testing.TB, s *Store, id int32) *ShardStore {
	t.Helper()
	ss, err := s.Shard(id)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// entry is the test log entry at index i (term 1, 64 bytes of data naming
// the index): 98 bytes encoded, so about 40 fill a 4 KiB segment.
func entry(i uint64) *raft.Log {
	return entryOfTerm(i, 1)
}

func entryOfTerm(i, term uint64) *raft.Log {
	data := fmt.Appendf(nil, "entry %d term %d ", i, term)
	for len(data) < 64 {
		data = append(data, '.')
	}
	return &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: data}
}

// entries is entry(lo)..entry(hi).
func entries(lo, hi uint64) []*raft.Log {
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, entry(i))
	}
	return logs
}

func storeLogs(t testing.TB, ss *ShardStore, logs []*raft.Log) {
	t.Helper()
	if err := ss.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
}

// wantLog fails unless index holds want.
func wantLog(t testing.TB, ss *ShardStore, want *raft.Log) {
	t.Helper()
	var got raft.Log
	if err := ss.GetLog(want.Index, &got); err != nil {
		t.Fatalf("shard %d GetLog(%d): %v", ss.ID(), want.Index, err)
	}
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type || string(got.Data) != string(want.Data) || string(got.Extensions) != string(want.Extensions) {
		t.Fatalf("shard %d GetLog(%d) = %d/%d %q %q, want %d/%d %q %q", ss.ID(), want.Index, got.Index, got.Term, got.Data, got.Extensions, want.Index, want.Term, want.Data, want.Extensions)
	}
}

// wantMissing fails unless index is not stored.
func wantMissing(t testing.TB, ss *ShardStore, index uint64) {
	t.Helper()
	var got raft.Log
	if err := ss.GetLog(index, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("shard %d GetLog(%d) = %d %v, want raft.ErrLogNotFound", ss.ID(), index, got.Index, err)
	}
}

// wantBounds fails unless FirstIndex and LastIndex are first and last.
func wantBounds(t testing.TB, ss *ShardStore, first, last uint64) {
	t.Helper()
	f, err := ss.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ss.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if f != first || l != last {
		t.Fatalf("shard %d FirstIndex, LastIndex = %d, %d; want %d, %d", ss.ID(), f, l, first, last)
	}
}

// pauseCommitter parks the committer inside a batch of its own until
// resume is called, so that writes issued meanwhile queue up and are
// committed together as the next batch, exactly as writes that arrive
// during a slow fsync are. It makes group commit deterministic in tests.
func pauseCommitter(t testing.TB, s *Store) (resume func()) {
	t.Helper()
	parked, release := make(chan struct{}), make(chan struct{})
	w := &write{
		pause: func() {
			close(parked)
			<-release
		},
		done: make(chan error, 1),
	}
	s.queue <- w
	<-parked // the committer has formed the batch of w alone, and waits in it
	var once sync.Once
	// A test that fails while the committer is parked would hang in
	// Close: let it go first (cleanups run last-registered first).
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	return func() {
		t.Helper()
		once.Do(func() { close(release) })
		if err := <-w.done; err != nil {
			t.Fatal(err)
		}
	}
}

// settle returns once the committer has finished every write queued
// before it, including the segment removal and relocation that follow a
// commit (they run after its writes are answered), so that Stats and the
// files on disk are what those writes left.
func settle(t testing.TB, s *Store) {
	t.Helper()
	pauseCommitter(t, s)() // a batch of its own, which commits nothing
}

// failNextAppend makes the committer's next append fail, as a write(2)
// to a full or failing disk does: it swaps the active segment's file for
// a read-only one (reads still work). It returns once it is in place.
// heal puts the writable file back, as a disk that works again; call it
// only once a write has failed, while the committer waits for writes.
func failNextAppend(t testing.TB, s *Store) (heal func()) {
	t.Helper()
	var rw *os.File
	w := &write{
		pause: func() { // on the committer's goroutine, between batches
			s.mu.Lock()
			defer s.mu.Unlock()
			rw = s.active.f
			ro, err := os.Open(rw.Name())
			if err != nil {
				t.Error(err)
				return
			}
			s.active.f = ro
		},
		done: make(chan error, 1),
	}
	s.queue <- w
	if err := <-w.done; err != nil {
		t.Fatal(err)
	}
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = rw.Close()
		}
	})
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		ro := s.active.f
		s.active.f, healed = rw, true
		_ = ro.Close()
	}
}

// writeBoltFile writes a bolt file in the layout of legacy.go: for each
// shard of logs, bucket "logs/<id>" with its entries, and for each of
// stable, bucket "stable/<id>" with its values. A nil slice of logs makes
// an empty bucket.
func writeBoltFile(t testing.TB, path string, logs map[int32][]*raft.Log, stable map[int32]map[string][]byte) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for id, ls := range logs {
			b, err := tx.CreateBucket(fmt.Appendf(nil, "logs/%d", id))
			if err != nil {
				return err
			}
			for _, l := range ls {
				if err := b.Put(binary.BigEndian.AppendUint64(nil, l.Index), encodeLog(l)); err != nil {
					return err
				}
			}
		}
		for id, kv := range stable {
			b, err := tx.CreateBucket(fmt.Appendf(nil, "stable/%d", id))
			if err != nil {
				return err
			}
			for k, v := range kv {
				if err := b.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// updateBolt runs f in a read-write transaction of the bolt file at path.
func updateBolt(path string, f func(*bbolt.Tx) error) error {
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	err = db.Update(f)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// waitQueued waits until n writes are queued behind the paused committer.
func waitQueued(t testing.TB, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.queue) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", len(s.queue), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// batch issues writes, in order, while the committer is paused, and returns
// their results once it has committed them: all of them share one commit
// (checked through Stats), which is what group commit does to writes that
// arrive together.
func batch(t testing.TB, s *Store, writes ...func() error) []error {
	t.Helper()
	before := s.Stats()
	errs := queueTogether(t, s, writes...)
	after := s.Stats()
	// The paused write commits nothing; the batch is one commit.
	if failed := errors.Join(errs...) != nil; !failed && (after.Commits-before.Commits != 1 || after.Writes-before.Writes != uint64(len(writes))) {
		t.Fatalf("writes did not share a commit: %d commits of %d writes", after.Commits-before.Commits, after.Writes-before.Writes)
	}
	return errs
}

// queueTogether is batch without its check that the writes made exactly
// one commit: for batches holding refused writes or no-ops. A write that
// returns without queueing (one its caller's goroutine refuses) is
// answered at once.
func queueTogether(t testing.TB, s *Store, writes ...func() error) []error {
	t.Helper()
	resume := pauseCommitter(t, s)
	results := make([]chan error, len(writes))
	queued := 0
	for i, w := range writes {
		results[i] = make(chan error, 1)
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			results[i] <- w()
		}()
		// Wait until it is queued, so the next write queues behind it.
		deadline := time.Now().Add(10 * time.Second)
	wait:
		for len(s.queue) != queued+1 {
			select {
			case <-returned:
				break wait
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("write %d neither queued nor returned", i)
			}
			time.Sleep(time.Millisecond)
		}
		if len(s.queue) == queued+1 {
			queued++
		}
	}
	resume()
	errs := make([]error, len(writes))
	for i := range results {
		errs[i] = <-results[i]
	}
	return errs
}

// testSegmentSize is small enough that a test of a few hundred writes
// spans many segments: about 40 of the test entries fill one.
const testSegmentSize = 4 << 10

// exactFiles opens small segments without the zeroed room (zeroAhead),
// so each file ends at its last commit: for tests that tear or flip the
// bytes of that commit from the end of the file.
var exactFiles = Options{SegmentSize: testSegmentSize, zeroRoom: -1}

func openSmallSegments(t testing.TB) *Store {
	t.Helper()
	return openTestStoreWith(t, filepath.Join(t.TempDir(), "wal"), Options{SegmentSize: testSegmentSize})
}

// appendUntilSegments stores single entries in ss, after its last, until
// the store has n segments, and returns the last index stored: the only
// entry of the newest segment.
func appendUntilSegments(t testing.TB, s *Store, ss *ShardStore, n int) uint64 {
	t.Helper()
	_, last := ss.x.bounds()
	for s.Stats().Segments < n {
		last++
		storeLogs(t, ss, entries(last, last))
		if last > 100000 {
			t.Fatalf("%d segments after %d entries", s.Stats().Segments, last)
		}
	}
	return last
}

// appendAndCompact is a busy shard's steady state: it stores 5 entries
// after its last and deletes all but the last 20, rounds times, settling
// after each round; after every round it calls check, if not nil.
func appendAndCompact(t testing.TB, s *Store, ss *ShardStore, rounds int, check func(round int)) {
	t.Helper()
	const per, keep = 5, 20
	for round := range rounds {
		_, last := ss.x.bounds()
		storeLogs(t, ss, entries(last+1, last+per))
		if last+per > keep {
			if err := ss.DeleteRange(0, last+per-keep); err != nil {
				t.Fatal(err)
			}
		}
		if check != nil {
			settle(t, s)
			check(round)
		}
	}
}

// segmentSeq is the sequence number in a segment file's name.
func segmentSeq(t testing.TB, path string) uint64 {
	t.Helper()
	seq, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".wal"), 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// wantFewSegments fails unless the store has at most max segments and
// the files on disk are those segments, no more.
func wantFewSegments(t testing.TB, s *Store, max int, when string) {
	t.Helper()
	n, files := s.Stats().Segments, segmentFiles(t, s.Path())
	if n != len(files) {
		t.Fatalf("%s: Stats().Segments is %d but %d segment files are on disk", when, n, len(files))
	}
	if n > max {
		t.Fatalf("%s: %d segments (%d bytes), want at most %d", when, n, segmentBytes(t, s.Path()), max)
	}
	if b := segmentBytes(t, s.Path()); b > int64(max)*testSegmentSize {
		t.Fatalf("%s: %d bytes of segments in %d segments of at most %d", when, b, n, testSegmentSize)
	}
}

// snapshotFiles returns the content of every segment file in dir.
func snapshotFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range segmentFiles(t, dir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(p)] = string(b)
	}
	return m
}

// checkFixture fails unless s holds what testdata/v1.db holds (see
// TestImportsFilesWrittenByClusterNodeStore), shard 0's log running to
// last0.
func checkFixture(t *testing.T, s *Store, last0 uint64) {
	t.Helper()
	check := func(ss *ShardStore, first, last uint64) {
		t.Helper()
		wantBounds(t, ss, first, last)
		for i := first; i <= last && last > 0; i++ {
			want := fixtureLog(ss.ID(), i)
			var got raft.Log
			if err := ss.GetLog(i, &got); err != nil {
				t.Fatal(err)
			}
			if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
				string(got.Data) != string(want.Data) || string(got.Extensions) != string(want.Extensions) ||
				!got.AppendedAt.Equal(want.AppendedAt) {
				t.Fatalf("shard %d index %d:\n got %+v\nwant %+v", ss.ID(), i, got, *want)
			}
		}
	}
	stable := func(ss *ShardStore, key string, want uint64) {
		t.Helper()
		if v, err := ss.GetUint64([]byte(key)); err != nil || v != want {
			t.Fatalf("shard %d %s = %d %v, want %d", ss.ID(), key, v, err, want)
		}
	}
	s0, meta, s7 := shard(t, s, 0), shard(t, s, -1), shard(t, s, 7)
	check(s0, 6, last0)
	wantMissing(t, s0, 5)
	stable(s0, "CurrentTerm", 3)
	stable(s0, "LastVoteTerm", 3)
	if v, err := s0.Get([]byte("LastVoteCand")); err != nil || string(v) != "2" {
		t.Fatalf("vote candidate %q %v", v, err)
	}
	check(meta, 1, 3)
	stable(meta, "CurrentTerm", 1)
	check(s7, 0, 0)
	if _, err := s7.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("shard 7 term: %v", err)
	}
}
