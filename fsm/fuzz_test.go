package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// The fuzz targets read their commands as a sequence of log entries: a
// length (2 bytes, big endian), then that many bytes of entry (Encode's
// format: type byte, body version byte, body). An entry longer than what
// is left takes what is left.

// fuzzMaxEntries bounds the entries of one input.
const fuzzMaxEntries = 64

func fuzzEntries(input []byte) [][]byte {
	var out [][]byte
	for len(input) >= 2 && len(out) < fuzzMaxEntries {
		size := min(int(binary.BigEndian.Uint16(input)), len(input)-2)
		out = append(out, input[2:2+size])
		input = input[2+size:]
	}
	return out
}

// businessErrors are the answers Apply may give a command it decoded.
var businessErrors = []error{
	ErrGroupNotEmpty, ErrGroupNotFound, ErrTopicExists, ErrTopicNotFound,
	ErrClusterIDMismatch, ErrForeignCommand, ErrGroupTypeConflict, ErrInvalidConsumerGroupWrite,
	ErrStaleConsumerGroupWrite, ErrNodeNotFound, ErrLastActiveNode, ErrInvalidPlacement,
	ErrScramCredentialNotFound, ErrInvalidScramCredential, ErrInvalidACL,
}

// fuzzFSM is a raft.FSM the fuzz targets drive, with its state readable
// in a form that compares equal exactly when the states are the same.
type fuzzFSM interface {
	raft.FSM
	fuzzState() any
}

func (f *ShardFSM) fuzzState() any {
	f.mu.RLock()
	defer f.mu.RUnlock()
	groups := make(map[string]Group, f.groups.len())
	f.groups.each(func(g Group) {
		clearEmpty(reflect.ValueOf(&g).Elem())
		groups[g.ID] = g
	})
	offsets := make(map[string]map[TopicPartition]Offset, f.table.offsetGroupCount())
	f.table.eachOffsets(func(id string, m groupOffsets) {
		if err := m.check(); err != nil {
			panic(fmt.Sprintf("group %q: %v", id, err))
		}
		offsets[id] = make(map[TopicPartition]Offset, m.len())
		m.each(func(tp TopicPartition, o Offset) { offsets[id][tp] = o })
	})
	consumerGroups := make(map[string]ConsumerGroup, len(f.consumerGroups))
	for id, g := range f.consumerGroups {
		clearEmpty(reflect.ValueOf(&g).Elem())
		consumerGroups[id] = g
	}
	return struct {
		ClusterID      string
		Groups         map[string]Group
		ConsumerGroups map[string]ConsumerGroup
		Offsets        map[string]map[TopicPartition]Offset
	}{f.clusterID, groups, consumerGroups, offsets}
}

func (f *MetaFSM) fuzzState() any {
	f.mu.RLock()
	defer f.mu.RUnlock()
	topics := make(map[string]Topic, len(f.topics))
	for name, t := range f.topics {
		clearEmpty(reflect.ValueOf(&t).Elem())
		topics[name] = t
	}
	return struct {
		ClusterID string
		Topics    map[string]Topic
		ACLs      []ACL
	}{f.clusterID, topics, f.acls.snapshot()}
}

// freshFSMs returns a new empty FSM of each kind.
func freshFSMs() map[string]func() fuzzFSM {
	return map[string]func() fuzzFSM{
		"shard": func() fuzzFSM { return NewShardFSM(3, nil) },
		"meta":  func() fuzzFSM { return NewMetaFSM(nil) },
	}
}

// applied is what one Apply did: its response, or the panic it raised.
type applied struct {
	resp     any
	panicked any
}

func (a applied) String() string {
	if a.panicked != nil {
		return fmt.Sprintf("panic(%v)", a.panicked)
	}
	return fmt.Sprintf("%v", a.resp)
}

func applyEntry(f raft.FSM, index uint64, entry []byte) (a applied) {
	defer func() { a.panicked = recover() }()
	return applied{resp: f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: entry})}
}

// checkApplied checks Apply's contract for one entry: it panics exactly
// when the entry does not decode, with the decoding error, having changed
// nothing; otherwise it answers nil or a business error.
func checkApplied(t *testing.T, name string, f fuzzFSM, index uint64, entry []byte) applied {
	t.Helper()
	_, decodeErr := Decode(entry)
	var before any
	if decodeErr != nil {
		before = f.fuzzState()
	}
	a := applyEntry(f, index, entry)
	switch {
	case decodeErr != nil && a.panicked == nil:
		t.Fatalf("%s: entry %d (% x) does not decode (%v), yet Apply answered %v", name, index, entry, decodeErr, a.resp)
	case decodeErr != nil:
		if !strings.Contains(fmt.Sprint(a.panicked), decodeErr.Error()) {
			t.Fatalf("%s: entry %d (% x): Apply panicked with %v, not with the decoding error %v", name, index, entry, a.panicked, decodeErr)
		}
		if !reflect.DeepEqual(f.fuzzState(), before) {
			t.Fatalf("%s: entry %d (% x): Apply changed the state before it panicked", name, index, entry)
		}
	case a.panicked != nil:
		t.Fatalf("%s: entry %d (% x) decodes, yet Apply panicked: %v", name, index, entry, a.panicked)
	case a.resp != nil:
		err, ok := a.resp.(error)
		if !ok || !isBusinessError(err) {
			t.Fatalf("%s: entry %d (% x): Apply answered %T %v, neither nil nor a business error", name, index, entry, a.resp, a.resp)
		}
	}
	return a
}

func isBusinessError(err error) bool {
	for _, b := range businessErrors {
		if errors.Is(err, b) {
			return true
		}
	}
	return false
}

// persist returns the snapshot f writes.
func persist(t *testing.T, f raft.FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*MetaFSM); !ok {
		return sink.Bytes()
	}
	// The state alone: a metadata snapshot also carries the index of the
	// last command applied, which every command moves, refused ones too.
	var doc metaSnapshot
	if err := readSnapshot(&sink, &doc); err != nil {
		t.Fatal(err)
	}
	doc.AppliedIndex = 0
	var state memSink
	if err := writeSnapshot(&state, &doc); err != nil {
		t.Fatal(err)
	}
	return state.Bytes()
}

// FuzzApply applies fuzzed log entries to two fresh shard FSMs and two
// fresh metadata FSMs. Properties (the Apply contract): Apply panics only
// on an entry that does not decode, and then with the decoding error and
// having changed nothing; a decoded command, whatever its values, is
// answered nil or with a business error; and Apply is deterministic: both
// FSMs of a kind answer every entry alike and end with the same snapshot.
func FuzzApply(f *testing.F) {
	f.Fuzz(func(t *testing.T, input []byte) {
		entries := fuzzEntries(input)
		for name, fresh := range freshFSMs() {
			a, b := fresh(), fresh()
			for i, entry := range entries {
				index := uint64(i + 1)
				ra := checkApplied(t, name, a, index, entry)
				rb := checkApplied(t, name, b, index, entry)
				if ra.String() != rb.String() {
					t.Fatalf("%s: entry %d (% x) answered %v, then %v", name, index, entry, ra, rb)
				}
			}
			if sa, sb := persist(t, a), persist(t, b); !bytes.Equal(sa, sb) {
				t.Fatalf("%s: one sequence gave two snapshots:\n% x\n% x", name, sa, sb)
			}
		}
	})
}

// FuzzSnapshotRestore restores fuzzed bytes, and snapshots of states built
// from fuzzed commands (a byte, then entries in FuzzApply's format: the
// byte, modulo the number of entries plus one, is how many are applied
// before the snapshot). Properties: Restore
// answers bytes that are not a snapshot with ErrMalformedSnapshot, never a
// panic, and leaves the state it had; a state Restore accepted writes a
// snapshot that restores to the same state; and a state restored from a
// snapshot is the state it was taken of and answers every later entry as
// the original does.
func FuzzSnapshotRestore(f *testing.F) {
	f.Fuzz(checkSnapshotRestore)
}

// checkSnapshotRestore is FuzzSnapshotRestore's property check of one input.
func checkSnapshotRestore(t *testing.T, snapshot, commands []byte) {
	var split int
	var entries [][]byte
	if len(commands) > 0 {
		entries = fuzzEntries(commands[1:])
		split = int(commands[0]) % (len(entries) + 1)
	}
	for name, fresh := range freshFSMs() {
		// Fuzzed bytes, over a state built from the commands.
		fz := fresh()
		applyAll(fz, entries)
		before := fz.fuzzState()
		if err := fz.Restore(io.NopCloser(bytes.NewReader(snapshot))); err != nil {
			if !errors.Is(err, ErrMalformedSnapshot) {
				t.Fatalf("%s: Restore failed with %v, not ErrMalformedSnapshot", name, err)
			}
			if !reflect.DeepEqual(fz.fuzzState(), before) {
				t.Fatalf("%s: a failed Restore changed the state", name)
			}
		} else {
			restoresToItself(t, name, fz, fresh())
		}

		// A snapshot of a state built from commands.
		a := fresh()
		applyAll(a, entries[:split])
		b := restoresToItself(t, name, a, fresh())
		for i, entry := range entries[split:] {
			index := uint64(split + i + 1)
			ra, rb := applyEntry(a, index, entry), applyEntry(b, index, entry)
			if ra.String() != rb.String() {
				t.Fatalf("%s: after the snapshot, entry %d (% x) answered %v by the original, %v by the restored FSM", name, index, entry, ra, rb)
			}
		}
		if !reflect.DeepEqual(a.fuzzState(), b.fuzzState()) {
			t.Fatalf("%s: the original and the restored FSM diverged:\n%+v\n%+v", name, a.fuzzState(), b.fuzzState())
		}
	}
}

// applyAll applies entries to f, going on past the ones Apply panics on.
func applyAll(f raft.FSM, entries [][]byte) {
	for i, entry := range entries {
		applyEntry(f, uint64(i+1), entry)
	}
}

// restoresToItself restores into the snapshot from writes, and checks that
// into holds from's state and writes the same snapshot. It returns into.
func restoresToItself(t *testing.T, name string, from, into fuzzFSM) fuzzFSM {
	t.Helper()
	snap := persist(t, from)
	if err := into.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatalf("%s: a snapshot does not restore: %v\n% x", name, err, snap)
	}
	if !reflect.DeepEqual(into.fuzzState(), from.fuzzState()) {
		t.Fatalf("%s: a snapshot restored to another state:\n%+v\n%+v", name, from.fuzzState(), into.fuzzState())
	}
	if again := persist(t, into); !bytes.Equal(again, snap) {
		t.Fatalf("%s: a restored state writes another snapshot:\n% x\n% x", name, snap, again)
	}
	return into
}
