package nodestore

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The raft.LogStore contract, as raft relies on it and raft-boltdb's tests
// check it.

func TestEmptyLogHasFirstAndLastIndexZero(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	wantBounds(t, ss, 0, 0)
	wantMissing(t, ss, 0)
	wantMissing(t, ss, 1)

	storeLogs(t, ss, entries(1, 3))
	wantBounds(t, ss, 1, 3)
	if err := ss.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, ss, 0, 0) // emptied again: raft reads 0 as "no entries"
}

func TestGetLogOfAMissingIndexIsErrLogNotFound(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(10, 20))
	storeLogs(t, ss, entries(30, 30)) // a gap, as after a snapshot restore
	if err := ss.DeleteRange(15, 15); err != nil {
		t.Fatal(err)
	}
	for _, missing := range []uint64{0, 1, 9, 15, 21, 29, 31, 1 << 63} {
		var l raft.Log
		// raft compares with ==, so the error must not be wrapped.
		if err := ss.GetLog(missing, &l); err != raft.ErrLogNotFound {
			t.Fatalf("GetLog(%d) = %v, want raft.ErrLogNotFound itself", missing, err)
		}
	}
	wantLog(t, ss, entry(14))
	wantBounds(t, ss, 10, 30)
}

func TestStoredLogComesBackFieldForField(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("conf"), AppendedAt: time.Unix(1700000000, 123)},
		{Index: 2, Term: 2, Type: raft.LogCommand, Data: []byte("cmd"), Extensions: []byte("ext")},
		{Index: 3, Term: 2, Type: raft.LogNoop},                                       // no data, zero time
		{Index: 4, Term: 1<<64 - 1, Type: raft.LogBarrier, Data: make([]byte, 70000)}, // larger than a page
	}
	storeLogs(t, ss, logs)
	for _, want := range logs {
		var got raft.Log
		if err := ss.GetLog(want.Index, &got); err != nil {
			t.Fatal(err)
		}
		if !got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("index %d AppendedAt %v, want %v", want.Index, got.AppendedAt, want.AppendedAt)
		}
		got.AppendedAt = want.AppendedAt // monotonic clock readings differ
		if !reflect.DeepEqual(&got, want) {
			t.Fatalf("index %d:\n got %+v\nwant %+v", want.Index, got, *want)
		}
	}
}

func TestStoreLogsOfManyEntriesIsOneWrite(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	const n = 20000 // about 600 bolt pages
	before := s.Stats()
	storeLogs(t, ss, entries(1, n))
	if d := s.Stats().Commits - before.Commits; d != 1 {
		t.Fatalf("StoreLogs of %d entries took %d commits, want 1", n, d)
	}
	wantBounds(t, ss, 1, n)
	for i := uint64(1); i <= n; i++ {
		wantLog(t, ss, entry(i))
	}
}

func TestStoreLogsReplacesAnEntryAtTheSameIndex(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(1, 10))
	// A follower truncating a conflicting suffix, then appending the
	// leader's entries.
	if err := ss.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	storeLogs(t, ss, []*raft.Log{entryOfTerm(6, 2), entryOfTerm(7, 2)})
	wantBounds(t, ss, 1, 7)
	wantLog(t, ss, entryOfTerm(7, 2))
	storeLogs(t, ss, []*raft.Log{entryOfTerm(7, 3)})
	wantLog(t, ss, entryOfTerm(7, 3))
}

func TestDeleteRangeBoundsAreInclusive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max uint64
		kept     []uint64 // of 1..10
	}{
		{"middle", 3, 5, []uint64{1, 2, 6, 7, 8, 9, 10}},
		{"one index", 4, 4, []uint64{1, 2, 3, 5, 6, 7, 8, 9, 10}},
		{"prefix, as compaction", 1, 7, []uint64{8, 9, 10}},
		{"suffix, as a follower's truncation", 8, 10, []uint64{1, 2, 3, 4, 5, 6, 7}},
		{"wider than the log", 0, 100, nil},
		{"beyond the log", 11, 20, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"min above max", 5, 4, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"up to the largest index", 10, 1<<64 - 1, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t)
			ss := shard(t, s, 0)
			storeLogs(t, ss, entries(1, 10))
			if err := ss.DeleteRange(tc.min, tc.max); err != nil {
				t.Fatal(err)
			}
			kept := map[uint64]bool{}
			for _, i := range tc.kept {
				kept[i] = true
			}
			for i := uint64(1); i <= 10; i++ {
				if kept[i] {
					wantLog(t, ss, entry(i))
				} else {
					wantMissing(t, ss, i)
				}
			}
			if len(tc.kept) == 0 {
				wantBounds(t, ss, 0, 0)
			} else {
				wantBounds(t, ss, tc.kept[0], tc.kept[len(tc.kept)-1])
			}
		})
	}
}

func TestDeleteRangeOfAGappedLog(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(1, 5))
	storeLogs(t, ss, entries(100, 105))
	if err := ss.DeleteRange(3, 101); err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{3, 4, 5, 100, 101} {
		wantMissing(t, ss, i)
	}
	for _, i := range []uint64{1, 2, 102, 103, 104, 105} {
		wantLog(t, ss, entry(i))
	}
}

// TestDeleteRangeSharingATransactionWithWrites is the group-commit case
// raft-boltdb never meets: DeleteRange in the same transaction as earlier
// writes of its shard that modified the pages it walks. Each case is one
// deterministic batch, as the committer forms when the writes arrive
// during another commit. The old cluster.NodeStore deleted with
// Cursor.Delete in the cursor loop and left every other key of each
// modified page behind.
func TestDeleteRangeSharingATransactionWithWrites(t *testing.T) {
	const n = 1000 // about 30 pages of entries
	type deletion struct{ min, max uint64 }
	for _, tc := range []struct {
		name    string
		appends []*raft.Log // written first in the batch
		deletes []deletion  // then these, in order
		kept    [2]uint64   // the log afterwards is kept[0]..kept[1]
	}{
		{
			// raft's snapshot goroutine compacting with few trailing
			// logs while the main goroutine appends: the range ends in
			// the page the appends modified.
			name:    "compaction reaching the page appended to",
			appends: entries(n+1, n+16),
			deletes: []deletion{{1, n - 10}},
			kept:    [2]uint64{n - 9, n + 16},
		},
		{
			// two compactions of one shard, say the snapshot
			// goroutine's and a restore's: the second walks the pages
			// the first modified.
			name:    "compaction after compaction",
			deletes: []deletion{{1, 407}, {1, 801}},
			kept:    [2]uint64{802, n},
		},
		{
			name:    "appends, then a deletion of everything",
			appends: entries(n+1, n+40),
			deletes: []deletion{{0, n + 40}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t)
			ss := shard(t, s, 0)
			other := shard(t, s, 1) // another shard writing in the same batch
			storeLogs(t, ss, entries(1, n))
			storeLogs(t, other, entries(1, n))

			var writes []func() error
			if tc.appends != nil {
				writes = append(writes, func() error { return ss.StoreLogs(tc.appends) })
			}
			writes = append(writes, func() error { return other.StoreLogs(entries(n+1, n+5)) })
			for _, d := range tc.deletes {
				writes = append(writes, func() error { return ss.DeleteRange(d.min, d.max) })
			}
			if err := errors.Join(batch(t, s, writes...)...); err != nil {
				t.Fatal(err)
			}

			last := uint64(n)
			if tc.appends != nil {
				last = tc.appends[len(tc.appends)-1].Index
			}
			for i := uint64(1); i <= last; i++ {
				if tc.kept != [2]uint64{} && tc.kept[0] <= i && i <= tc.kept[1] {
					wantLog(t, ss, entry(i))
				} else {
					wantMissing(t, ss, i)
				}
			}
			wantBounds(t, ss, tc.kept[0], tc.kept[1])
			wantBounds(t, other, 1, n+5)
		})
	}
}

func TestShardsShareNothing(t *testing.T) {
	s := openTestStore(t)
	a, b, meta := shard(t, s, 0), shard(t, s, 1), shard(t, s, -1)
	storeLogs(t, a, entries(1, 10))
	storeLogs(t, b, []*raft.Log{entryOfTerm(5, 7)})
	wantBounds(t, a, 1, 10)
	wantBounds(t, b, 5, 5)
	wantBounds(t, meta, 0, 0)
	if err := a.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, entryOfTerm(5, 7))
	if err := a.SetUint64([]byte("CurrentTerm"), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("other shard's term: %v, want ErrKeyNotFound", err)
	}
	// A second view of a shard sees the same data.
	a2 := shard(t, s, 0)
	if v, err := a2.GetUint64([]byte("CurrentTerm")); err != nil || v != 4 {
		t.Fatalf("second view: %d %v", v, err)
	}
}

func TestCorruptEntryIsErrCorrupt(t *testing.T) {
	good := encodeLog(&raft.Log{Index: 1, Term: 1, Data: []byte("abc"), Extensions: []byte("x")})
	var l raft.Log
	if err := decodeLog(good, &l); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{
		nil,
		good[:10],
		good[:len(good)-1],
		append(append([]byte(nil), good...), 0),
		append([]byte{2}, good[1:]...), // an encoding version from the future
	} {
		if err := decodeLog(bad, &l); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeLog(%x) = %v, want ErrCorrupt", bad, err)
		}
	}
}
