package nodestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestWritesQueuedTogetherShareOneCommit(t *testing.T) {
	s := openTestStore(t)
	const shards = 8
	var writes []func() error
	var views []*ShardStore
	for id := range int32(shards) {
		ss := shard(t, s, id)
		views = append(views, ss)
		writes = append(writes, func() error { return ss.StoreLogs(entries(1, 10)) })
	}
	writes = append(writes, func() error { return views[0].SetUint64([]byte("CurrentTerm"), 2) })
	// batch checks that the writes took one commit.
	for i, err := range batch(t, s, writes...) {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for _, ss := range views {
		wantBounds(t, ss, 1, 10)
	}
}

func TestFailedWriteDoesNotFailItsBatch(t *testing.T) {
	s := openTestStore(t)
	a, b := shard(t, s, 0), shard(t, s, 1)
	errs := batch(t, s,
		func() error { return a.StoreLogs(entries(1, 5)) },
		func() error { return a.StoreLogs(entries(7, 8)) }, // leaves a gap after 5
		func() error { return b.StoreLogs(entries(1, 5)) },
	)
	if errs[0] != nil || !errors.Is(errs[1], ErrNonSequential) || errs[2] != nil {
		t.Fatalf("results %v; want nil, ErrNonSequential, nil", errs)
	}
	wantBounds(t, a, 1, 5)
	wantBounds(t, b, 1, 5)
}

func TestWritesSurviveReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss := shard(t, s, 3)
	storeLogs(t, ss, entries(1, 100))
	if err := ss.DeleteRange(1, 40); err != nil {
		t.Fatal(err)
	}
	if err := ss.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTestStoreAt(t, dir)
	ss = shard(t, s, 3)
	wantBounds(t, ss, 41, 100)
	wantLog(t, ss, entry(41))
	wantMissing(t, ss, 40)
	if v, err := ss.GetUint64([]byte("CurrentTerm")); err != nil || v != 9 {
		t.Fatalf("term after reopen: %d %v", v, err)
	}
}

func TestClosedStoreRefusesWritesAndReads(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(1, 3))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	var l raft.Log
	_, errGet := ss.Get([]byte("k"))
	_, errFirst := ss.FirstIndex()
	_, errLast := ss.LastIndex()
	_, errShard := s.Shard(1)
	for name, err := range map[string]error{
		"StoreLogs":   ss.StoreLogs(entries(4, 4)),
		"DeleteRange": ss.DeleteRange(1, 1),
		"SetUint64":   ss.SetUint64([]byte("k"), 1),
		"GetLog":      ss.GetLog(1, &l),
		"Get":         errGet,
		"FirstIndex":  errFirst,
		"LastIndex":   errLast,
		"Shard":       errShard,
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestCloseFailsQueuedWritesAndFinishesTheCommitInProgress(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	resume := pauseCommitter(t, s) // the commit in progress
	queued := make(chan error, 1)
	go func() { queued <- ss.StoreLogs(entries(1, 1)) }()
	waitQueued(t, s, 1)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for {
		select {
		case <-s.closing:
		default:
			time.Sleep(time.Millisecond)
			continue
		}
		break
	}
	resume() // the paused commit completes successfully
	if err := <-queued; !errors.Is(err, ErrClosed) {
		t.Fatalf("write queued at Close: %v, want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestSecondOpenOfTheDirIsErrLocked: two nodes on one data dir would
// corrupt each other's log. The directory's LOCK file is flocked while a
// store is open, and a second Open retries it until its Timeout.
func TestSecondOpenOfTheDirIsErrLocked(t *testing.T) {
	s := openTestStore(t)
	const timeout = 200 * time.Millisecond
	start := time.Now()
	_, err := Open(s.Path(), Options{Timeout: timeout})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if d := time.Since(start); d < timeout {
		t.Fatalf("second Open gave up after %v, before its timeout", d)
	}
	if _, err := os.Stat(filepath.Join(s.Path(), "LOCK")); err != nil {
		t.Fatalf("LOCK file: %v", err)
	}

	// Close releases the lock: the next node start opens the dir.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(s.Path(), Options{Timeout: timeout})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentShardsAppendCompactAndRead runs what a node's Rafts do at
// once: every shard appends, compacts its oldest entries and reads, on
// separate goroutines. Every shard ends with exactly the entries it kept.
func TestConcurrentShardsAppendCompactAndRead(t *testing.T) {
	s := openTestStore(t)
	const shards, last, keep = 12, 400, 25
	var wg sync.WaitGroup
	for id := range int32(shards) {
		ss := shard(t, s, id)
		appended := make(chan uint64, last)
		wg.Go(func() { // the main goroutine: appends in batches of 8
			defer close(appended)
			for lo := uint64(1); lo <= last; lo += 8 {
				hi := min(lo+7, last)
				if err := ss.StoreLogs(entries(lo, hi)); err != nil {
					t.Error(err)
					return
				}
				appended <- hi
			}
		})
		wg.Go(func() { // the snapshot goroutine: compacts to keep entries
			for hi := range appended {
				if hi > keep {
					if err := ss.DeleteRange(1, hi-keep); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
		wg.Go(func() { // replication: reads what is there
			for range 50 {
				first, err1 := ss.FirstIndex()
				lastIdx, err2 := ss.LastIndex()
				if err := errors.Join(err1, err2); err != nil {
					t.Error(err)
					return
				}
				if lastIdx > 0 {
					var l raft.Log
					if err := ss.GetLog(lastIdx, &l); err != nil {
						t.Errorf("shard %d GetLog(last %d): %v", ss.ID(), lastIdx, err)
						return
					}
				}
				if first > lastIdx {
					t.Errorf("shard %d first %d > last %d", ss.ID(), first, lastIdx)
					return
				}
			}
		})
	}
	wg.Wait()
	for id := range int32(shards) {
		ss := shard(t, s, id)
		wantBounds(t, ss, last-keep+1, last)
		for i := uint64(1); i <= last; i++ {
			if i > last-keep {
				wantLog(t, ss, entry(i))
			} else {
				wantMissing(t, ss, i)
			}
		}
	}
	st := s.Stats()
	t.Logf("%d writes in %d commits (%.1f per commit)", st.Writes, st.Commits, float64(st.Writes)/float64(st.Commits))
}

// countFSM counts applied commands; its snapshot is the count.
type countFSM struct {
	mu sync.Mutex
	n  int
}

func (f *countFSM) Apply(*raft.Log) any { f.mu.Lock(); defer f.mu.Unlock(); f.n++; return f.n }

func (f *countFSM) count() int { f.mu.Lock(); defer f.mu.Unlock(); return f.n }

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return countSnapshot(f.n), nil
}

func (f *countFSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	var n int
	if _, err := fmt.Fscan(r, &n); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n = n
	return nil
}

type countSnapshot int

func (c countSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := fmt.Fprint(sink, int(c)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (countSnapshot) Release() {}

// TestRaftKeepsItsLogAcrossSnapshotsAndRestart runs a single-voter Raft on
// a ShardStore with frequent snapshots, so compactions run on raft's
// snapshot goroutine while its main goroutine appends, then restarts it on
// the reopened log: the log is contiguous and the FSM comes back whole.
func TestRaftKeepsItsLogAcrossSnapshotsAndRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	snaps := raft.NewInmemSnapshotStore()
	conf := raft.DefaultConfig()
	conf.LocalID = "1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotInterval = 20 * time.Millisecond
	conf.SnapshotThreshold = 64
	conf.TrailingLogs = 16
	conf.LogOutput = io.Discard

	start := func(bootstrap bool) (*Store, *raft.Raft, *countFSM) {
		t.Helper()
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ss := shard(t, s, 0)
		addr, trans := raft.NewInmemTransport("")
		if bootstrap {
			cfg := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: conf.LocalID, Address: addr}}}
			if err := raft.BootstrapCluster(conf, ss, ss, snaps, trans, cfg); err != nil {
				t.Fatal(err)
			}
		}
		fsm := &countFSM{}
		r, err := raft.NewRaft(conf, fsm, ss, ss, snaps, trans)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.LeaderCh():
		case <-time.After(10 * time.Second):
			t.Fatal("no leader")
		}
		return s, r, fsm
	}

	s, r, fsm := start(true)
	const applies = 1500
	var futures []raft.ApplyFuture
	for i := range applies {
		futures = append(futures, r.Apply([]byte{byte(i)}, 5*time.Second))
		if i%100 == 99 {
			time.Sleep(5 * time.Millisecond) // let snapshots interleave
		}
	}
	for _, f := range futures {
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	want := fsm.count()
	ss := shard(t, s, 0)
	first, _ := ss.FirstIndex()
	last, _ := ss.LastIndex()
	if first <= 1 {
		t.Fatalf("FirstIndex %d: the log was never compacted", first)
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := ss.GetLog(i, &l); err != nil {
			t.Fatalf("log [%d, %d] has a hole at %d: %v", first, last, i, err)
		}
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, r, fsm = start(false)
	defer s.Close()
	defer r.Shutdown()
	if err := r.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if got := fsm.count(); got != want {
		t.Fatalf("after restart the FSM holds %d commands, want %d", got, want)
	}
}

// fixtureLog is the entry testdata/v1.db holds at index i of a shard.
func fixtureLog(shard int32, i uint64) *raft.Log {
	l := &raft.Log{Index: i, Term: 1 + i/10, Type: raft.LogCommand, Data: []byte{byte(shard), byte(i)}}
	if i%4 == 0 {
		l.Extensions = []byte("ext")
	}
	if i%3 == 0 {
		l.AppendedAt = time.Unix(1700000000, int64(i))
	}
	if i == 1 {
		l.Type = raft.LogConfiguration
	}
	return l
}

// TestImportsFilesWrittenByClusterNodeStore imports testdata/v1.db, the
// bolt file written by cluster.NodeStore before this package existed
// (commit 89cf62f), as a node upgrading in place does: the file is
// DataDir/raft.db and the log goes to DataDir/wal. Shard 0 stored
// fixtureLog(0, 1..20), deleted 1..5 and stored term 3, vote term 3 and
// candidate "2"; MetaShard -1 stored fixtureLog(-1, 1..3) one by one and
// term 1; shard 7 only got its buckets. Once imported, the bolt file is
// gone and the log holds everything without it.
func TestImportsFilesWrittenByClusterNodeStore(t *testing.T) {
	raw, err := os.ReadFile("testdata/v1.db")
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	legacy, dir := filepath.Join(dataDir, "raft.db"), filepath.Join(dataDir, "wal")
	if err := os.WriteFile(legacy, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTestStoreWith(t, dir, Options{Import: legacy})
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the bolt file after its import: %v, want it removed", err)
	}
	checkFixture(t, s, 20)

	// It goes on being written.
	storeLogs(t, shard(t, s, 0), []*raft.Log{fixtureLog(0, 21)})
	checkFixture(t, s, 21)

	// The log holds it all: reopened without the bolt file, whether or
	// not Import still names it (the node always passes it), nothing is
	// lost and nothing imported again.
	s = reopen(t, s)
	checkFixture(t, s, 21)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStoreWith(t, dir, Options{Import: legacy})
	checkFixture(t, s, 21)
}

// TestLogEncodingVersion1IsStable pins the bytes of a stored entry: data
// dirs hold them across upgrades.
func TestLogEncodingVersion1IsStable(t *testing.T) {
	l := &raft.Log{Index: 0x0102, Term: 0x03, Type: raft.LogCommand, Data: []byte("ab"), Extensions: []byte("x"), AppendedAt: time.Unix(0, 0x0405)}
	const want = "01" + "0000000000000102" + "0000000000000003" + "00" + "0000000000000405" + "00000002" + "6162" + "00000001" + "78"
	if got := fmt.Sprintf("%x", encodeLog(l)); got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
}
