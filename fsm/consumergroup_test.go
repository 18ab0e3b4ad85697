package fsm

import (
	"errors"
	"reflect"
	"testing"
)

func cpart(topic byte, parts ...int32) []ConsumerPartitions {
	return []ConsumerPartitions{{TopicID: [16]byte{topic, 0xfe}, Partitions: parts}}
}

func sub(client string, topics ...string) ConsumerSubscription {
	return ConsumerSubscription{ClientID: client, ClientHost: "/127.0.0.1", Topics: topics, ServerAssignor: "uniform", RebalanceTimeoutMs: 60000}
}

// joinWrite is what a new member's first heartbeat writes: its
// subscription at a new group epoch, the new target, and its first step.
func joinWrite(group, member string, epoch int32, ts int64) *ConsumerGroupWrite {
	return &ConsumerGroupWrite{
		GroupID: group, Timestamp: ts, Epoch: epoch, TargetEpoch: epoch,
		Subscriptions: []ConsumerSubscriptionPut{{MemberID: member, Subscription: sub("c-"+member, "orders")}},
		Targets:       []ConsumerTargetPut{{MemberID: member, Partitions: cpart(1, 0, 1)}},
		Assignments:   []ConsumerAssignmentPut{{MemberID: member, Assignment: ConsumerAssignment{Epoch: epoch, PreviousEpoch: 0, Assigned: cpart(1, 0, 1)}}},
	}
}

func mustConsumerGroup(t *testing.T, f *ShardFSM, id string) ConsumerGroup {
	t.Helper()
	g, ok := f.ConsumerGroup(id)
	if !ok {
		t.Fatalf("no consumer group %q", id)
	}
	return g
}

func TestConsumerGroupWritesChangeOnlyWhatTheyName(t *testing.T) {
	f := NewShardFSM(0, nil)
	if r := apply(t, f, 1, joinWrite("g", "m2", 1, 1000)); r != nil {
		t.Fatal(r)
	}
	w := joinWrite("g", "m1", 2, 2000)
	w.MetadataHash, w.After = 0xfeed, 1
	if r := apply(t, f, 2, w); r != nil {
		t.Fatal(r)
	}
	g := mustConsumerGroup(t, f, "g")
	if g.Epoch != 2 || g.TargetEpoch != 2 || g.MetadataHash != 0xfeed || g.StateTimestamp != 2000 || len(g.Members) != 2 || g.Members[0].ID != "m1" || g.Members[1].ID != "m2" {
		t.Fatalf("after two joins: %+v", g)
	}

	// A heartbeat that only moves m2's reconciliation leaves the rest.
	step := ConsumerAssignment{State: 1, Epoch: 1, PreviousEpoch: 1, Assigned: cpart(1, 1), PendingRevocation: cpart(1, 0)}
	if r := apply(t, f, 3, &ConsumerGroupWrite{GroupID: "g", After: 2, Timestamp: 3000,
		Assignments: []ConsumerAssignmentPut{{MemberID: "m2", Assignment: step}}}); r != nil {
		t.Fatal(r)
	}
	g2 := mustConsumerGroup(t, f, "g")
	m2, _ := g2.Member("m2")
	if !reflect.DeepEqual(m2.Assignment, step) || !reflect.DeepEqual(m2.Subscription, sub("c-m2", "orders")) || !reflect.DeepEqual(m2.Target, cpart(1, 0, 1)) {
		t.Fatalf("m2 after its step: %+v", m2)
	}
	if g2.Epoch != 2 || g2.TargetEpoch != 2 || g2.StateTimestamp != 2000 {
		t.Fatalf("a write naming no epochs and no joins changed the group: %+v", g2)
	}
	if m1, _ := g2.Member("m1"); !reflect.DeepEqual(m1, g.Members[0]) {
		t.Fatalf("m1 changed: %+v", m1)
	}

	// m1 leaves: its subscription, target and assignment go together.
	if r := apply(t, f, 4, &ConsumerGroupWrite{GroupID: "g", After: 3, Timestamp: 4000, Epoch: 3, MetadataHash: 0x5eed, Leaves: []string{"m1"}}); r != nil {
		t.Fatal(r)
	}
	g3 := mustConsumerGroup(t, f, "g")
	if _, ok := g3.Member("m1"); ok || g3.Writes != 4 || g3.Epoch != 3 || g3.TargetEpoch != 2 || g3.MetadataHash != 0x5eed || g3.StateTimestamp != 4000 || len(g3.Members) != 1 {
		t.Fatalf("after m1 left: %+v", g3)
	}
}

func TestConsumerGroupWritesThatContradictThemselvesChangeNothing(t *testing.T) {
	f := NewShardFSM(0, nil)
	apply(t, f, 1, joinWrite("g", "m1", 1, 1000))
	before := f.ConsumerGroups()
	for name, w := range map[string]*ConsumerGroupWrite{
		"no group id": {Epoch: 2},
		"a member both leaves and subscribes": {GroupID: "g", After: 1, Leaves: []string{"m1"},
			Subscriptions: []ConsumerSubscriptionPut{{MemberID: "m1", Subscription: sub("c")}}},
		"a target set twice": {GroupID: "g", After: 1, Targets: []ConsumerTargetPut{{MemberID: "m1"}, {MemberID: "m1"}}},
		"a target of a member that is not there": {GroupID: "g", After: 1, Epoch: 5,
			Targets: []ConsumerTargetPut{{MemberID: "m1"}, {MemberID: "ghost"}}},
		"an assignment of a member that is not there": {GroupID: "g", After: 1,
			Assignments: []ConsumerAssignmentPut{{MemberID: "ghost"}}},
	} {
		if r, _ := apply(t, f, 2, w).(error); !errors.Is(r, ErrInvalidConsumerGroupWrite) {
			t.Errorf("%s: %v, want ErrInvalidConsumerGroupWrite", name, r)
		}
	}
	if after := f.ConsumerGroups(); !reflect.DeepEqual(after, before) {
		t.Fatalf("refused writes changed the state:\n%+v\n%+v", before, after)
	}
}

// TestOnlyAJoinMakesAConsumerGroup: a write that brings no member (a
// leave or an expiry computed before the group was deleted, a target for a
// member that never joined) does not bring a group into being.
func TestOnlyAJoinMakesAConsumerGroup(t *testing.T) {
	f := NewShardFSM(0, nil)
	for name, w := range map[string]*ConsumerGroupWrite{
		"a leave":                         {GroupID: "gone", Epoch: 4, Leaves: []string{"m1"}},
		"a target without a subscription": {GroupID: "gone", Targets: []ConsumerTargetPut{{MemberID: "m"}}},
		"nothing at all":                  {GroupID: "gone"},
	} {
		if r, _ := apply(t, f, 1, w).(error); !errors.Is(r, ErrGroupNotFound) {
			t.Errorf("%s: %v, want ErrGroupNotFound", name, r)
		}
	}
	if _, ok := f.ConsumerGroup("gone"); ok {
		t.Fatal("a write without a member made a group")
	}
}

// TestConsumerGroupTakesOverOnlyAnEmptyClassicGroup: a classic group with
// members keeps its id; an empty one (here, offsets committed with no
// group) becomes a consumer group and keeps its offsets, and later commits
// do not bring a classic record back.
func TestConsumerGroupTakesOverOnlyAnEmptyClassicGroup(t *testing.T) {
	f := NewShardFSM(0, nil)
	apply(t, f, 1, &GroupPut{Group: sampleGroup("busy")})
	if r, _ := apply(t, f, 2, joinWrite("busy", "m1", 1, 1000)).(error); !errors.Is(r, ErrGroupTypeConflict) {
		t.Fatalf("joining a classic group with members: %v, want ErrGroupTypeConflict", r)
	}
	if _, ok := f.ConsumerGroup("busy"); ok {
		t.Fatal("the refused write made a consumer group")
	}

	apply(t, f, 3, commitWith("idle", 5))
	if r := apply(t, f, 4, joinWrite("idle", "m1", 1, 1000)); r != nil {
		t.Fatal(r)
	}
	if _, ok := f.Group("idle"); ok {
		t.Fatal("the empty classic group is still there beside the consumer group")
	}
	if o, ok := f.Offset("idle", TopicPartition{Topic: "idle", Partition: 0}); !ok || o.Offset != 5 {
		t.Fatalf("the upgraded group's offset: %+v %v", o, ok)
	}
	apply(t, f, 5, commitWith("idle", 6))
	if _, ok := f.Group("idle"); ok {
		t.Fatal("a commit to a consumer group made a classic group")
	}

	// And the other way round: a classic group is not stored under the
	// id of a consumer group with members, so a later consumer write
	// cannot drop it; once the consumer group is empty, a classic group
	// replaces it and keeps its offsets (the downgrade).
	classic := sampleGroup("idle")
	if r, _ := apply(t, f, 6, &GroupPut{Group: classic}).(error); !errors.Is(r, ErrGroupTypeConflict) {
		t.Fatalf("a classic group over a consumer group: %v, want ErrGroupTypeConflict", r)
	}
	if _, ok := f.Group("idle"); ok {
		t.Fatal("the refused GroupPut stored a classic group")
	}
	apply(t, f, 7, &ConsumerGroupWrite{GroupID: "idle", After: 1, Epoch: 2, Leaves: []string{"m1"}})
	if r := apply(t, f, 8, &GroupPut{Group: classic}); r != nil {
		t.Fatalf("a classic group over an empty consumer group: %v", r)
	}
	if _, ok := f.ConsumerGroup("idle"); ok {
		t.Fatal("the empty consumer group is still there beside the classic group")
	}
	if o, ok := f.Offset("idle", TopicPartition{Topic: "idle", Partition: 0}); !ok || o.Offset != 6 {
		t.Fatalf("the downgraded group's offset: %+v %v", o, ok)
	}
}

// TestAConsumerGroupWriteAfterALostOneIsRefused: the coordinator enqueues
// a group's writes one after another without waiting; when one of them
// never commits, the writes computed on top of it must not apply to a
// state they were not computed from.
func TestAConsumerGroupWriteAfterALostOneIsRefused(t *testing.T) {
	f := NewShardFSM(0, nil)
	apply(t, f, 1, joinWrite("g", "m1", 1, 1000))
	// The write at 1 (m2 joining at epoch 2) was lost; m2's next step,
	// computed at 2, reaches the log.
	step := &ConsumerGroupWrite{GroupID: "g", After: 2,
		Assignments: []ConsumerAssignmentPut{{MemberID: "m1", Assignment: ConsumerAssignment{Epoch: 2, PreviousEpoch: 1}}}}
	before := f.ConsumerGroups()
	if r, _ := apply(t, f, 2, step).(error); !errors.Is(r, ErrStaleConsumerGroupWrite) {
		t.Fatalf("a write computed after a lost one: %v, want ErrStaleConsumerGroupWrite", r)
	}
	if after := f.ConsumerGroups(); !reflect.DeepEqual(after, before) {
		t.Fatalf("the stale write changed the state:\n%+v\n%+v", before, after)
	}
	// A creation that comes late, after the group exists, is stale too.
	if r, _ := apply(t, f, 3, joinWrite("g", "m3", 2, 2000)).(error); !errors.Is(r, ErrStaleConsumerGroupWrite) {
		t.Fatalf("a second creation: %v, want ErrStaleConsumerGroupWrite", r)
	}
	step.After = 1
	if r := apply(t, f, 4, step); r != nil {
		t.Fatalf("the write at the stored count: %v", r)
	}
}

func TestDeletingAConsumerGroup(t *testing.T) {
	f := NewShardFSM(0, nil)
	apply(t, f, 1, joinWrite("g", "m1", 1, 1000))
	apply(t, f, 2, commitWith("g", 1))
	if r, _ := apply(t, f, 3, &GroupDelete{GroupID: "g"}).(error); !errors.Is(r, ErrGroupNotEmpty) {
		t.Fatalf("deleting a consumer group with a member: %v, want ErrGroupNotEmpty", r)
	}
	apply(t, f, 4, &ConsumerGroupWrite{GroupID: "g", After: 1, Epoch: 2, Leaves: []string{"m1"}})
	if r := apply(t, f, 5, &GroupDelete{GroupID: "g"}); r != nil {
		t.Fatalf("deleting the empty consumer group: %v", r)
	}
	if _, ok := f.ConsumerGroup("g"); ok || f.HasOffsets("g") {
		t.Fatal("the deleted consumer group or its offsets are still there")
	}
}

func TestConsumerGroupsSurviveSnapshotAndRestore(t *testing.T) {
	f := NewShardFSM(0, nil)
	apply(t, f, 1, joinWrite("g1", "m1", 1, 1000))
	apply(t, f, 2, joinWrite("g2\xff", "m\xfe", 4, 2000))
	apply(t, f, 3, &GroupPut{Group: sampleGroup("classic")})
	into := NewShardFSM(0, nil)
	roundTrip(t, f, into)
	if !reflect.DeepEqual(into.fuzzState(), f.fuzzState()) {
		t.Fatalf("restored state differs:\n%+v\n%+v", into.fuzzState(), f.fuzzState())
	}
	if g := mustConsumerGroup(t, into, "g2\xff"); g.Members[0].Assignment.Assigned[0].TopicID != [16]byte{1, 0xfe} {
		t.Fatalf("topic id after restore: %v", g.Members[0].Assignment.Assigned[0].TopicID)
	}
}

// TestConsumerGroupWriteEncodingIsStable pins the on-disk form of a
// consumer group write: a change is a new body version, not an accident.
func TestConsumerGroupWriteEncodingIsStable(t *testing.T) {
	b, err := Encode(&ConsumerGroupWrite{GroupID: "g", Timestamp: 1, Epoch: 2, Leaves: []string{"x"},
		Targets: []ConsumerTargetPut{{MemberID: "m", Partitions: []ConsumerPartitions{{TopicID: [16]byte{15: 7}, Partitions: []int32{3}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := "\x0b\x02\x85\xa5epoch\x02\xa8group_id\xa1g\xa6leaves\x91\xa1x\xa7targets\x91\x82\xa9member_id\xa1m" +
		"\xaapartitions\x91\x82\xaapartitions\x91\x03\xa8topic_id\xc4\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x07" +
		"\xa2ts\x01"
	if string(b) != want {
		t.Fatalf("encoding changed:\n got %q\nwant %q", b, want)
	}
	cmd, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if w := cmd.(*ConsumerGroupWrite); w.Targets[0].Partitions[0].TopicID != [16]byte{15: 7} {
		t.Fatalf("decoded %+v", w)
	}
}

// TestAnUpgradeReplacesAClassicGroupWithMembers: the online upgrade's
// write takes a classic group's id even with members, and its offsets
// stay; only the write that says so.
func TestAnUpgradeReplacesAClassicGroupWithMembers(t *testing.T) {
	f := NewShardFSM(0, nil)
	apply(t, f, 1, &GroupPut{Group: sampleGroup("busy")})
	apply(t, f, 2, commitWith("busy", 9))
	w := joinWrite("busy", "m1", 3, 1000)
	w.Upgrade = true
	if r := apply(t, f, 3, w); r != nil {
		t.Fatalf("the upgrade: %v", r)
	}
	if _, ok := f.Group("busy"); ok {
		t.Fatal("the classic group is still there beside the upgraded one")
	}
	if g := mustConsumerGroup(t, f, "busy"); g.Epoch != 3 || len(g.Members) != 1 {
		t.Fatalf("the upgraded group: %+v", g)
	}
	if o, ok := f.Offset("busy", TopicPartition{Topic: "busy", Partition: 0}); !ok || o.Offset != 9 {
		t.Fatalf("the upgraded group's offset: %+v %v", o, ok)
	}
}

// TestADowngradeReplacesAConsumerGroupWithMembers: the online
// downgrade's GroupPut takes a consumer group's id even with members; only
// the one that says so.
func TestADowngradeReplacesAConsumerGroupWithMembers(t *testing.T) {
	f := NewShardFSM(0, nil)
	apply(t, f, 1, joinWrite("g", "m1", 1, 1000))
	classic := sampleGroup("g")
	if r, _ := apply(t, f, 2, &GroupPut{Group: classic}).(error); !errors.Is(r, ErrGroupTypeConflict) {
		t.Fatalf("a plain GroupPut over a consumer group with members: %v", r)
	}
	if r, _ := apply(t, f, 3, &GroupPut{Group: classic, Downgrade: true, ConsumerAfter: 7}).(error); !errors.Is(r, ErrStaleConsumerGroupWrite) {
		t.Fatalf("a downgrade computed at another write: %v, want ErrStaleConsumerGroupWrite", r)
	}
	if r := apply(t, f, 4, &GroupPut{Group: classic, Downgrade: true, ConsumerAfter: 1}); r != nil {
		t.Fatalf("the downgrade: %v", r)
	}
	if _, ok := f.ConsumerGroup("g"); ok {
		t.Fatal("the consumer group is still there beside the downgraded one")
	}
	if g, ok := f.Group("g"); !ok || len(g.Members) != len(classic.Members) {
		t.Fatalf("the downgraded group: %+v %v", g, ok)
	}
}
