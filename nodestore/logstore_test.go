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
	if err := ss.DeleteRange(1, 12); err != nil { // compaction
		t.Fatal(err)
	}
	if err := ss.DeleteRange(19, 30); err != nil { // a follower's truncation
		t.Fatal(err)
	}
	for _, missing := range []uint64{0, 1, 9, 10, 12, 19, 20, 21, 1 << 63} {
		var l raft.Log
		// raft compares with ==, so the error must not be wrapped.
		if err := ss.GetLog(missing, &l); err != raft.ErrLogNotFound {
			t.Fatalf("GetLog(%d) = %v, want raft.ErrLogNotFound itself", missing, err)
		}
	}
	wantLog(t, ss, entry(13))
	wantLog(t, ss, entry(18))
	wantBounds(t, ss, 13, 18)
}

func TestStoredLogComesBackFieldForField(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("conf"), AppendedAt: time.Unix(1700000000, 123)},
		{Index: 2, Term: 2, Type: raft.LogCommand, Data: []byte("cmd"), Extensions: []byte("ext")},
		{Index: 3, Term: 2, Type: raft.LogNoop},                                       // no data, zero time
		{Index: 4, Term: 1<<64 - 1, Type: raft.LogBarrier, Data: make([]byte, 70000)}, // larger than a 64 KiB read
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
	const n = 20000 // about 2 MB: one record, one write(2), one fdatasync
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

// TestStoreLogsReplacesEntriesOnlyAfterTheirSuffixIsDeleted: the store is
// monotonic, so storing over an entry is refused, and a follower replaces
// a conflicting suffix as raft does, deleting it and then appending.
func TestStoreLogsReplacesEntriesOnlyAfterTheirSuffixIsDeleted(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(1, 10))
	for _, logs := range [][]*raft.Log{
		{entryOfTerm(7, 3)},                      // over an entry
		{entryOfTerm(10, 3)},                     // over the last
		{entryOfTerm(10, 3), entryOfTerm(11, 3)}, // over the last and on
		{entryOfTerm(1, 3)},                      // over the first
	} {
		if err := ss.StoreLogs(logs); !errors.Is(err, ErrNonSequential) {
			t.Fatalf("StoreLogs(%d..%d) over 1..10: %v, want ErrNonSequential", logs[0].Index, logs[len(logs)-1].Index, err)
		}
	}
	wantBounds(t, ss, 1, 10)
	for i := uint64(1); i <= 10; i++ {
		wantLog(t, ss, entry(i)) // untouched by the refused writes
	}

	// A follower truncating a conflicting suffix, then appending the
	// leader's entries.
	if err := ss.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	storeLogs(t, ss, []*raft.Log{entryOfTerm(6, 2), entryOfTerm(7, 2)})
	wantBounds(t, ss, 1, 7)
	wantLog(t, ss, entry(5))
	wantLog(t, ss, entryOfTerm(6, 2))
	wantLog(t, ss, entryOfTerm(7, 2))
	if err := ss.DeleteRange(7, 7); err != nil {
		t.Fatal(err)
	}
	storeLogs(t, ss, []*raft.Log{entryOfTerm(7, 3)})
	wantLog(t, ss, entryOfTerm(7, 3))

	// Replay applies the deletes and the replacements in order.
	s = reopen(t, s)
	ss = shard(t, s, 0)
	wantBounds(t, ss, 1, 7)
	wantLog(t, ss, entry(5))
	wantLog(t, ss, entryOfTerm(6, 2))
	wantLog(t, ss, entryOfTerm(7, 3))
}

// TestStoreLogsRefusesAGapInTheLog: StoreLogs continues right after the
// last index, or starts anywhere on an empty log (as after a snapshot
// restore, when raft has deleted the whole log because the store is
// monotonic); anything else is ErrNonSequential and stores nothing.
func TestStoreLogsRefusesAGapInTheLog(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	if !ss.IsMonotonic() {
		t.Fatal("IsMonotonic() = false: raft would leave gaps in the log after a snapshot restore")
	}
	storeLogs(t, ss, entries(100, 105)) // an empty log starts anywhere
	for _, logs := range [][]*raft.Log{
		entries(107, 110),        // a gap after the last
		entries(99, 99),          // before the first
		{entry(106), entry(108)}, // a gap inside the batch
		{entry(106), entry(106)}, // a repeat inside the batch
	} {
		if err := ss.StoreLogs(logs); !errors.Is(err, ErrNonSequential) {
			t.Fatalf("StoreLogs(%d, ...) after 100..105: %v, want ErrNonSequential", logs[0].Index, err)
		}
	}
	wantBounds(t, ss, 100, 105) // nothing of the refused batches was kept
	wantMissing(t, ss, 106)
	storeLogs(t, ss, entries(106, 107))
	wantBounds(t, ss, 100, 107)

	// Index 0 is no index.
	empty := shard(t, s, 1)
	if err := empty.StoreLogs([]*raft.Log{entry(0)}); !errors.Is(err, ErrNonSequential) {
		t.Fatalf("StoreLogs of index 0: %v, want ErrNonSequential", err)
	}
	wantBounds(t, empty, 0, 0)

	// Emptied, the log starts anywhere again, lower or higher.
	if err := ss.DeleteRange(0, 1<<64-1); err != nil {
		t.Fatal(err)
	}
	storeLogs(t, ss, entries(50, 52))
	wantBounds(t, ss, 50, 52)
	wantMissing(t, ss, 100)
	s = reopen(t, s)
	ss = shard(t, s, 0)
	wantBounds(t, ss, 50, 52)
	wantLog(t, ss, entry(50))
	wantMissing(t, ss, 100)
}

func TestDeleteRangeBoundsAreInclusive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max uint64
		kept     []uint64 // of 1..10
	}{
		{"prefix, as compaction", 1, 7, []uint64{8, 9, 10}},
		{"suffix, as a follower's truncation", 8, 10, []uint64{1, 2, 3, 4, 5, 6, 7}},
		{"the first index", 1, 1, []uint64{2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"the last index", 10, 10, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"a prefix from below the log", 0, 3, []uint64{4, 5, 6, 7, 8, 9, 10}},
		{"wider than the log", 0, 100, nil},
		{"exactly the log", 1, 10, nil},
		{"beyond the log", 11, 20, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"below the log", 0, 0, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
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
			check := func(ss *ShardStore) {
				t.Helper()
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
			}
			check(ss)
			s = reopen(t, s) // replay clamps the deleted range the same way
			check(shard(t, s, 0))
		})
	}
}

// TestDeleteRangeInsideTheLogIsRefused: raft only deletes a prefix or a
// suffix; a range strictly inside the log would leave a hole, and is
// refused with ErrNonSequential, deleting nothing.
func TestDeleteRangeInsideTheLogIsRefused(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(1, 10))
	for _, r := range [][2]uint64{{2, 9}, {3, 5}, {4, 4}, {9, 9}, {2, 2}} {
		if err := ss.DeleteRange(r[0], r[1]); !errors.Is(err, ErrNonSequential) {
			t.Fatalf("DeleteRange(%d, %d) of 1..10: %v, want ErrNonSequential", r[0], r[1], err)
		}
	}
	check := func(ss *ShardStore) {
		t.Helper()
		wantBounds(t, ss, 1, 10)
		for i := uint64(1); i <= 10; i++ {
			wantLog(t, ss, entry(i))
		}
	}
	check(ss)
	s = reopen(t, s) // nothing of the refused deletes reached the log
	check(shard(t, s, 0))
}

// TestDeleteRangeSharingACommitWithWrites is the group-commit case a store
// of one shard never meets: DeleteRange in the same commit as earlier
// writes of its shard, which the committer has framed but not yet made
// durable or visible. It must judge and apply each write against the log
// as the writes before it in the batch leave it, not as readers see it.
// Each case is one deterministic batch, as the committer forms when the
// writes arrive during another commit. (The bolt engine's first version
// got this wrong: it deleted with Cursor.Delete in the cursor loop and
// left every other key of each modified page behind.)
func TestDeleteRangeSharingACommitWithWrites(t *testing.T) {
	const n = 1000
	type deletion struct{ min, max uint64 }
	for _, tc := range []struct {
		name    string
		appends []*raft.Log // written first in the batch
		deletes []deletion  // then these, in order
		then    []*raft.Log // then these
		kept    [2]uint64   // the log afterwards is kept[0]..kept[1]
	}{
		{
			// raft's snapshot goroutine compacting with few trailing
			// logs while the main goroutine appends.
			name:    "compaction while appending",
			appends: entries(n+1, n+16),
			deletes: []deletion{{1, n - 10}},
			kept:    [2]uint64{n - 9, n + 16},
		},
		{
			// two compactions of one shard, say the snapshot
			// goroutine's and a restore's: the second starts where the
			// first left the log.
			name:    "compaction after compaction",
			deletes: []deletion{{1, 407}, {1, 801}},
			kept:    [2]uint64{802, n},
		},
		{
			name:    "appends, then a deletion of everything",
			appends: entries(n+1, n+40),
			deletes: []deletion{{0, n + 40}},
		},
		{
			// a suffix deleted right after it was appended, and
			// replaced: the delete and the append after it follow
			// the bounds the first append left.
			name:    "appends, a truncation of them and their replacements",
			appends: entries(n+1, n+40),
			deletes: []deletion{{n + 21, 1<<64 - 1}},
			then:    []*raft.Log{entryOfTerm(n+21, 2), entryOfTerm(n+22, 2)},
			kept:    [2]uint64{1, n + 22},
		},
		{
			// the log emptied and started again higher, as after a
			// snapshot restore.
			name:    "everything deleted, then a new start",
			deletes: []deletion{{1, n}},
			then:    entries(5000, 5009),
			kept:    [2]uint64{5000, 5009},
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
			if tc.then != nil {
				writes = append(writes, func() error { return ss.StoreLogs(tc.then) })
			}
			if err := errors.Join(batch(t, s, writes...)...); err != nil {
				t.Fatal(err)
			}

			want := map[uint64]*raft.Log{}
			for i := tc.kept[0]; i <= tc.kept[1] && i > 0; i++ {
				want[i] = entry(i)
			}
			for _, l := range tc.then {
				want[l.Index] = l
			}
			check := func(ss, other *ShardStore) {
				t.Helper()
				for i := uint64(0); i <= max(n+40, tc.kept[1])+1; i++ {
					if l, ok := want[i]; ok {
						wantLog(t, ss, l)
					} else {
						wantMissing(t, ss, i)
					}
				}
				wantBounds(t, ss, tc.kept[0], tc.kept[1])
				wantBounds(t, other, 1, n+5)
			}
			check(ss, other)
			s = reopen(t, s) // the batch replays as it was applied
			check(shard(t, s, 0), shard(t, s, 1))
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
