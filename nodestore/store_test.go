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
	"go.etcd.io/bbolt"
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
	// batch checks that the writes took one transaction.
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
	errBoom := errors.New("boom")
	errs := batch(t, s,
		func() error { return a.StoreLogs(entries(1, 5)) },
		func() error { return s.do(func(*bbolt.Tx) error { return errBoom }) },
		func() error { return b.StoreLogs(entries(1, 5)) },
	)
	if errs[0] != nil || !errors.Is(errs[1], errBoom) || errs[2] != nil {
		t.Fatalf("results %v; want nil, boom, nil", errs)
	}
	wantBounds(t, a, 1, 5)
	wantBounds(t, b, 1, 5)
}

func TestWritesSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := Open(path, Options{})
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

	s = openTestStoreAt(t, path)
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

func TestSecondOpenOfTheFileIsErrLocked(t *testing.T) {
	s := openTestStore(t)
	start := time.Now()
	_, err := Open(s.Path(), Options{Timeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	// bbolt retries the lock every 50 ms until less than 50 ms are left.
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("second Open gave up after %v, before its timeout", d)
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
// the reopened file: the log is contiguous and the FSM comes back whole.
func TestRaftKeepsItsLogAcrossSnapshotsAndRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "raft.db")
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
		s, err := Open(path, Options{})
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

// TestReadsFilesWrittenByClusterNodeStore opens testdata/v1.db, written by
// cluster.NodeStore before this package existed (commit 89cf62f): shard 0
// stored fixtureLog(0, 1..20), deleted 1..5 and stored term 3, vote term 3
// and candidate "2"; MetaShard -1 stored fixtureLog(-1, 1..3) one by one
// and term 1; shard 7 only got its buckets.
func TestReadsFilesWrittenByClusterNodeStore(t *testing.T) {
	raw, err := os.ReadFile("testdata/v1.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "raft.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTestStoreAt(t, path)

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
	check(s0, 6, 20)
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

	// And it goes on being written.
	storeLogs(t, s0, []*raft.Log{fixtureLog(0, 21)})
	check(s0, 6, 21)
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
