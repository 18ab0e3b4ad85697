package cluster

import (
	"bytes"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openTestStore(t *testing.T, path string) *NodeStore {
	t.Helper()
	s, err := OpenNodeStore(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNodeStoreLogsAndStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openTestStore(t, path)
	a, err := s.Shard(0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Shard(1)
	if first, _ := a.FirstIndex(); first != 0 {
		t.Fatalf("empty store first index %d", first)
	}
	at := time.Unix(1700000000, 123)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte{byte(i)}, AppendedAt: at})
	}
	logs[3].Extensions = []byte("ext")
	if err := a.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLog(&raft.Log{Index: 5, Term: 1, Type: raft.LogNoop}); err != nil {
		t.Fatal(err)
	}
	var got raft.Log
	if err := a.GetLog(4, &got); err != nil || got.Index != 4 || got.Term != 2 || got.Data[0] != 4 || string(got.Extensions) != "ext" || !got.AppendedAt.Equal(at) {
		t.Fatalf("GetLog: %+v %v", got, err)
	}
	if err := a.GetLog(11, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("missing log: %v", err)
	}
	if err := a.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	if first, _ := a.FirstIndex(); first != 4 {
		t.Fatalf("first after delete %d", first)
	}
	if last, _ := a.LastIndex(); last != 10 {
		t.Fatalf("last %d", last)
	}
	if first, _ := b.FirstIndex(); first != 5 {
		t.Fatalf("shards share nothing: other shard's first index %d", first)
	}
	if _, err := a.Get([]byte("k")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing stable key: %v (raft expects \"not found\")", err)
	}
	if err := a.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := a.Set([]byte("LastVoteCand"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Everything is on disk after a reopen.
	s = openTestStore(t, path)
	defer s.Close()
	a, _ = s.Shard(0)
	if v, err := a.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("term after reopen: %d %v", v, err)
	}
	if v, _ := a.Get([]byte("LastVoteCand")); !bytes.Equal(v, []byte("2")) {
		t.Fatalf("vote after reopen: %q", v)
	}
	if err := a.GetLog(10, &got); err != nil || got.Data[0] != 10 {
		t.Fatalf("log after reopen: %+v %v", got, err)
	}
}

// TestNodeStoreGroupCommit appends from many shards at once: every append
// is durable and readable, and a closed store refuses writes.
func TestNodeStoreGroupCommit(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "raft.db"))
	const shards, perShard = 16, 50
	var wg sync.WaitGroup
	for sh := range int32(shards) {
		ss, err := s.Shard(sh)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := uint64(1); i <= perShard; i++ {
				if err := ss.StoreLog(&raft.Log{Index: i, Term: 1, Data: []byte{byte(sh)}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for sh := range int32(shards) {
		ss, _ := s.Shard(sh)
		if last, _ := ss.LastIndex(); last != perShard {
			t.Fatalf("shard %d last index %d", sh, last)
		}
		var l raft.Log
		if err := ss.GetLog(perShard, &l); err != nil || l.Data[0] != byte(sh) {
			t.Fatalf("shard %d: %+v %v", sh, l, err)
		}
	}
	ss, _ := s.Shard(0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ss.StoreLog(&raft.Log{Index: 99}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("write after close: %v", err)
	}
}

func TestLogEncodingRejectsCorruption(t *testing.T) {
	good := encodeLog(&raft.Log{Index: 1, Term: 1, Data: []byte("abc")})
	var l raft.Log
	if err := decodeLog(good, &l); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{nil, good[:10], good[:len(good)-1], append([]byte{9}, good[1:]...)} {
		if err := decodeLog(bad, &l); err == nil {
			t.Fatalf("decoded corrupt entry %x", bad)
		}
	}
}
