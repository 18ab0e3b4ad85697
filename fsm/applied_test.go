package fsm

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// releaseOneMetaCommands are the metadata commands behind
// testdata/6c692b4/meta-snapshot.bin, applied at indexes 1, 2, ...
func releaseOneMetaCommands() []Command {
	return []Command{
		&ClusterStamp{ID: "c-6c692b4"},
		&TopicCreate{Topic: fixtureTopic()},
		&TopicCreate{Topic: Topic{Name: "plain", Partitions: 3, ReplicationFactor: 1}},
		&ScramCredentialSet{Credential: ScramCredential{User: "alice", Mechanism: 1, Salt: []byte("salt-1"),
			StoredKey: []byte("stored-key-32-bytes-long-xxxxxxx"), ServerKey: []byte("server-key-32-bytes-long-xxxxxxx"), Iterations: 4096}},
		&ACLCreate{ACLs: []ACL{{ResourceType: 3, ResourceName: "g-", PatternType: 4, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}}},
		&NodeRegister{ID: 1, RaftAddr: "127.0.0.1:9093"},
		&TopicDelete{Name: "plain"},
	}
}

// applyAt applies cmds to f at indexes from, from+1, ...
func applyAt(t *testing.T, f *MetaFSM, from uint64, cmds ...Command) {
	t.Helper()
	for i, c := range cmds {
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		f.Apply(&raft.Log{Index: from + uint64(i), Type: raft.LogCommand, Data: b})
	}
}

func snapshotBytes(t *testing.T, f *MetaFSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// A read barrier waits for the index of the last command the FSM applied:
// it moves with every command, refused ones included (their entry is in
// the log all the same), and travels in the snapshot.
func TestMetaFSMKeepsTheIndexOfItsLastCommand(t *testing.T) {
	f := NewMetaFSM(nil)
	applyAt(t, f, 7, &TopicCreate{Topic: Topic{Name: "a", Partitions: 1}})
	if got := f.AppliedIndex(); got != 7 {
		t.Fatalf("AppliedIndex = %d after the command at 7", got)
	}
	applyAt(t, f, 9, &TopicCreate{Topic: Topic{Name: "a", Partitions: 1}}) // refused: exists
	if got := f.AppliedIndex(); got != 9 {
		t.Fatalf("AppliedIndex = %d after a refused command at 9", got)
	}
	f.Apply(&raft.Log{Index: 10, Type: raft.LogNoop})
	if got := f.AppliedIndex(); got != 9 {
		t.Fatalf("AppliedIndex = %d after a no-op, want 9 (only commands count)", got)
	}
	restored := NewMetaFSM(nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	if got := restored.AppliedIndex(); got != 9 {
		t.Fatalf("restored AppliedIndex = %d, want 9", got)
	}
}

func TestWaitAppliedReturnsOnceTheCommandIsInTheState(t *testing.T) {
	f := NewMetaFSM(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := f.WaitApplied(ctx, 3)
		if _, ok := f.Topic("late"); err == nil && !ok {
			t.Error("WaitApplied returned before the topic was in the state")
		}
		done <- err
	}()
	applyAt(t, f, 1, &TopicCreate{Topic: Topic{Name: "early", Partitions: 1}})
	select {
	case err := <-done:
		t.Fatalf("WaitApplied(3) returned at index 1: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	applyAt(t, f, 3, &TopicCreate{Topic: Topic{Name: "late", Partitions: 1}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := f.WaitApplied(short, 4); err == nil {
		t.Fatal("WaitApplied(4) returned nil with nothing applied at 4")
	}
}

// A snapshot written by the first release people run (6c692b4) restores
// into the same state, with its index unknown (0: it did not keep one)
// until the next command; and that release reads the snapshots this one
// writes, the index skipped.
func TestMetaSnapshotsOfTheFirstReleaseRestoreBothWays(t *testing.T) {
	old, err := os.ReadFile("testdata/6c692b4/meta-snapshot.bin")
	if err != nil {
		t.Fatal(err)
	}
	cmds := releaseOneMetaCommands()
	want := NewMetaFSM(nil)
	applyAt(t, want, 1, cmds...)

	got := NewMetaFSM(nil)
	if err := got.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	if got.AppliedIndex() != 0 || got.AppliedIndexKnown() {
		t.Fatalf("AppliedIndex = %d (known %v) from a snapshot without one", got.AppliedIndex(), got.AppliedIndexKnown())
	}
	if !bytes.Equal(persist(t, got), persist(t, want)) {
		t.Fatal("the first release's snapshot does not restore to the state its commands make")
	}

	// What that release decodes: the document without the index.
	type metaSnapshotOfRelease1 struct {
		ClusterID string            `codec:"cluster_id"`
		Topics    []Topic           `codec:"topics"`
		Nodes     []Node            `codec:"nodes,omitempty"`
		Placement []ShardPlacement  `codec:"placement,omitempty"`
		Scram     []ScramCredential `codec:"scram,omitempty"`
		ACLs      []ACL             `codec:"acls,omitempty"`
	}
	now := snapshotBytes(t, want)
	var doc metaSnapshotOfRelease1
	if err := codec.NewDecoderBytes(now[1:], msgpack).Decode(&doc); err != nil {
		t.Fatalf("the first release cannot decode this release's snapshot: %v", err)
	}
	var b bytes.Buffer
	b.WriteByte(now[0])
	if err := codec.NewEncoder(&b, msgpack).Encode(&doc); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), old) {
		t.Fatal("the first release reads a different state from this release's snapshot")
	}
}
