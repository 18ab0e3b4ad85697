package groups

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// live reports whether the coordinator holds group id in memory.
func live(c *Coordinator, id string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.classics[id]
	return ok
}

// listed returns the listing of id among c's groups.
func listed(t *testing.T, c *Coordinator, id string) (GroupListing, bool) {
	t.Helper()
	all, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(l GroupListing) bool { return l.GroupID == id })
	if i < 0 {
		return GroupListing{}, false
	}
	return all[i], true
}

// A group that only holds offsets is not kept in memory once its commit
// is answered, yet every request sees it as before: describe, list,
// stats, a member's commit, a join and a delete.
func TestAGroupThatOnlyHoldsOffsetsSleepsInTheFSM(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	off := []CommitPartition{{Topic: "t", Partition: 0, Offset: 7}, {Topic: "t", Partition: 1, Offset: 9}}
	for _, id := range []string{"a", "b"} {
		if err := commitOffsets(c, CommitRequest{GroupID: id, Generation: -1, Partitions: off}); err != nil {
			t.Fatal(err)
		}
		if live(c, id) {
			t.Fatalf("group %s is held in memory after its commit was answered", id)
		}
	}

	d, err := c.Describe(context.Background(), "a")
	if err != nil || !d.Exists || d.State != "Empty" || d.ProtocolType != "" || d.Generation != 0 || len(d.Members) != 0 {
		t.Fatalf("describe of a group that only holds offsets: %+v, %v", d, err)
	}
	if live(c, "a") {
		t.Error("a described group stays in memory")
	}
	l, ok := listed(t, c, "b")
	if !ok || l.State != "Empty" || l.Type != GroupTypeClassic || l.Members != 0 {
		t.Fatalf("listing of b: %+v (listed %v)", l, ok)
	}
	if st := c.Stats(); st.GroupsByState["Empty"] != 2 {
		t.Errorf("stats count %v, want 2 Empty groups", st.GroupsByState)
	}

	// Commits naming a member are refused as by a live group.
	err = commitOffsets(c, CommitRequest{GroupID: "a", Generation: 1, MemberID: "m", Partitions: off})
	wantErr(t, err, ErrUnknownMemberID)

	// A join wakes the group; its offsets are still there.
	ids, _ := stableGroup(t, c, "a", 1)
	if !live(c, "a") || len(ids) != 1 {
		t.Fatal("a group with a member is not live")
	}
	if o, ok := log.FSM.Offset("a", fsm.TopicPartition{Topic: "t", Partition: 1}); !ok || o.Offset != 9 {
		t.Fatalf("offset after the join: %+v %v", o, ok)
	}

	if err := c.Delete(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if _, ok := log.FSM.Group("b"); ok || log.FSM.HasOffsets("b") {
		t.Fatal("a deleted group is still stored")
	}
	if d, _ := c.Describe(context.Background(), "b"); d.State != "Dead" {
		t.Fatalf("deleted group: %+v", d)
	}
	if _, ok := listed(t, c, "b"); ok {
		t.Fatal("a deleted group is listed")
	}
}

// A new leader does not load the groups that only hold offsets, and
// serves them all the same.
func TestANewLeaderLeavesOffsetOnlyGroupsInTheFSM(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	if err := commitOffsets(c, CommitRequest{GroupID: "a", Generation: -1, Partitions: []CommitPartition{{Topic: "t", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	stableGroup(t, c, "g", 1)
	c.Deactivate()
	if err := c.Activate(log.SetLeader(true)); err != nil {
		t.Fatal(err)
	}
	if live(c, "a") || !live(c, "g") {
		t.Fatalf("after activation: a live %v (want false), g live %v (want true)", live(c, "a"), live(c, "g"))
	}
	if _, ok := listed(t, c, "a"); !ok {
		t.Fatal("a group that only holds offsets is not listed after a failover")
	}
	if err := commitOffsets(c, CommitRequest{GroupID: "a", Generation: -1, Partitions: []CommitPartition{{Topic: "t", Offset: 2}}}); err != nil {
		t.Fatal(err)
	}
	if o, _ := log.FSM.Offset("a", fsm.TopicPartition{Topic: "t"}); o.Offset != 2 {
		t.Fatalf("offset %d after the new leader's commit, want 2", o.Offset)
	}
}

// Retention reaches the dormant groups: one whose offsets ran out goes,
// one with fresh offsets stays and is not woken.
func TestRetentionExpiresDormantGroups(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	now := int64(1_000_000)
	c.now = func() int64 { return now }
	const retention = 1000
	if err := commitOffsets(c, CommitRequest{GroupID: "old", Generation: -1, Partitions: []CommitPartition{{Topic: "t", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	now += retention / 2
	if err := commitOffsets(c, CommitRequest{GroupID: "fresh", Generation: -1, Partitions: []CommitPartition{{Topic: "t", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	if n, g := c.ExpireOffsets(now+retention/2, retention); n != 1 || g != 1 {
		t.Fatalf("expired %d offsets and %d groups, want 1 and 1", n, g)
	}
	waitFor(t, func() bool { _, ok := log.FSM.Group("old"); return !ok })
	if _, ok := log.FSM.Group("fresh"); !ok || live(c, "fresh") {
		t.Fatalf("fresh group: stored %v, live %v (want stored, not live)", ok, live(c, "fresh"))
	}
}

// While the removal of an Empty group is being written, the group is gone:
// a lookup does not wake it from the FSM, which still holds it.
func TestAGroupBeingRemovedIsNotWoken(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	now := int64(1_000_000)
	c.now = func() int64 { return now }
	if err := commitOffsets(c, CommitRequest{GroupID: "old", Generation: -1, Partitions: []CommitPartition{{Topic: "t", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	log.SetDelay(300 * time.Millisecond)
	if n, g := c.ExpireOffsets(now+1000, 1000); n != 1 || g != 1 {
		t.Fatalf("expired %d offsets and %d groups, want 1 and 1", n, g)
	}
	if _, ok := log.FSM.Group("old"); !ok {
		t.Fatal("the removal applied at once; the test needs it in flight")
	}
	if d, err := c.Describe(context.Background(), "old"); err != nil || d.State != "Dead" {
		t.Fatalf("a group being removed described as %+v, %v; want Dead", d, err)
	}
	if _, ok := listed(t, c, "old"); ok {
		t.Fatal("a group being removed is listed")
	}
	waitFor(t, func() bool { _, ok := log.FSM.Group("old"); return !ok })
	if d, _ := c.Describe(context.Background(), "old"); d.State != "Dead" {
		t.Fatalf("a removed group: %+v", d)
	}
}

// A sweep expires a group's offsets once, though the group goes to sleep
// while their deletion is still being written: the groups it found live
// and the dormant ones are one view.
func TestASweepExpiresALiveGroupsOffsetsOnce(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	now := int64(1_000_000)
	c.now = func() int64 { return now }
	const retention = 1000
	if err := commitOffsets(c, CommitRequest{GroupID: "g", Generation: -1, Partitions: []CommitPartition{{Topic: "old", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	now += retention
	if err := commitOffsets(c, CommitRequest{GroupID: "g", Generation: -1, Partitions: []CommitPartition{{Topic: "new", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	// A heartbeat from no member wakes the group and leaves it live.
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: "nobody", Generation: 1}), ErrUnknownMemberID)
	if !live(c, "g") {
		t.Fatal("the heartbeat did not wake the group")
	}
	log.SetDelay(200 * time.Millisecond)
	if n, g := c.ExpireOffsets(now, retention); n != 1 || g != 0 {
		t.Fatalf("the sweep expired %d offsets and %d groups, want 1 and 0", n, g)
	}
	waitFor(t, func() bool { _, ok := log.FSM.Offset("g", fsm.TopicPartition{Topic: "old"}); return !ok })
}

// A group made while an earlier group of its id is being removed stays
// live until the removal is written: dormant, it would be hidden with
// the one removed.
func TestAGroupIsNotPutToSleepWhileItsIDIsBeingRemoved(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	c.markRemoving("g") // an earlier group's removal, in flight
	if err := commitOffsets(c, CommitRequest{GroupID: "g", Generation: -1, Partitions: []CommitPartition{{Topic: "t", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	if d, err := c.Describe(context.Background(), "g"); err != nil || d.State != "Empty" {
		t.Fatalf("the committed group described as %+v, %v; want Empty", d, err)
	}
	if _, ok := listed(t, c, "g"); !ok {
		t.Fatal("the committed group is not listed")
	}
	c.unmarkRemoving("g")
	if err := commitOffsets(c, CommitRequest{GroupID: "g", Generation: -1, Partitions: []CommitPartition{{Topic: "t", Offset: 2}}}); err != nil {
		t.Fatal(err)
	}
	if live(c, "g") {
		t.Fatal("the group is still held in memory once the removal was written")
	}
}

// Stats counts every dormant group once, with the live and removed ones
// left out.
func TestStatsCountDormantGroupsOnce(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	for _, id := range []string{"a", "b", "c"} {
		if err := commitOffsets(c, CommitRequest{GroupID: id, Generation: -1, Partitions: []CommitPartition{{Topic: "t", Offset: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "a", MemberID: "nobody", Generation: 1}), ErrUnknownMemberID)
	c.markRemoving("b")
	if st := c.Stats(); st.GroupsByState["Empty"] != 2 {
		t.Fatalf("stats count %v, want 2 Empty groups (a live, c dormant; b being removed)", st.GroupsByState)
	}
}
