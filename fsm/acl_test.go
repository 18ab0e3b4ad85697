package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"testing"
)

// topicACL is an ACL allowing principal to do op on the literal topic.
func topicACL(topic, principal string, op int8) ACL {
	return ACL{ResourceType: 2, ResourceName: topic, PatternType: 3, Principal: principal, Host: "*", Operation: op, Permission: 3}
}

// TestACLsAreCreatedIdempotentlyAndDeletedExactly: a create adds ACLs,
// creating one again changes nothing and succeeds, and a delete removes
// the ACLs stored exactly as given, ignoring the others; the readers
// answer them sorted.
func TestACLsAreCreatedIdempotentlyAndDeletedExactly(t *testing.T) {
	f := NewMetaFSM(nil)
	readT := topicACL("t", "User:bob", 3)
	writeT := topicACL("t", "User:bob", 4)
	prefixed := ACL{ResourceType: 2, ResourceName: "t", PatternType: 4, Principal: "User:alice", Host: "10.0.0.1", Operation: 2, Permission: 2}
	group := ACL{ResourceType: 3, ResourceName: "g", PatternType: 3, Principal: "User:*", Host: "*", Operation: 3, Permission: 3}
	if r := apply(t, f, 1, &ACLCreate{ACLs: []ACL{group, writeT, readT, prefixed}}); r != nil {
		t.Fatalf("create: %v", r)
	}
	want := []ACL{readT, writeT, prefixed, group}
	if got := f.ACLs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ACLs (sorted by resource type, name, pattern type, ...):\n got %+v\nwant %+v", got, want)
	}
	before := persist(t, f)
	if r := apply(t, f, 2, &ACLCreate{ACLs: []ACL{readT, readT}}); r != nil {
		t.Fatalf("creating a stored ACL again: %v", r)
	}
	if after := persist(t, f); !bytes.Equal(after, before) {
		t.Fatal("creating a stored ACL again changed the state")
	}

	// Only exact ACLs go: another host, permission or pattern type is
	// another ACL.
	other := prefixed
	other.Host = "*"
	if r := apply(t, f, 3, &ACLDelete{ACLs: []ACL{writeT, other, topicACL("gone", "User:bob", 3)}}); r != nil {
		t.Fatalf("delete: %v", r)
	}
	if got, want := f.ACLs(), []ACL{readT, prefixed, group}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the delete:\n got %+v\nwant %+v", got, want)
	}
	if r := apply(t, f, 4, &ACLDelete{ACLs: []ACL{writeT}}); r != nil {
		t.Fatalf("deleting a deleted ACL: %v", r)
	}
	if r := apply(t, f, 5, &ACLDelete{ACLs: []ACL{readT, prefixed, group}}); r != nil {
		t.Fatalf("delete: %v", r)
	}
	if got := f.ACLs(); len(got) != 0 {
		t.Fatalf("ACLs left after deleting all: %+v", got)
	}
}

// TestInvalidACLCreateChangesNothing: a create holding one ACL with an
// empty string or a code out of range is refused whole with
// ErrInvalidACL, its valid ACLs too.
func TestInvalidACLCreateChangesNothing(t *testing.T) {
	f := NewMetaFSM(nil)
	good := topicACL("t", "User:bob", 3)
	apply(t, f, 1, &ACLCreate{ACLs: []ACL{good}})
	before, version := persist(t, f), f.ACLsVersion()
	with := func(change func(*ACL)) ACL {
		a := topicACL("u", "User:bob", 3)
		change(&a)
		return a
	}
	for i, bad := range []ACL{
		{},
		with(func(a *ACL) { a.ResourceName = "" }),
		with(func(a *ACL) { a.Principal = "" }),
		with(func(a *ACL) { a.Host = "" }),
		with(func(a *ACL) { a.ResourceType = 1 }), // Any
		with(func(a *ACL) { a.ResourceType = 8 }),
		with(func(a *ACL) { a.PatternType = 2 }), // Match
		with(func(a *ACL) { a.PatternType = 5 }),
		with(func(a *ACL) { a.Operation = 1 }), // Any
		with(func(a *ACL) { a.Operation = 15 }),
		with(func(a *ACL) { a.Permission = 1 }), // Any
		with(func(a *ACL) { a.Permission = 4 }),
		with(func(a *ACL) { a.Permission = -128 }),
	} {
		r := apply(t, f, uint64(i+2), &ACLCreate{ACLs: []ACL{topicACL("v", "User:bob", 3), bad}})
		if err, _ := r.(error); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("create of %+v: %v, want ErrInvalidACL", bad, r)
		}
		if err := bad.Validate(); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidACL", bad, err)
		}
	}
	if after := persist(t, f); !bytes.Equal(after, before) {
		t.Error("a refused create changed the state")
	}
	if f.ACLsVersion() != version {
		t.Error("a refused create moved ACLsVersion")
	}
	// The edges of every range are stored.
	edges := []ACL{
		{ResourceType: 2, ResourceName: "n", PatternType: 3, Principal: "p", Host: "h", Operation: 2, Permission: 2},
		{ResourceType: 7, ResourceName: "n", PatternType: 4, Principal: "p", Host: "h", Operation: 14, Permission: 3},
	}
	if r := apply(t, f, 100, &ACLCreate{ACLs: edges}); r != nil {
		t.Errorf("create of the ranges' edges: %v", r)
	}
}

// TestACLsVersionMovesWithEveryChange: the version moves when a create or
// delete changes the ACLs and when a snapshot is restored (even one with
// the same ACLs), and stays when a command changes nothing.
func TestACLsVersionMovesWithEveryChange(t *testing.T) {
	f := NewMetaFSM(nil)
	if v := f.ACLsVersion(); v != 0 {
		t.Fatalf("a new MetaFSM's ACLsVersion is %d", v)
	}
	a := topicACL("t", "User:bob", 3)
	steps := []struct {
		name  string
		do    func(idx uint64)
		moves bool
	}{
		{"create", func(i uint64) { apply(t, f, i, &ACLCreate{ACLs: []ACL{a}}) }, true},
		{"create again", func(i uint64) { apply(t, f, i, &ACLCreate{ACLs: []ACL{a}}) }, false},
		{"empty create", func(i uint64) { apply(t, f, i, &ACLCreate{}) }, false},
		{"delete of another", func(i uint64) { apply(t, f, i, &ACLDelete{ACLs: []ACL{topicACL("u", "User:bob", 3)}}) }, false},
		{"topic create", func(i uint64) {
			apply(t, f, i, &TopicCreate{Topic: Topic{Name: "t", Partitions: 1, ReplicationFactor: 1}})
		}, false},
		{"restore", func(uint64) { roundTrip(t, f, f) }, true},
		{"delete", func(i uint64) { apply(t, f, i, &ACLDelete{ACLs: []ACL{a}}) }, true},
	}
	for i, s := range steps {
		before := f.ACLsVersion()
		s.do(uint64(i + 1))
		if moved := f.ACLsVersion() != before; moved != s.moves {
			t.Errorf("%s: ACLsVersion moved %v, want %v", s.name, moved, s.moves)
		}
	}
}

// TestACLReadersReturnCopies: a caller that changes what ACLs returned
// does not change the stored ACLs.
func TestACLReadersReturnCopies(t *testing.T) {
	f := NewMetaFSM(nil)
	a := topicACL("t", "User:bob", 3)
	apply(t, f, 1, &ACLCreate{ACLs: []ACL{a}})
	got := f.ACLs()
	got[0].Principal = "User:mallory"
	if again := f.ACLs(); !reflect.DeepEqual(again, []ACL{a}) {
		t.Fatalf("the stored ACL changed through a reader's copy: %+v", again)
	}
}

// TestACLsKeepEveryByteThroughSnapshotAndRestore: ACLs whose strings are
// not valid UTF-8 stay distinct, keep their bytes through a snapshot, and
// are deleted by their exact bytes; a restored state writes the same
// snapshot and replaces the ACLs it held.
func TestACLsKeepEveryByteThroughSnapshotAndRestore(t *testing.T) {
	f := NewMetaFSM(nil)
	var want []ACL
	for _, s := range awkwardStrings() {
		want = append(want, ACL{ResourceType: 2, ResourceName: s, PatternType: 4, Principal: "User:" + s, Host: s + "/h", Operation: 3, Permission: 3})
	}
	if r := apply(t, f, 1, &ACLCreate{ACLs: want}); r != nil {
		t.Fatal(r)
	}
	slices.SortFunc(want, compareACLs)
	if got := f.ACLs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ACLs lost bytes:\n got %s\nwant %s", short(got), short(want))
	}
	restored := NewMetaFSM(nil)
	apply(t, restored, 1, &ACLCreate{ACLs: []ACL{topicACL("stale", "User:x", 3)}})
	roundTrip(t, f, restored)
	if got := restored.ACLs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored ACLs lost bytes (or kept the stale one):\n got %s\nwant %s", short(got), short(want))
	}
	if !bytes.Equal(persist(t, restored), persist(t, f)) {
		t.Fatal("a restored state writes another snapshot")
	}
	if r := apply(t, restored, 2, &ACLDelete{ACLs: want}); r != nil {
		t.Fatal(r)
	}
	if n := len(restored.ACLs()); n != 0 {
		t.Fatalf("%d ACLs left after deleting all by their bytes", n)
	}
}

// TestMetaSnapshotFromBeforeACLsRestoresNoACLs: a snapshot of a release
// before ACLs (msgpack without the field, or JSON) restores with no ACLs,
// replacing those the FSM held.
func TestMetaSnapshotFromBeforeACLsRestoresNoACLs(t *testing.T) {
	// The document as the release before ACLs wrote it.
	type metaSnapshotBeforeACLs struct {
		ClusterID string            `codec:"cluster_id"`
		Topics    []Topic           `codec:"topics"`
		Nodes     []Node            `codec:"nodes,omitempty"`
		Placement []ShardPlacement  `codec:"placement,omitempty"`
		Scram     []ScramCredential `codec:"scram,omitempty"`
	}
	var old memSink
	doc := metaSnapshotBeforeACLs{ClusterID: "c", Topics: []Topic{fixtureTopic()}, Scram: []ScramCredential{credential("alice", 1, "a1")}}
	if err := writeSnapshot(&old, &doc); err != nil {
		t.Fatal(err)
	}
	for name, snap := range map[string][]byte{
		"msgpack before ACLs": old.Bytes(),
		"v1 JSON":             readFixture(t, "meta-snapshot.bin"),
	} {
		t.Run(name, func(t *testing.T) {
			f := NewMetaFSM(nil)
			apply(t, f, 1, &ACLCreate{ACLs: []ACL{topicACL("t", "User:bob", 3)}})
			if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
				t.Fatal(err)
			}
			if got := f.ACLs(); len(got) != 0 {
				t.Fatalf("restored ACLs %+v", got)
			}
			if len(f.Topics()) == 0 {
				t.Fatal("the snapshot's topics were not restored")
			}
		})
	}
}

// TestACLCommandsKeepTheirBytesThroughEncodeAndDecode, and their encoding
// is pinned: changing it needs a new body version.
func TestACLCommandsKeepTheirBytesThroughEncodeAndDecode(t *testing.T) {
	for name, s := range awkwardStrings() {
		t.Run(name, func(t *testing.T) {
			a := ACL{ResourceType: 3, ResourceName: s, PatternType: 4, Principal: "User:" + s, Host: s, Operation: 8, Permission: 2}
			for _, cmd := range []Command{&ACLCreate{ACLs: []ACL{a, topicACL("t", "User:bob", 3)}}, &ACLDelete{ACLs: []ACL{a}}} {
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
	const body = "\x81\xa4acls\x91\x87\xa4host\xa1*\xa9operation\x03\xacpattern_type\x04\xaapermission\x03" +
		"\xa9principal\xa6User:\xfe\xadresource_name\xa2t\xfe\xadresource_type\x02"
	acl := ACL{ResourceType: 2, ResourceName: "t\xfe", PatternType: 4, Principal: "User:\xfe", Host: "*", Operation: 3, Permission: 3}
	for _, tc := range []struct {
		cmd  Command
		want string
	}{
		{&ACLCreate{ACLs: []ACL{acl}}, "\x0e\x02" + body},
		{&ACLDelete{ACLs: []ACL{acl}}, "\x0f\x02" + body},
	} {
		b, err := Encode(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s encoding changed:\n got %q\nwant %q", tc.cmd.CommandType(), b, tc.want)
		}
	}
	if got := ACLCreateType.String() + " " + ACLDeleteType.String(); got != "ACLCreate ACLDelete" {
		t.Errorf("names %q", got)
	}
}

// TestACLCommandsInAShardLogAreForeign: ACLs belong to the metadata group
// only.
func TestACLCommandsInAShardLogAreForeign(t *testing.T) {
	f := NewShardFSM(0, nil)
	a := topicACL("t", "User:bob", 3)
	for i, cmd := range []Command{&ACLCreate{ACLs: []ACL{a}}, &ACLDelete{ACLs: []ACL{a}}} {
		if r, _ := apply(t, f, uint64(i+1), cmd).(error); !errors.Is(r, ErrForeignCommand) {
			t.Errorf("%s in a shard log: %v", cmd.CommandType(), r)
		}
	}
}

// TestACLCommandsHoldTheFuzzProperties: a log of ACL commands, valid and
// refused, keeps FuzzApply's and FuzzSnapshotRestore's properties (a
// seed of both that exercises the ACL state).
func TestACLCommandsHoldTheFuzzProperties(t *testing.T) {
	a, b := topicACL("t", "User:bob", 3), topicACL("u", "User:*", 2)
	var input []byte
	for _, cmd := range []Command{
		&ACLCreate{ACLs: []ACL{a, b}},
		&ACLCreate{ACLs: []ACL{a, {}}},
		&ACLDelete{ACLs: []ACL{b}},
		&ACLCreate{ACLs: []ACL{b}},
		&ACLDelete{ACLs: []ACL{a, {}}},
	} {
		entry, err := Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		input = append(input, byte(len(entry)>>8), byte(len(entry)))
		input = append(input, entry...)
	}
	for name, fresh := range freshFSMs() {
		f := fresh()
		for i, entry := range fuzzEntries(input) {
			checkApplied(t, name, f, uint64(i+1), entry)
		}
	}
	for split := range byte(6) {
		checkSnapshotRestore(t, nil, append([]byte{split}, input...))
	}
}
