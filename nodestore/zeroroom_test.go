package nodestore

import (
	"os"
	"path/filepath"
	"testing"
)

// The zeroed room (zeroAhead): the committer keeps the active segment
// written with zeros ahead of its last commit, so a commit's flush writes
// over blocks the file already has. Open reads those zeros as the end of
// the log, in any segment, and a torn commit over them as a torn tail.

const (
	roomSegmentSize = 64 << 10
	testZeroRoom    = 8 << 10
)

func openRoomy(t *testing.T, dir string) (*Store, *logRecorder) {
	t.Helper()
	logs, logger := recordLogs(t)
	return openTestStoreWith(t, dir, Options{SegmentSize: roomSegmentSize, zeroRoom: testZeroRoom, Logger: logger}), logs
}

// wantRoom fails unless path is exactly size bytes of commits followed by
// zeros, at most testZeroRoom of them and never past the segment size.
func wantRoom(t *testing.T, path string, size int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(data))
	if n < size || n-size > testZeroRoom || n > max(size, roomSegmentSize) {
		t.Fatalf("%s is %d bytes for %d of commits; want at most %d bytes of room, within the segment size %d", filepath.Base(path), n, size, testZeroRoom, roomSegmentSize)
	}
	if !allZero(data[size:]) {
		t.Fatalf("%s: the %d bytes past its last commit are not all zeros", filepath.Base(path), n-size)
	}
}

// TestZeroedRoomIsTheEndOfTheLog: with the room written ahead, every
// segment file ends in zeros; Open replays every entry, warns about
// nothing and cuts nothing off, and the log goes on over the room.
func TestZeroedRoomIsTheEndOfTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	s, _ := openRoomy(t, dir)
	ss, other := shard(t, s, 0), shard(t, s, 1)
	if err := other.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	// About 1,400 entries fill a segment: three segments, the room
	// extended a few dozen times in each.
	const last = 3000
	for i := uint64(1); i <= last; i++ {
		storeLogs(t, ss, entries(i, i))
	}
	settle(t, s)
	segs := segmentFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	wantRoom(t, segs[len(segs)-1], s.active.size)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, p := range segs {
		sizes[p] = fileSize(t, p)
	}

	s, logs := openRoomy(t, dir)
	ss = shard(t, s, 0)
	wantBounds(t, ss, 1, last)
	for _, i := range []uint64{1, 1400, 1401, last} {
		wantLog(t, ss, entry(i))
	}
	wantTerm(t, shard(t, s, 1), 7)
	if w := logs.warnings(); len(w) != 0 {
		t.Fatalf("Open of a log ending in zeroed room warned: %q", w)
	}
	for _, p := range segs {
		if got := fileSize(t, p); got != sizes[p] {
			t.Fatalf("%s is %d bytes after Open, was %d: Open cut its zeroed room", filepath.Base(p), got, sizes[p])
		}
	}
	// Open's checkpoint went over the room; so does the next commit.
	storeLogs(t, ss, entries(last+1, last+1))
	settle(t, s)
	wantRoom(t, segs[len(segs)-1], s.active.size)
	s = reopen(t, s)
	wantBounds(t, shard(t, s, 0), 1, last+1)
}

// TestTornCommitOverTheRoom: a crash while a commit was written over the
// room leaves part of it there, zeros after; that commit was never
// acknowledged, so Open cuts it off with the zeros (and warns), keeps
// everything before it, and the log goes on.
func TestTornCommitOverTheRoom(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	s, _ := openRoomy(t, dir)
	ss := shard(t, s, 0)
	const last = 50
	for i := uint64(1); i <= last; i++ {
		storeLogs(t, ss, entries(i, i))
	}
	settle(t, s)
	end := s.active.size
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, dir)
	tail := segs[len(segs)-1]
	// The first half of the next commit (entry last+1 as the committer
	// frames it), written where it would go.
	buf, commit := beginCommit(nil)
	buf, _ = appendLogsRecord(buf, 0, [][]byte{encodeLog(entry(last + 1))})
	endCommit(buf, commit)
	stampCommit(buf, s.active.seq)
	f, err := os.OpenFile(tail, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(buf[:len(buf)/2], end); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	s, logs := openRoomy(t, dir)
	ss = shard(t, s, 0)
	wantBounds(t, ss, 1, last)
	wantLog(t, ss, entry(last))
	if len(logs.warnings()) == 0 {
		t.Fatal("Open cut a torn commit off without a warning")
	}
	if got := fileSize(t, tail); got != end {
		t.Fatalf("the torn segment is %d bytes after Open, want %d: cut right after the last whole commit", got, end)
	}
	storeLogs(t, ss, entries(last+1, last+1))
	settle(t, s)
	wantRoom(t, tail, s.active.size)
	s = reopen(t, s)
	wantBounds(t, shard(t, s, 0), 1, last+1)
	wantLog(t, shard(t, s, 0), entry(last+1))
}
