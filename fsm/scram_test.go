package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// credential is a SCRAM credential of user for mechanism whose salt and
// keys start with tag, so two credentials are told apart by their bytes.
func credential(user string, mechanism int8, tag string) ScramCredential {
	return ScramCredential{
		User: user, Mechanism: mechanism,
		Salt:       []byte(tag + "/salt"),
		StoredKey:  []byte(tag + "/stored"),
		ServerKey:  []byte(tag + "/server"),
		Iterations: 4096,
	}
}

// TestScramCredentialsAreSetReplacedAndDeleted: a Set creates the
// (user, mechanism) credential or replaces it, leaving the user's other
// mechanism and other users alone; a Delete removes one mechanism's.
func TestScramCredentialsAreSetReplacedAndDeleted(t *testing.T) {
	f := NewMetaFSM(nil)
	idx := uint64(0)
	do := func(cmd Command) any { idx++; return apply(t, f, idx, cmd) }
	for _, c := range []ScramCredential{credential("bob", 1, "b1"), credential("alice", 2, "a2"), credential("alice", 1, "a1")} {
		if r := do(&ScramCredentialSet{Credential: c}); r != nil {
			t.Fatalf("set %s/%d: %v", c.User, c.Mechanism, r)
		}
	}
	replaced := credential("alice", 1, "a1-new")
	replaced.Iterations = 8192
	if r := do(&ScramCredentialSet{Credential: replaced}); r != nil {
		t.Fatalf("replace: %v", r)
	}
	want := []ScramCredential{replaced, credential("alice", 2, "a2"), credential("bob", 1, "b1")}
	if got := f.ScramCredentials(); !reflect.DeepEqual(got, want) {
		t.Fatalf("credentials (by user, then mechanism):\n got %+v\nwant %+v", got, want)
	}
	if got, ok := f.ScramCredential("alice", 1); !ok || !reflect.DeepEqual(got, replaced) {
		t.Fatalf("alice/1 after the replace: %+v %v", got, ok)
	}

	if r := do(&ScramCredentialDelete{User: "alice", Mechanism: 2}); r != nil {
		t.Fatalf("delete: %v", r)
	}
	if _, ok := f.ScramCredential("alice", 2); ok {
		t.Fatal("alice/2 is still there after its delete")
	}
	if got, ok := f.ScramCredential("alice", 1); !ok || !reflect.DeepEqual(got, replaced) {
		t.Fatalf("the delete of alice/2 took alice/1: %+v %v", got, ok)
	}
	if _, ok := f.ScramCredential("bob", 2); ok {
		t.Fatal("bob has a SCRAM-SHA-512 credential that was never set")
	}
}

// TestDeletingAMissingScramCredentialChangesNothing: the delete of a
// credential that is not stored (another mechanism of a user, an unknown
// user, one deleted already) is answered ErrScramCredentialNotFound,
// naming the user and mechanism, and the state stays as it was.
func TestDeletingAMissingScramCredentialChangesNothing(t *testing.T) {
	f := NewMetaFSM(nil)
	apply(t, f, 1, &ScramCredentialSet{Credential: credential("alice", 1, "a1")})
	apply(t, f, 2, &ScramCredentialSet{Credential: credential("gone", 2, "g2")})
	apply(t, f, 3, &ScramCredentialDelete{User: "gone", Mechanism: 2})
	before := persist(t, f)
	for i, del := range []ScramCredentialDelete{
		{User: "alice", Mechanism: 2},
		{User: "nobody", Mechanism: 1},
		{User: "gone", Mechanism: 2},
		{User: "", Mechanism: 0},
	} {
		r := apply(t, f, uint64(i+4), &del)
		err, _ := r.(error)
		if !errors.Is(err, ErrScramCredentialNotFound) {
			t.Fatalf("delete of missing %+v: %v, want ErrScramCredentialNotFound", del, r)
		}
		if del.User != "" && !strings.Contains(err.Error(), del.User) {
			t.Errorf("the answer %q does not name user %q", err, del.User)
		}
	}
	if after := persist(t, f); !bytes.Equal(after, before) {
		t.Error("a refused delete changed the state")
	}
}

// TestInvalidScramCredentialIsRefused: a Set without a user, or of a
// mechanism other than SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2), never
// enters the state, whatever the body decoded to.
func TestInvalidScramCredentialIsRefused(t *testing.T) {
	f := NewMetaFSM(nil)
	apply(t, f, 1, &ScramCredentialSet{Credential: credential("alice", 1, "a1")})
	before := persist(t, f)
	for i, bad := range []ScramCredential{
		{},
		credential("", 1, "x"),
		credential("alice", 0, "x"),
		credential("alice", 3, "x"),
		credential("alice", -1, "x"),
	} {
		r := apply(t, f, uint64(i+2), &ScramCredentialSet{Credential: bad})
		if err, _ := r.(error); !errors.Is(err, ErrInvalidScramCredential) {
			t.Errorf("set %+v: %v, want ErrInvalidScramCredential", bad, r)
		}
		if err := bad.Validate(); !errors.Is(err, ErrInvalidScramCredential) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidScramCredential", bad, err)
		}
	}
	if after := persist(t, f); !bytes.Equal(after, before) {
		t.Error("a refused set changed the state")
	}
	// Nothing beyond the user and mechanism is the FSM's to check.
	if r := apply(t, f, 10, &ScramCredentialSet{Credential: ScramCredential{User: "bare", Mechanism: 2}}); r != nil {
		t.Errorf("set of a credential without salt or keys: %v", r)
	}
}

// TestScramCredentialReadersReturnCopies: a caller that writes into the
// bytes it read does not change the stored credential.
func TestScramCredentialReadersReturnCopies(t *testing.T) {
	f := NewMetaFSM(nil)
	want := credential("alice", 1, "a1")
	apply(t, f, 1, &ScramCredentialSet{Credential: want})
	got, _ := f.ScramCredential("alice", 1)
	got.Salt[0], got.StoredKey[0], got.ServerKey[0] = 'X', 'X', 'X'
	all := f.ScramCredentials()
	all[0].Salt[0], all[0].StoredKey[0], all[0].ServerKey[0] = 'Y', 'Y', 'Y'
	if again, _ := f.ScramCredential("alice", 1); !reflect.DeepEqual(again, want) {
		t.Fatalf("the stored credential changed through a reader's copy: %+v", again)
	}
}

// TestScramCredentialsKeepEveryByteThroughSnapshotAndRestore: users whose
// names are not valid UTF-8 stay distinct and keep their names, and salts
// and keys of any bytes come back exactly; a restored state writes the
// same snapshot.
func TestScramCredentialsKeepEveryByteThroughSnapshotAndRestore(t *testing.T) {
	f := NewMetaFSM(nil)
	var want []ScramCredential
	idx := uint64(0)
	for _, user := range slices.Concat(fffdEqualIDs, []string{everyByte()[1:], "\xed\xa0\x80"}) {
		for _, mech := range []int8{1, 2} {
			c := ScramCredential{
				User: user, Mechanism: mech,
				Salt:       []byte(everyByte()),
				StoredKey:  []byte{0x00, 0xff, 0xfe, 0x80, byte(mech)},
				ServerKey:  []byte("\xed\xa0\x80" + user),
				Iterations: 4096 * int32(mech),
			}
			idx++
			if r := apply(t, f, idx, &ScramCredentialSet{Credential: c}); r != nil {
				t.Fatalf("set %q/%d: %v", user, mech, r)
			}
			want = append(want, c)
		}
	}
	sort.SliceStable(want, func(i, j int) bool { return want[i].User < want[j].User })
	check := func(t *testing.T, f *MetaFSM) {
		t.Helper()
		if got := f.ScramCredentials(); !reflect.DeepEqual(got, want) {
			t.Fatalf("credentials lost bytes:\n got %s\nwant %s", short(got), short(want))
		}
		for _, c := range want {
			if got, ok := f.ScramCredential(c.User, c.Mechanism); !ok || !reflect.DeepEqual(got, c) {
				t.Fatalf("%q/%d not found by its own name (found %v): %s", c.User, c.Mechanism, ok, short(got))
			}
		}
	}
	check(t, f)
	restored := NewMetaFSM(nil)
	apply(t, restored, 1, &ScramCredentialSet{Credential: credential("stale", 1, "s")})
	roundTrip(t, f, restored)
	check(t, restored)
	if !bytes.Equal(persist(t, restored), persist(t, f)) {
		t.Fatal("a restored state writes another snapshot")
	}
	// Deletes find what they must delete by the exact bytes.
	for _, c := range want {
		idx++
		if r := apply(t, restored, idx, &ScramCredentialDelete{User: c.User, Mechanism: c.Mechanism}); r != nil {
			t.Fatalf("delete %q/%d: %v", c.User, c.Mechanism, r)
		}
	}
	if n := len(restored.ScramCredentials()); n != 0 {
		t.Fatalf("%d credentials left after deleting all", n)
	}
}

// TestMetaSnapshotFromBeforeScramRestoresNoCredentials: a snapshot of a
// release before SCRAM (msgpack without the field, or JSON) restores with
// no credentials, replacing those the FSM held.
func TestMetaSnapshotFromBeforeScramRestoresNoCredentials(t *testing.T) {
	// The document as the release before SCRAM wrote it.
	type metaSnapshotBeforeScram struct {
		ClusterID string           `codec:"cluster_id"`
		Topics    []Topic          `codec:"topics"`
		Nodes     []Node           `codec:"nodes,omitempty"`
		Placement []ShardPlacement `codec:"placement,omitempty"`
	}
	var old memSink
	doc := metaSnapshotBeforeScram{ClusterID: "c", Topics: []Topic{fixtureTopic()}, Nodes: []Node{{ID: 1, RaftAddr: "n1:9093", State: NodeActive}}}
	if err := writeSnapshot(&old, &doc); err != nil {
		t.Fatal(err)
	}
	for name, snap := range map[string][]byte{
		"msgpack before SCRAM": old.Bytes(),
		"v1 JSON":              readFixture(t, "meta-snapshot.bin"),
	} {
		t.Run(name, func(t *testing.T) {
			f := NewMetaFSM(nil)
			apply(t, f, 1, &ScramCredentialSet{Credential: credential("alice", 1, "a1")})
			if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
				t.Fatal(err)
			}
			if got := f.ScramCredentials(); len(got) != 0 {
				t.Fatalf("restored credentials %+v", got)
			}
			if _, ok := f.ScramCredential("alice", 1); ok {
				t.Fatal("a credential from before the restore survived it")
			}
			if len(f.Topics()) == 0 {
				t.Fatal("the snapshot's topics were not restored")
			}
		})
	}
}

// TestScramCommandsKeepTheirBytesThroughEncodeAndDecode, and their
// encoding is pinned: changing it needs a new body version.
func TestScramCommandsKeepTheirBytesThroughEncodeAndDecode(t *testing.T) {
	for name, s := range awkwardStrings() {
		t.Run(name, func(t *testing.T) {
			for _, cmd := range []Command{
				&ScramCredentialSet{Credential: ScramCredential{User: s, Mechanism: 2, Salt: []byte(s), StoredKey: []byte{0xff, 0}, ServerKey: []byte(s + "/k"), Iterations: 16384}},
				&ScramCredentialDelete{User: s, Mechanism: 1},
			} {
				b, err := Encode(cmd)
				if err != nil {
					t.Fatalf("%s: %v", cmd.CommandType(), err)
				}
				got, err := Decode(b)
				if err != nil {
					t.Fatalf("%s: %v", cmd.CommandType(), err)
				}
				if !reflect.DeepEqual(got, cmd) {
					t.Fatalf("%s lost bytes:\n got %s\nwant %s", cmd.CommandType(), short(got), short(cmd))
				}
			}
		})
	}
	for _, tc := range []struct {
		cmd  Command
		want string
	}{
		{&ScramCredentialDelete{User: "u\xfe", Mechanism: 2}, "\x0d\x02\x82\xa9mechanism\x02\xa4user\xa2u\xfe"},
		{&ScramCredentialSet{Credential: ScramCredential{User: "u", Mechanism: 1, Salt: []byte{0xff}, StoredKey: []byte{1}, ServerKey: []byte{2}, Iterations: 4096}},
			"\x0c\x02\x81\xaacredential\x86\xaaiterations\xd1\x10\x00\xa9mechanism\x01" +
				"\xa4salt\xc4\x01\xff\xaaserver_key\xc4\x01\x02\xaastored_key\xc4\x01\x01\xa4user\xa1u"},
	} {
		b, err := Encode(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s encoding changed:\n got %q\nwant %q", tc.cmd.CommandType(), b, tc.want)
		}
	}
	if got := ScramCredentialSetType.String() + " " + ScramCredentialDeleteType.String(); got != "ScramCredentialSet ScramCredentialDelete" {
		t.Errorf("names %q", got)
	}
}

// TestScramCommandsInAShardLogAreForeign: credentials belong to the
// metadata group only.
func TestScramCommandsInAShardLogAreForeign(t *testing.T) {
	f := NewShardFSM(0, nil)
	for i, cmd := range []Command{&ScramCredentialSet{Credential: credential("alice", 1, "a1")}, &ScramCredentialDelete{User: "alice", Mechanism: 1}} {
		if r, _ := apply(t, f, uint64(i+1), cmd).(error); !errors.Is(r, ErrForeignCommand) {
			t.Errorf("%s in a shard log: %v", cmd.CommandType(), r)
		}
	}
}
