package nodestore

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// openTestStore opens a store in a fresh temp dir, closed when the test ends.
func openTestStore(t testing.TB) *Store {
	t.Helper()
	return openTestStoreAt(t, filepath.Join(t.TempDir(), "raft.db"))
}

func openTestStoreAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
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
// the index), big enough that a few dozen fill a bolt page.
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
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type || string(got.Data) != string(want.Data) {
		t.Fatalf("shard %d GetLog(%d) = %d/%d %q, want %d/%d %q", ss.ID(), want.Index, got.Index, got.Term, got.Data, want.Index, want.Term, want.Data)
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

// pauseCommitter parks the committer inside a transaction of its own until
// resume is called, so that writes issued meanwhile queue up and are
// committed together as the next batch, exactly as writes that arrive
// during a slow fsync are. It makes group commit deterministic in tests.
func pauseCommitter(t testing.TB, s *Store) (resume func()) {
	t.Helper()
	parked, release := make(chan struct{}), make(chan struct{})
	w := &write{
		apply: func(*bbolt.Tx) error {
			close(parked)
			<-release
			return nil
		},
		done: make(chan error, 1),
	}
	s.queue <- w
	<-parked // the committer has formed the batch of w alone, and waits in it
	return func() {
		t.Helper()
		close(release)
		if err := <-w.done; err != nil {
			t.Fatal(err)
		}
	}
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
// their results once it has committed them: all of them share one
// transaction (checked through Stats), which is what group commit does to
// writes that arrive together.
func batch(t testing.TB, s *Store, writes ...func() error) []error {
	t.Helper()
	resume := pauseCommitter(t, s)
	results := make([]chan error, len(writes))
	for i, w := range writes {
		results[i] = make(chan error, 1)
		go func() { results[i] <- w() }()
		waitQueued(t, s, i+1) // the next write queues behind this one
	}
	before := s.Stats()
	resume()
	errs := make([]error, len(writes))
	for i := range results {
		errs[i] = <-results[i]
	}
	after := s.Stats()
	// One commit for the paused write, one for the batch (more if the batch
	// failed and its writes were committed alone).
	if failed := errors.Join(errs...) != nil; !failed && (after.Commits-before.Commits != 2 || after.Writes-before.Writes != uint64(len(writes))+1) {
		t.Fatalf("writes did not share a transaction: %d commits of %d writes", after.Commits-before.Commits-1, after.Writes-before.Writes-1)
	}
	return errs
}
