package nodestore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// The raft.StableStore contract as raft uses it: a term or vote never set
// is an error whose text is "not found".

func TestMissingStableKeyIsNotFoundAsRaftExpects(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	if v, err := ss.Get([]byte("LastVoteCand")); !errors.Is(err, ErrKeyNotFound) || err.Error() != "not found" || v != nil {
		t.Fatalf("Get of a missing key = %q, %v; want nil, \"not found\"", v, err)
	}
	if v, err := ss.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrKeyNotFound) || err.Error() != "not found" || v != 0 {
		t.Fatalf("GetUint64 of a missing key = %d, %v; want 0, \"not found\"", v, err)
	}
	// raft's own check on a fresh store.
	existing, err := raft.HasExistingState(ss, ss, raft.NewInmemSnapshotStore())
	if err != nil || existing {
		t.Fatalf("HasExistingState of a fresh shard = %v, %v", existing, err)
	}
	if err := ss.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if existing, err := raft.HasExistingState(ss, ss, raft.NewInmemSnapshotStore()); err != nil || !existing {
		t.Fatalf("HasExistingState with a term = %v, %v", existing, err)
	}
}

func TestStableValuesRoundTrip(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	key, val := []byte("LastVoteCand"), []byte("node-2")
	if err := ss.Set(key, val); err != nil {
		t.Fatal(err)
	}
	val[0] = 'X' // the store keeps its own copy
	got, err := ss.Get(key)
	if err != nil || !bytes.Equal(got, []byte("node-2")) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	got[0] = 'Y' // and hands out copies
	if again, _ := ss.Get(key); !bytes.Equal(again, []byte("node-2")) {
		t.Fatalf("Get after changing a returned value = %q", again)
	}
	for _, v := range []uint64{0, 7, 1<<64 - 1} {
		if err := ss.SetUint64([]byte("CurrentTerm"), v); err != nil {
			t.Fatal(err)
		}
		if got, err := ss.GetUint64([]byte("CurrentTerm")); err != nil || got != v {
			t.Fatalf("GetUint64 = %d, %v; want %d", got, err, v)
		}
	}
}

func TestGetUint64OfAValueThatIsNotEightBytesIsErrCorrupt(t *testing.T) {
	s := openTestStore(t)
	ss := shard(t, s, 0)
	if err := ss.Set([]byte("CurrentTerm"), []byte("7")); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetUint64 of a 1-byte value: %v, want ErrCorrupt (not a panic)", err)
	}
}
