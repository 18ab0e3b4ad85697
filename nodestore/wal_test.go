package nodestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// The write-ahead log itself: replay across segments, torn tails,
// corruption, reclaiming segments, the import of a bolt file, and a
// randomized comparison with a model of the log.

func TestReopenReplaysLogsDeletesAndStableValuesAcrossSegments(t *testing.T) {
	s := openSmallSegments(t)
	a, b, meta := shard(t, s, 0), shard(t, s, 1), shard(t, s, -1)
	for lo := uint64(1); lo <= 200; lo += 5 {
		for _, ss := range []*ShardStore{a, b, meta} {
			storeLogs(t, ss, entries(lo, lo+4))
		}
	}
	if err := a.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if err := b.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	if err := meta.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	// a compacts, b replaces a conflicting suffix, meta restores a
	// snapshot: its whole log goes and it starts again further on.
	if err := a.DeleteRange(1, 50); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteRange(150, 1<<64-1); err != nil {
		t.Fatal(err)
	}
	var replaced []*raft.Log
	for i := uint64(150); i <= 160; i++ {
		replaced = append(replaced, entryOfTerm(i, 2))
	}
	storeLogs(t, b, replaced)
	if err := meta.DeleteRange(0, 1<<64-1); err != nil {
		t.Fatal(err)
	}
	storeLogs(t, meta, entries(1000, 1010))
	if err := meta.SetUint64([]byte("CurrentTerm"), 2); err != nil { // the newer value wins
		t.Fatal(err)
	}
	settle(t, s)
	if n := s.Stats().Segments; n < 5 {
		t.Fatalf("the writes span %d segments; the test needs several", n)
	}

	check := func(s *Store) {
		t.Helper()
		a, b, meta := shard(t, s, 0), shard(t, s, 1), shard(t, s, -1)
		wantBounds(t, a, 51, 200)
		wantMissing(t, a, 50)
		for i := uint64(51); i <= 200; i++ {
			wantLog(t, a, entry(i))
		}
		wantTerm(t, a, 3)
		wantBounds(t, b, 1, 160)
		for i := uint64(1); i < 150; i++ {
			wantLog(t, b, entry(i))
		}
		for _, l := range replaced {
			wantLog(t, b, l)
		}
		if v, err := b.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-2" {
			t.Fatalf("shard 1 LastVoteCand = %q, %v", v, err)
		}
		wantBounds(t, meta, 1000, 1010)
		wantMissing(t, meta, 200)
		for i := uint64(1000); i <= 1010; i++ {
			wantLog(t, meta, entry(i))
		}
		wantTerm(t, meta, 2)
	}
	check(s)
	s = reopen(t, s)
	check(s)
	s = reopen(t, s) // replaying a replayed log changes nothing
	check(s)
}

// TestTornTailLosesOnlyTheLastWrite: a crash in the middle of a commit
// leaves the end of the last segment short or garbled. That commit was
// never acknowledged, so Open cuts it off (and warns), keeps everything
// before it, and the store takes writes again.
func TestTornTailLosesOnlyTheLastWrite(t *testing.T) {
	const last = 60 // the entries span two segments
	lastRecord := recordLen(entries(last, last))
	for _, tc := range []struct {
		name  string
		tear  func(t *testing.T, path string, size int64)
		kept  uint64 // the last entry that survives
		clean bool   // nothing to cut off
	}{
		{"cut short by a few bytes", func(t *testing.T, path string, size int64) {
			if err := os.Truncate(path, size-3); err != nil {
				t.Fatal(err)
			}
		}, last - 1, false},
		{"cut inside its header", func(t *testing.T, path string, size int64) {
			if err := os.Truncate(path, size-lastRecord+5); err != nil {
				t.Fatal(err)
			}
		}, last - 1, false},
		{"a flipped byte in its entry", func(t *testing.T, path string, size int64) {
			flipByte(t, path, -1)
		}, last - 1, false},
		{"a flipped byte in its checksum", func(t *testing.T, path string, size int64) {
			flipByte(t, path, size-lastRecord+5)
		}, last - 1, false},
		{"a flipped byte in its length", func(t *testing.T, path string, size int64) {
			flipByte(t, path, size-lastRecord+3)
		}, last - 1, false},
		// Zeros past the last commit are what zeroAhead writes: room,
		// not damage, so Open keeps them and says nothing.
		{"zeros after it", func(t *testing.T, path string, size int64) {
			if err := os.Truncate(path, size+512); err != nil {
				t.Fatal(err)
			}
		}, last, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStoreWith(t, filepath.Join(t.TempDir(), "wal"), exactFiles)
			ss, other := shard(t, s, 0), shard(t, s, 1)
			if err := other.SetUint64([]byte("CurrentTerm"), 4); err != nil {
				t.Fatal(err)
			}
			for i := uint64(1); i <= last; i++ {
				storeLogs(t, ss, entries(i, i))
			}
			settle(t, s)
			segs := segmentFiles(t, s.Path())
			if len(segs) < 2 {
				t.Fatalf("%d segments; the test needs the last write in a later one", len(segs))
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tail := segs[len(segs)-1]
			size := fileSize(t, tail)
			tc.tear(t, tail, size)

			logs, logger := recordLogs(t)
			s = openTestStoreWith(t, s.Path(), Options{SegmentSize: testSegmentSize, Logger: logger, zeroRoom: -1})
			ss, other = shard(t, s, 0), shard(t, s, 1)
			wantBounds(t, ss, 1, tc.kept)
			for i := uint64(1); i <= tc.kept; i++ {
				wantLog(t, ss, entry(i))
			}
			wantTerm(t, other, 4)
			if tc.clean {
				if w := logs.warnings(); len(w) != 0 {
					t.Fatalf("Open warned about a log with nothing to cut off: %q", w)
				}
				if got, want := fileSize(t, tail), size+512; got != want {
					t.Fatalf("the segment is %d bytes after Open, want %d: its zeros kept, the checkpoint written over them", got, want)
				}
			} else {
				if len(logs.warnings()) == 0 {
					t.Fatal("Open cut the end of the log off without a warning")
				}
				want := size
				if tc.kept < last {
					want -= lastRecord
				}
				// Open appends a checkpoint of the stable values after the cut.
				want += int64(len(s.checkpoint()))
				if got := fileSize(t, tail); got != want {
					t.Fatalf("the torn segment is %d bytes after Open, want %d: cut right after the last whole commit, then a checkpoint", got, want)
				}
			}

			// The log goes on from there, and replays cleanly.
			for i := tc.kept + 1; i <= last+1; i++ {
				storeLogs(t, ss, []*raft.Log{entryOfTerm(i, 2)})
			}
			logs, logger = recordLogs(t)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openTestStoreWith(t, s.Path(), Options{SegmentSize: testSegmentSize, Logger: logger, zeroRoom: -1})
			ss = shard(t, s, 0)
			wantBounds(t, ss, 1, last+1)
			wantLog(t, ss, entry(tc.kept))
			wantLog(t, ss, entryOfTerm(last+1, 2))
			wantTerm(t, shard(t, s, 1), 4)
			if w := logs.warnings(); len(w) != 0 {
				t.Fatalf("reopening the repaired log warned: %q", w)
			}
		})
	}
}

// TestLastSegmentWithATornMagicIsReset: a crash right after a new segment
// was created can leave it empty or with part of its 8-byte magic. Open
// starts it again; everything in the segments before it is kept, and the
// log goes on, through that segment and past it.
func TestLastSegmentWithATornMagicIsReset(t *testing.T) {
	for _, keep := range []int64{0, 3, int64(len(segmentMagic)) - 1} {
		t.Run(fmt.Sprintf("%d bytes", keep), func(t *testing.T) {
			s := openTestStoreWith(t, filepath.Join(t.TempDir(), "wal"), exactFiles)
			ss := shard(t, s, 0)
			last := appendUntilSegments(t, s, ss, 3) // entry last is alone in segment 3
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			segs := segmentFiles(t, s.Path())
			if err := os.Truncate(segs[2], keep); err != nil {
				t.Fatal(err)
			}

			s = openTestStoreWith(t, s.Path(), Options{SegmentSize: testSegmentSize})
			ss = shard(t, s, 0)
			wantBounds(t, ss, 1, last-1)
			for i := uint64(1); i < last; i++ {
				wantLog(t, ss, entry(i))
			}
			storeLogs(t, ss, entries(last, last+5))
			s = reopen(t, s)
			ss = shard(t, s, 0)
			wantBounds(t, ss, 1, last+5)
			for i := uint64(1); i <= last+5; i++ {
				wantLog(t, ss, entry(i))
			}

			// Rotated past, the reset segment is a sealed one like any.
			end := appendUntilSegments(t, s, ss, s.Stats().Segments+2)
			s = reopen(t, s)
			ss = shard(t, s, 0)
			wantBounds(t, ss, 1, end)
			for i := uint64(1); i <= end; i++ {
				wantLog(t, ss, entry(i))
			}
		})
	}
}

// TestStableValuesSurviveACrashDuringRotation: a new segment begins with
// every shard's stable values, so that older segments can go. A crash
// before that beginning was synced leaves it torn, and Open cuts it off:
// the stable values must still be on disk once the older segments are
// removed.
func TestStableValuesSurviveACrashDuringRotation(t *testing.T) {
	// The last two cases end on a boundary, so Open cuts nothing: the
	// checkpoint it writes on every Open is what keeps the values.
	for _, tc := range []struct {
		name string
		keep func(data []byte) int64 // the bytes of the new segment the crash left
	}{
		{"a torn magic", func([]byte) int64 { return 3 }},
		{"a torn first stable value", func([]byte) int64 { return int64(len(segmentMagic)) + 20 }},
		{"the magic alone", func([]byte) int64 { return int64(len(segmentMagic)) }},
		{"the magic and the checkpoint's commit header", func(data []byte) int64 {
			return int64(len(segmentMagic) + recordHeaderLen + int(binary.BigEndian.Uint32(data[len(segmentMagic):])))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStoreWith(t, filepath.Join(t.TempDir(), "wal"), exactFiles)
			ss, voter := shard(t, s, 0), shard(t, s, 1)
			if err := voter.SetUint64([]byte("CurrentTerm"), 5); err != nil {
				t.Fatal(err)
			}
			if err := voter.Set([]byte("LastVoteCand"), []byte("node-3")); err != nil {
				t.Fatal(err)
			}
			last := appendUntilSegments(t, s, ss, 2)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			segs := segmentFiles(t, s.Path())
			data, err := os.ReadFile(segs[1])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(segs[1], tc.keep(data)); err != nil { // the crash while rotating
				t.Fatal(err)
			}

			s = openTestStoreWith(t, s.Path(), Options{SegmentSize: testSegmentSize})
			wantTerm(t, shard(t, s, 1), 5)
			// Raft compacts everything in the first segment away, so it
			// is removed.
			ss = shard(t, s, 0)
			if err := ss.DeleteRange(1, last); err != nil {
				t.Fatal(err)
			}
			storeLogs(t, ss, entries(last, last))
			settle(t, s)
			if _, err := os.Stat(segs[0]); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("segment %s still there (%v); the test needs it removed", segs[0], err)
			}

			s = reopen(t, s)
			voter = shard(t, s, 1)
			wantTerm(t, voter, 5)
			if v, err := voter.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-3" {
				t.Fatalf("LastVoteCand = %q, %v; want node-3", v, err)
			}
			wantBounds(t, shard(t, s, 0), last, last)
		})
	}
}

// TestCorruptSealedSegmentIsErrCorrupt: only the end of the last segment
// can be torn by a crash; every other segment was whole and synced before
// the next began. Anything unreadable in one of them is corruption: Open
// fails with ErrCorrupt and changes nothing on disk, for an operator to
// look at.
func TestCorruptSealedSegmentIsErrCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, path string)
	}{
		{"a flipped byte in its last record", func(t *testing.T, path string) { flipByte(t, path, -1) }},
		{"a flipped byte in its middle", func(t *testing.T, path string) { flipByte(t, path, fileSize(t, path)/2) }},
		{"a flipped byte in its magic", func(t *testing.T, path string) { flipByte(t, path, 2) }},
		{"cut short", func(t *testing.T, path string) {
			if err := os.Truncate(path, fileSize(t, path)-3); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStoreWith(t, filepath.Join(t.TempDir(), "wal"), exactFiles)
			ss := shard(t, s, 0)
			last := appendUntilSegments(t, s, ss, 3)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			dir := s.Path()
			segs := segmentFiles(t, dir)
			good, err := os.ReadFile(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			tc.corrupt(t, segs[0])
			before := snapshotFiles(t, dir)

			if s, err := Open(dir, Options{SegmentSize: testSegmentSize, Logger: testLogger(t), zeroRoom: -1}); !errors.Is(err, ErrCorrupt) {
				if err == nil {
					_ = s.Close()
				}
				t.Fatalf("Open with a corrupt first segment: %v, want ErrCorrupt", err)
			}
			if after := snapshotFiles(t, dir); !maps.Equal(before, after) {
				t.Fatal("the failed Open changed the segment files")
			}

			// Repaired, it opens (the failed Open let go of the lock).
			if err := os.WriteFile(segs[0], good, 0o600); err != nil {
				t.Fatal(err)
			}
			s = openTestStoreWith(t, dir, exactFiles)
			wantBounds(t, shard(t, s, 0), 1, last)
		})
	}
}

// TestCorruptRecordBeforeLaterCommitsIsErrCorrupt: a record of the last
// segment that fails its checksum but is followed by whole records of
// later commits was not torn by a crash (a crash tears only the commit in
// flight, at the end), and the commits after it were acknowledged. Open's
// doc promises ErrCorrupt for "anything else unreadable".
func TestCorruptRecordBeforeLaterCommitsIsErrCorrupt(t *testing.T) {
	s := openSmallSegments(t)
	ss := shard(t, s, 0)
	for i := uint64(1); i <= 20; i++ { // 20 commits, all in segment 1
		storeLogs(t, ss, entries(i, i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, s.Path())
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	rec := recordLen(entries(1, 1))
	flipByte(t, segs[0], int64(len(segmentMagic))+3*rec-1) // the last byte of entry 3's record
	s2, err := Open(s.Path(), Options{SegmentSize: testSegmentSize, Logger: testLogger(t)})
	if err == nil {
		first, _ := shard(t, s2, 0).FirstIndex()
		last, _ := shard(t, s2, 0).LastIndex()
		_ = s2.Close()
		t.Fatalf("Open of a log with a bad record before 17 later commits succeeded with entries %d..%d of 1..20, want ErrCorrupt", first, last)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
}

// TestAnEntryLargerThanASegmentIsStored: a segment holds at least one
// commit, whatever its size.
func TestAnEntryLargerThanASegmentIsStored(t *testing.T) {
	s := openSmallSegments(t)
	ss := shard(t, s, 0)
	big := &raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte("big "), 3*testSegmentSize)}
	storeLogs(t, ss, entries(1, 1))
	storeLogs(t, ss, []*raft.Log{big})
	storeLogs(t, ss, entries(3, 3))
	for range 2 {
		ss = shard(t, s, 0)
		wantBounds(t, ss, 1, 3)
		wantLog(t, ss, entry(1))
		wantLog(t, ss, big)
		wantLog(t, ss, entry(3))
		s = reopen(t, s)
	}
}

// TestCompactedSegmentsAreRemoved: a shard that appends and compacts, as
// Raft does, keeps the log's disk use bounded: a segment whose entries were
// all compacted away is removed.
func TestCompactedSegmentsAreRemoved(t *testing.T) {
	s := openSmallSegments(t)
	ss := shard(t, s, 0)
	// The live entries (20 of about 100 bytes) are in the active segment
	// and at most the one before it; the rest is removed.
	appendAndCompact(t, s, ss, 1500, func(round int) {
		wantFewSegments(t, s, 3, fmt.Sprintf("round %d", round))
	})
	files := segmentFiles(t, s.Path())
	if seq := segmentSeq(t, files[len(files)-1]); seq < 100 {
		t.Fatalf("the newest segment is number %d: the log did not rotate often enough for the test", seq)
	}
	_, last := ss.x.bounds()
	s = reopen(t, s)
	ss = shard(t, s, 0)
	wantBounds(t, ss, last-19, last)
	for i := last - 19; i <= last; i++ {
		wantLog(t, ss, entry(i))
	}
}

// TestRarelyWrittenShardDoesNotPinSegments: a shard that wrote a few
// entries once, and has not compacted since, would keep the first segment
// and so every later one (segments go oldest first). Its entries are
// copied forward instead, and the disk use stays bounded.
func TestRarelyWrittenShardDoesNotPinSegments(t *testing.T) {
	t.Run("whole segment a commit", func(t *testing.T) { rarelyWrittenShard(t, defaultRelocateStep) })
	// A step of one byte moves one entry a commit: the quiet shard's
	// entries leave the oldest segment over three commits.
	t.Run("one entry a commit", func(t *testing.T) { rarelyWrittenShard(t, 1) })
}

func rarelyWrittenShard(t *testing.T, step int64) {
	s := openSmallSegments(t)
	s.relocateStep = step // before any write: only the committer reads it
	quiet, busy := shard(t, s, 7), shard(t, s, 0)
	storeLogs(t, quiet, entries(1, 3))
	if err := quiet.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	first := segmentFiles(t, s.Path())[0]
	// Segments are relocated from once they hold more than twice the
	// live entries (23 of about 100 bytes) plus two segments: three
	// segments' worth, then the active one and one more.
	appendAndCompact(t, s, busy, 1500, func(round int) {
		wantFewSegments(t, s, 5, fmt.Sprintf("round %d", round))
		if round%100 == 0 {
			for i := uint64(1); i <= 3; i++ {
				wantLog(t, quiet, entry(i))
			}
		}
	})
	if _, err := os.Stat(first); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the first segment, holding the quiet shard's entries, is still there: %v", err)
	}
	for range 2 {
		quiet = shard(t, s, 7)
		wantBounds(t, quiet, 1, 3)
		for i := uint64(1); i <= 3; i++ {
			wantLog(t, quiet, entry(i))
		}
		wantTerm(t, quiet, 2)
		s = reopen(t, s)
	}
}

// TestStableValuesSurviveRemovalOfTheSegmentThatHeldThem: Raft's term and
// vote are written rarely, and the segment holding them is removed once
// the entries in it are compacted. Every segment begins with every
// shard's stable values, so they live on, at their latest values.
func TestStableValuesSurviveRemovalOfTheSegmentThatHeldThem(t *testing.T) {
	s := openSmallSegments(t)
	voter, busy := shard(t, s, 3), shard(t, s, 0)
	if err := voter.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := voter.Set([]byte("LastVoteCand"), []byte("node-3")); err != nil {
		t.Fatal(err)
	}
	// compactUntilGone appends and compacts on busy until path is
	// removed.
	compactUntilGone := func(path string) {
		t.Helper()
		for round := 0; ; round++ {
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return
			}
			if round == 1000 {
				t.Fatalf("%s never removed", path)
			}
			appendAndCompact(t, s, busy, 1, nil)
			settle(t, s)
		}
	}
	compactUntilGone(segmentFiles(t, s.Path())[0])
	wantTerm(t, voter, 7)

	// A newer term, in a later segment, replaces the one the segments
	// begin with.
	if err := voter.SetUint64([]byte("CurrentTerm"), 8); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	files := segmentFiles(t, s.Path())
	compactUntilGone(files[len(files)-1]) // the segment the write went to

	for range 2 {
		voter = shard(t, s, 3)
		wantTerm(t, voter, 8)
		if v, err := voter.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-3" {
			t.Fatalf("LastVoteCand = %q, %v; want node-3", v, err)
		}
		s = reopen(t, s)
	}
}

// TestInterruptedImportStartsOver: while the bolt file exists the log
// holds nothing but a copy of it in progress (the file is removed once the
// copy is durable), so Open with Import wipes whatever segments a crash
// left and imports again.
func TestInterruptedImportStartsOver(t *testing.T) {
	raw, err := os.ReadFile("testdata/v1.db")
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	legacy, dir := filepath.Join(dataDir, "raft.db"), filepath.Join(dataDir, "wal")

	// What the crash left: segments holding things the bolt file does
	// not, the first of them corrupt.
	s := openTestStoreWith(t, dir, Options{SegmentSize: testSegmentSize})
	for _, id := range []int32{0, 5, -1} {
		ss := shard(t, s, id)
		storeLogs(t, ss, entries(1, 100))
		if err := ss.SetUint64([]byte("CurrentTerm"), 99); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 2 {
		t.Fatalf("%d segments; the test needs a sealed one", len(segs))
	}
	flipByte(t, segs[0], -1)
	if _, err := Open(dir, Options{SegmentSize: testSegmentSize}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of the leftover segments: %v, want ErrCorrupt", err)
	}
	if err := os.WriteFile(legacy, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	s = openTestStoreWith(t, dir, Options{SegmentSize: testSegmentSize, Import: legacy})
	checkFixture(t, s, 20)
	s5 := shard(t, s, 5)
	wantBounds(t, s5, 0, 0)
	if _, err := s5.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("shard 5, not in the bolt file, has a term: %v", err)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the bolt file after its import: %v, want it removed", err)
	}
	s = reopen(t, s)
	checkFixture(t, s, 20)
	wantBounds(t, shard(t, s, 5), 0, 0)
}

// TestImportKeepsTheLastRunOfEachShardsLog: bolt logs could have a gap
// (raft-boltdb is not monotonic: after a snapshot restore the entries
// before the snapshot stayed). Those entries are never read again; the
// import keeps each shard's last run of consecutive indexes, which the
// monotonic log requires, in several StoreLogs of at most 1024.
func TestImportKeepsTheLastRunOfEachShardsLog(t *testing.T) {
	dataDir := t.TempDir()
	legacy := filepath.Join(dataDir, "raft.db")
	long := entries(1, 2500)
	writeBoltFile(t, legacy,
		map[int32][]*raft.Log{
			3:  append(entries(1, 5), entries(10, 15)...),
			4:  long,
			-1: nil, // an empty bucket
		},
		map[int32]map[string][]byte{
			3:  {"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 4}},
			-1: {"LastVoteCand": []byte("1")},
		})
	s := openTestStoreWith(t, filepath.Join(dataDir, "wal"), Options{SegmentSize: 64 << 10, Import: legacy})
	for range 2 {
		s3, s4, meta := shard(t, s, 3), shard(t, s, 4), shard(t, s, -1)
		wantBounds(t, s3, 10, 15)
		wantMissing(t, s3, 5)
		for i := uint64(10); i <= 15; i++ {
			wantLog(t, s3, entry(i))
		}
		wantTerm(t, s3, 4)
		wantBounds(t, s4, 1, 2500)
		for _, l := range long {
			wantLog(t, s4, l)
		}
		wantBounds(t, meta, 0, 0)
		if v, err := meta.Get([]byte("LastVoteCand")); err != nil || string(v) != "1" {
			t.Fatalf("meta LastVoteCand = %q, %v", v, err)
		}
		s = reopen(t, s)
	}
}

// TestFailedImportKeepsTheBoltFile: an import that fails leaves the bolt
// file, the only whole copy of the logs, where it is, and the next Open
// tries again from scratch.
func TestFailedImportKeepsTheBoltFile(t *testing.T) {
	dataDir := t.TempDir()
	legacy, dir := filepath.Join(dataDir, "raft.db"), filepath.Join(dataDir, "wal")
	writeBoltFile(t, legacy, map[int32][]*raft.Log{0: entries(1, 10)}, map[int32]map[string][]byte{0: {"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 2}}})
	db := func(f func(*bbolt.Tx) error) {
		t.Helper()
		if err := updateBolt(legacy, f); err != nil {
			t.Fatal(err)
		}
	}
	db(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("junk")); return err })
	for range 2 {
		if _, err := Open(dir, Options{Import: legacy, Logger: testLogger(t)}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open importing a bolt file with a bucket it does not know: %v, want ErrCorrupt", err)
		}
		if _, err := os.Stat(legacy); err != nil {
			t.Fatalf("the bolt file after a failed import: %v", err)
		}
	}
	db(func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("junk")) })
	s := openTestStoreWith(t, dir, Options{Import: legacy})
	for range 2 {
		ss := shard(t, s, 0)
		wantBounds(t, ss, 1, 10)
		wantLog(t, ss, entry(10))
		wantTerm(t, ss, 2)
		s = reopen(t, s)
	}
}

// TestFailedWriteFailsEveryLaterWrite: after a write to or fsync of the
// log fails, what is on disk is unknown, so the store refuses every later
// write with ErrFailed, even once the disk works again, rather than
// acknowledge writes after a hole. Opened again, it replays what is on
// disk and takes writes.
func TestFailedWriteFailsEveryLaterWrite(t *testing.T) {
	s := openTestStore(t)
	ss, other := shard(t, s, 0), shard(t, s, 1)
	storeLogs(t, ss, entries(1, 3))
	heal := failNextAppend(t, s)
	if err := ss.StoreLogs(entries(4, 4)); !errors.Is(err, ErrFailed) {
		t.Fatalf("the write that failed: %v, want ErrFailed", err)
	}
	heal()
	for name, err := range map[string]error{
		"StoreLogs":            ss.StoreLogs(entries(4, 4)),
		"another shard's logs": other.StoreLogs(entries(1, 1)),
		"DeleteRange":          ss.DeleteRange(1, 1),
		"SetUint64":            ss.SetUint64([]byte("CurrentTerm"), 2),
	} {
		if !errors.Is(err, ErrFailed) {
			t.Errorf("%s after a failed write: %v, want ErrFailed", name, err)
		}
	}
	wantBounds(t, ss, 1, 3) // nothing of the failed writes is visible
	wantBounds(t, other, 0, 0)
	if _, err := ss.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("term after its write failed: %v", err)
	}

	s = reopen(t, s)
	ss = shard(t, s, 0)
	wantBounds(t, ss, 1, 3)
	wantBounds(t, shard(t, s, 1), 0, 0)
	storeLogs(t, ss, entries(4, 4))
	wantLog(t, ss, entry(4))
}

// TestNoOpDeleteSharesTheFateOfTheWritesBeforeIt: a DeleteRange that
// finds nothing to delete only because a write before it in the same
// batch deleted it must not return nil before that write is durable: if
// the batch then fails, the entries are still there.
func TestNoOpDeleteSharesTheFateOfTheWritesBeforeIt(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	storeLogs(t, ss, entries(1, 10))
	failNextAppend(t, s)
	errs := queueTogether(t, s,
		func() error { return ss.DeleteRange(1, 10) },
		func() error { return ss.DeleteRange(1, 10) }, // nothing left to delete once the first is applied
	)
	if !errors.Is(errs[0], ErrFailed) {
		t.Fatalf("the delete whose append failed: %v, want ErrFailed", errs[0])
	}
	if errs[1] == nil {
		_ = s.Close()
		s = openTestStoreAt(t, s.Path())
		first, _ := shard(t, s, 0).FirstIndex()
		last, _ := shard(t, s, 0).LastIndex()
		t.Fatalf("DeleteRange(1, 10) returned nil, yet after reopening the log holds %d..%d", first, last)
	}
}

// FuzzOps runs a random sequence of the writes Raft makes (appends,
// compactions, truncations of a suffix, stable values) and of writes it
// never makes (gaps, overlaps, deletes inside the log, which must be
// refused) on three shards of a store with small segments, some of them
// queued together into one commit, and reopens the store at random
// points. After every write the shard's bounds, and after every reopen
// everything, must match a model of the logs. The seeds below run with go
// test; go test -fuzz FuzzOps looks for more.
func FuzzOps(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed, uint16(300))
	}
	f.Fuzz(func(t *testing.T, seed uint64, ops uint16) {
		runModelOps(t, seed, int(min(ops, 1000)))
	})
}

// shardModel is what a shard must hold.
type shardModel struct {
	logs        map[uint64]*raft.Log
	first, last uint64 // 0, 0 when empty
	stable      map[string][]byte
}

// modelOp is one generated write, with what it must return; generating
// it applies it to the model.
type modelOp struct {
	desc    string
	id      int32
	do      func(ss *ShardStore) error
	wantErr error
}

func runModelOps(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	segSize := []int64{1 << 10, 2 << 10, 4 << 10}[seed%3]
	opts := Options{SegmentSize: segSize}
	s := openTestStoreWith(t, filepath.Join(t.TempDir(), "wal"), opts)
	ids := []int32{0, 1, -1}
	models := map[int32]*shardModel{}
	for _, id := range ids {
		models[id] = &shardModel{logs: map[uint64]*raft.Log{}, stable: map[string][]byte{}}
	}
	keys := []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"}
	term := uint64(1)
	newLog := func(id int32, i uint64) *raft.Log {
		data := fmt.Appendf(nil, "shard %d index %d term %d ", id, i, term)
		for range rng.IntN(400) {
			data = append(data, byte('a'+rng.IntN(26)))
		}
		l := &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: data}
		if rng.IntN(4) == 0 {
			l.Extensions = []byte("ext")
		}
		return l
	}

	// gen makes a random write on a random shard and applies it to the
	// model.
	gen := func() modelOp {
		id := ids[rng.IntN(len(ids))]
		m := models[id]
		empty := m.last == 0
		del := func(desc string, lo, hi uint64) modelOp {
			op := modelOp{desc: fmt.Sprintf("%s DeleteRange(%d, %d) of %d..%d", desc, lo, hi, m.first, m.last), id: id,
				do: func(ss *ShardStore) error { return ss.DeleteRange(lo, hi) }}
			if !empty && lo <= m.last && hi >= m.first && lo <= hi {
				from, to := max(lo, m.first), min(hi, m.last)
				for i := from; i <= to; i++ {
					delete(m.logs, i)
				}
				switch {
				case from == m.first && to == m.last:
					m.first, m.last = 0, 0
				case from == m.first:
					m.first = to + 1
				default:
					m.last = from - 1
				}
			}
			return op
		}
		switch r := rng.IntN(100); {
		case r < 40: // append
			from := m.last + 1
			if empty {
				from = 1 + uint64(rng.IntN(3))*uint64(rng.IntN(500))
			}
			if rng.IntN(10) == 0 {
				term++
			}
			var logs []*raft.Log
			for i := range uint64(1 + rng.IntN(8)) {
				l := newLog(id, from+i)
				logs = append(logs, l)
				m.logs[l.Index] = l
			}
			if empty {
				m.first = from
			}
			m.last = logs[len(logs)-1].Index
			return modelOp{desc: fmt.Sprintf("StoreLogs(%d..%d)", from, m.last), id: id,
				do: func(ss *ShardStore) error { return ss.StoreLogs(logs) }}
		case r < 48: // an append raft never makes
			var bad []*raft.Log
			switch {
			case empty:
				bad = []*raft.Log{newLog(id, 0)}
			case rng.IntN(3) == 0:
				bad = []*raft.Log{newLog(id, m.last+2)}
			case rng.IntN(2) == 0:
				bad = []*raft.Log{newLog(id, m.first+uint64(rng.IntN(int(m.last-m.first+1))))}
			default:
				bad = []*raft.Log{newLog(id, m.last+1), newLog(id, m.last+3)}
			}
			return modelOp{desc: fmt.Sprintf("refused StoreLogs(%d, ...) after %d..%d", bad[0].Index, m.first, m.last), id: id,
				do: func(ss *ShardStore) error { return ss.StoreLogs(bad) }, wantErr: ErrNonSequential}
		case r < 62 && !empty: // compaction
			hi := m.first + uint64(rng.IntN(int(m.last-m.first+1)))
			return del("compaction", uint64(rng.IntN(int(m.first+1))), hi)
		case r < 72 && !empty: // a follower's truncation
			lo := m.first + uint64(rng.IntN(int(m.last-m.first+1)))
			hi := []uint64{m.last, m.last + 5, 1<<64 - 1}[rng.IntN(3)]
			return del("truncation", lo, hi)
		case r < 75 && !empty && m.last-m.first >= 2: // a hole raft never makes
			lo := m.first + 1 + uint64(rng.IntN(int(m.last-m.first-1)))
			hi := lo + uint64(rng.IntN(int(m.last-lo)))
			desc := fmt.Sprintf("refused DeleteRange(%d, %d) of %d..%d", lo, hi, m.first, m.last)
			return modelOp{desc: desc, id: id, do: func(ss *ShardStore) error { return ss.DeleteRange(lo, hi) }, wantErr: ErrNonSequential}
		case r < 78: // nothing to delete
			if rng.IntN(2) == 0 {
				return del("no-op", m.last+1, m.last+10)
			}
			return del("no-op", 9, 3)
		default: // a stable value
			k := keys[rng.IntN(len(keys))]
			v := make([]byte, rng.IntN(12))
			for i := range v {
				v[i] = byte(rng.IntN(256))
			}
			m.stable[k] = v
			return modelOp{desc: fmt.Sprintf("Set(%s, %x)", k, v), id: id,
				do: func(ss *ShardStore) error { return ss.Set([]byte(k), v) }}
		}
	}

	checkResult := func(step int, op modelOp, err error) {
		t.Helper()
		if op.wantErr == nil && err != nil || op.wantErr != nil && !errors.Is(err, op.wantErr) {
			t.Fatalf("seed %d step %d: shard %d %s: %v, want %v", seed, step, op.id, op.desc, err, op.wantErr)
		}
	}
	checkBounds := func(step int, id int32) {
		t.Helper()
		ss, m := shard(t, s, id), models[id]
		first, _ := ss.FirstIndex()
		last, _ := ss.LastIndex()
		if first != m.first || last != m.last {
			t.Fatalf("seed %d step %d: shard %d holds %d..%d, want %d..%d", seed, step, id, first, last, m.first, m.last)
		}
	}
	checkAll := func(step int) {
		t.Helper()
		for _, id := range ids {
			checkBounds(step, id)
			ss, m := shard(t, s, id), models[id]
			for i := m.first; i <= m.last && m.last > 0; i++ {
				wantLog(t, ss, m.logs[i])
			}
			if m.last > 0 {
				if m.first > 1 {
					wantMissing(t, ss, m.first-1)
				}
				wantMissing(t, ss, m.last+1)
			}
			for _, k := range keys {
				got, err := ss.Get([]byte(k))
				want, ok := m.stable[k]
				if !ok && !errors.Is(err, ErrKeyNotFound) || ok && (err != nil || !bytes.Equal(got, want)) {
					t.Fatalf("seed %d step %d: shard %d %s = %x, %v; want %x (set %v)", seed, step, id, k, got, err, want, ok)
				}
			}
		}
		settle(t, s)
		if n, files := s.Stats().Segments, len(segmentFiles(t, s.Path())); n != files {
			t.Fatalf("seed %d step %d: %d segments, %d segment files", seed, step, n, files)
		}
	}

	reopens, crashes := 0, 0
	for step := range ops {
		switch r := rng.IntN(100); {
		case r < 6: // restart
			s = reopen(t, s)
			reopens++
			checkAll(step)
		case r < 9: // a crash during a write that was never acknowledged
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			crash(t, rng, s.Path())
			s = openTestStoreWith(t, s.Path(), opts)
			crashes++
			checkAll(step)
		case r < 16: // writes arriving together, one commit
			batchOps := make([]modelOp, 2+rng.IntN(5))
			writes := make([]func() error, len(batchOps))
			for i := range batchOps {
				op := gen()
				batchOps[i] = op
				ss := shard(t, s, op.id)
				writes[i] = func() error { return op.do(ss) }
			}
			for i, err := range queueTogether(t, s, writes...) {
				checkResult(step, batchOps[i], err)
			}
			for _, id := range ids {
				checkBounds(step, id)
			}
		default:
			op := gen()
			checkResult(step, op, op.do(shard(t, s, op.id)))
			checkBounds(step, op.id)
		}
	}
	s = reopen(t, s)
	checkAll(ops)
	st := s.Stats()
	t.Logf("seed %d: %d ops, segment size %d, %d reopens, %d crashes, %d segments at the end", seed, ops, segSize, reopens, crashes, st.Segments)
}

// crash leaves the log in dir as a crash in the middle of a commit that
// was never acknowledged may: the end of the last segment garbled, a
// record cut short, or a new segment torn right after its creation.
// Nothing acknowledged is lost, so the model stays as it is.
func crash(t *testing.T, rng *rand.Rand, dir string) {
	t.Helper()
	segs := segmentFiles(t, dir)
	last := segs[len(segs)-1]
	appendTo := func(b []byte) {
		f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	switch rng.IntN(3) {
	case 0: // garbage after the last record
		junk := make([]byte, 1+rng.IntN(64))
		for i := range junk {
			junk[i] = byte(rng.IntN(256))
		}
		appendTo(junk)
	case 1: // a record cut short
		buf, _ := appendLogsRecord(nil, 0, [][]byte{encodeLog(entry(1 << 40))})
		appendTo(buf[:1+rng.IntN(len(buf)-1)])
	case 2: // the next segment, created, with part of its magic
		n := rng.IntN(len(segmentMagic) + 1) // 0 bytes and the whole magic too
		next := filepath.Join(dir, segmentName(uint32(segmentSeq(t, last))+1))
		if err := os.WriteFile(next, []byte(segmentMagic[:n]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStaleCommitOfAnotherSegmentIsNotCorruption: after a crash, blocks
// past the end of the last segment may hold stale bytes, on some file
// systems those of a removed segment, with whole commits in them. Each
// commit names its segment, so such a commit does not make the torn tail
// before it look like corruption: Open cuts the tail and keeps the rest.
func TestStaleCommitOfAnotherSegmentIsNotCorruption(t *testing.T) {
	s := openSmallSegments(t)
	ss := shard(t, s, 0)
	last := appendUntilSegments(t, s, ss, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, s.Path())
	old, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Segment 1's first commit, whole, after the start of a commit a crash
	// cut short.
	stale := old[len(segmentMagic) : int64(len(segmentMagic))+recordLen(entries(1, 1))]
	torn := []byte{0, 0, 0, 9, 0xde, 0xad}
	f, err := os.OpenFile(segs[1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(torn, stale...)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStoreWith(t, s.Path(), Options{SegmentSize: testSegmentSize})
	ss = shard(t, s, 0)
	wantBounds(t, ss, 1, last)
	wantLog(t, ss, entry(last))
}
