package groups

import (
	"context"
	"errors"
	"testing"
	"time"
)

// This file holds the consumer-group cases found in review: each failed
// before its fix.

// TestAnOldInstanceIDNoLongerNamesAMember: a member that rejoins under a
// new instance id gives the old one up; a later member with the old one
// joins as a new static member (it used to find a member that was gone,
// panic and leave the group locked for good).
func TestAnOldInstanceIDNoLongerNamesAMember(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 2)
	m := newConsumerClient(t, c, "g", "m1", "orders")
	m.instance = strp("A")
	converge(t, c, "g", m)
	m.epoch, m.owned, m.instance = 0, nil, strp("B")
	m.mustBeat()
	m.mustLeave(leaveMemberEpoch)
	n := newConsumerClient(t, c, "g", "m2", "orders")
	n.instance = strp("A")
	n.mustBeat()
	converge(t, c, "g", n)
	if countOwned(n.owned) != 2 {
		t.Fatalf("the new static member owns %d partitions", countOwned(n.owned))
	}
}

// TestARefusedHeartbeatLeavesTheGroupUnlocked: whatever a heartbeat
// fails with, the group's lock is free afterwards.
func TestARefusedHeartbeatLeavesTheGroupUnlocked(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 2)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	bad := a.request()
	bad.MemberEpoch = 99
	if _, err := c.ConsumerHeartbeat(context.Background(), bad); !errors.Is(err, ErrFencedMemberEpoch) {
		t.Fatalf("heartbeat ahead of the member: %v", err)
	}
	g := c.consumerOf("g")
	if !g.mu.TryLock() {
		t.Fatal("the group is still locked after a refused heartbeat")
	}
	g.mu.Unlock()
}

// TestAStaticTakeoverKeepsMemoryAndLogAlike: a static member that takes
// over from its predecessor in a heartbeat that computes a new target
// has, in memory, exactly the target the log stores, including when the
// new target gives it nothing; after a failover every assigned partition
// is in its holder's target.
func TestAStaticTakeoverKeepsMemoryAndLogAlike(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 2)
	a := newConsumerClient(t, c, "g", "a", "orders")
	s1 := newConsumerClient(t, c, "g", "s1", "orders")
	s1.instance = strp("inst")
	converge(t, c, "g", a, s1)
	s1.mustLeave(leaveStaticMemberEpoch)
	s2 := newConsumerClient(t, c, "g", "s2", "missing") // a changed subscription: a new target
	s2.instance = strp("inst")
	for range 4 {
		s2.mustBeat()
		a.mustBeat()
	}
	assertLiveTargetsStored(t, c, log, "g")
	s2.topics, s2.epoch, s2.owned = []string{"orders"}, 0, nil
	converge(t, c, "g", a, s2)
	assertLiveTargetsStored(t, c, log, "g")
}

// assertLiveTargetsStored checks that the live group's targets are the
// stored ones.
func assertLiveTargetsStored(t *testing.T, c *Coordinator, log *MemLog, group string) {
	t.Helper()
	g := c.consumerOf(group)
	g.mu.Lock()
	defer g.mu.Unlock()
	stored, _ := log.FSM.ConsumerGroup(group)
	for _, sm := range stored.Members {
		m := g.members[sm.ID]
		if m == nil {
			t.Fatalf("stored member %s is not live", sm.ID)
		}
		if !sameTopicPartitions(m.target, fromConsumerPartitions(sm.Target)) {
			t.Fatalf("member %s: live target %v, stored %v", sm.ID, m.target, fromConsumerPartitions(sm.Target))
		}
	}
}

// TestARefusedJoinMakesNoGroup: a join refused for its subscription leaves
// no group behind, and an empty classic group of that id (one holding
// offsets) stays the classic group it is stored as.
func TestARefusedJoinMakesNoGroup(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 1)
	bad := "("
	join := ConsumerHeartbeatRequest{Version: 1, GroupID: "ghost", MemberID: "m", RebalanceTimeoutMs: 30000,
		SubscribedTopicRegex: &bad, Owned: []TopicIDPartitions{}}
	if _, err := c.ConsumerHeartbeat(context.Background(), join); !errors.Is(err, ErrInvalidRegularExpression) {
		t.Fatalf("join: %v", err)
	}
	if _, err := c.DescribeConsumer(context.Background(), "ghost"); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("ConsumerGroupDescribe after a refused join: %v, want ErrGroupIDNotFound", err)
	}
	if listed, _ := c.List(context.Background()); len(listed) != 0 {
		t.Fatalf("listed after a refused join: %+v", listed)
	}
	if err := commitOffsets(c, CommitRequest{Version: 9, GroupID: "old", Generation: -1,
		Partitions: []CommitPartition{{Topic: "orders", Partition: 0, Offset: 5, LeaderEpoch: -1}}}); err != nil {
		t.Fatal(err)
	}
	join.GroupID = "old"
	if _, err := c.ConsumerHeartbeat(context.Background(), join); !errors.Is(err, ErrInvalidRegularExpression) {
		t.Fatalf("join: %v", err)
	}
	if d, err := c.Describe(context.Background(), "old"); err != nil || d.ConsumerProtocol || !d.Exists {
		t.Fatalf("the stored classic group after a refused join: %+v %v", d, err)
	}
}

// TestAClassicRequestThatWritesNothingKeepsTheChain: a classic JoinGroup
// answered MEMBER_ID_REQUIRED takes an empty consumer group over in
// memory only; the next consumer-protocol join goes on from the stored
// group (it used to be refused as computed from another state).
func TestAClassicRequestThatWritesNothingKeepsTheChain(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 2)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	a.mustLeave(leaveMemberEpoch)
	req := joinReq("g", "")
	req.RequireKnownMemberID = true
	wantErr(t, c.Join(context.Background(), req).Err, ErrMemberIDRequired)
	b := newConsumerClient(t, c, "g", "b", "orders")
	if err := b.beat(); err != nil {
		t.Fatalf("the first consumer join after an abandoned classic join: %v", err)
	}
}

// TestAKnownMemberCannotTakeOverAStaticMember: only a new member id takes
// over a static member's instance id (a known member would otherwise
// leave its predecessor's partitions in nobody's target).
func TestAKnownMemberCannotTakeOverAStaticMember(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 4)
	a := newConsumerClient(t, c, "g", "a", "orders")
	s := newConsumerClient(t, c, "g", "s", "orders")
	s.instance = strp("inst")
	converge(t, c, "g", a, s)
	s.mustLeave(leaveStaticMemberEpoch)
	a.epoch, a.owned, a.instance = 0, nil, strp("inst")
	if err := a.beat(); !errors.Is(err, ErrUnreleasedInstanceID) {
		t.Fatalf("a known member taking over a static member: %v, want ErrUnreleasedInstanceID", err)
	}
}

// TestDeletingAConsumerGroup: DeleteGroups refuses a consumer group with
// members and deletes an empty one with its offsets; a join afterwards
// makes a new group.
func TestDeletingAConsumerGroup(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 2)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	wantErr(t, c.Delete(context.Background(), "g"), ErrNonEmptyGroup)
	a.mustLeave(leaveMemberEpoch)
	if err := c.Delete(context.Background(), "g"); err != nil {
		t.Fatalf("deleting the empty consumer group: %v", err)
	}
	if _, ok := log.FSM.ConsumerGroup("g"); ok {
		t.Fatal("the deleted group is still stored")
	}
	b := newConsumerClient(t, c, "g", "b", "orders")
	converge(t, c, "g", b)
}

// TestConsumerGroupLimitsAndServerMadeIDs: group.consumer.max.size refuses
// a member beyond it, and a v0 join without a member id gets one.
func TestConsumerGroupLimitsAndServerMadeIDs(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, func(cfg *Config) { cfg.ConsumerMaxSize = 1 })
	topics.Put("orders", 2)
	v0 := ConsumerHeartbeatRequest{Version: 0, GroupID: "g", RebalanceTimeoutMs: 30000, SubscribedTopicNames: []string{"orders"}, Owned: []TopicIDPartitions{}}
	res, err := c.ConsumerHeartbeat(context.Background(), v0)
	if err != nil || len(res.MemberID) != 22 || res.MemberEpoch != 1 {
		t.Fatalf("a v0 join: %+v %v", res, err)
	}
	if _, err := c.ConsumerHeartbeat(context.Background(), v0); !errors.Is(err, ErrGroupMaxSizeReached) {
		t.Fatalf("a member beyond group.consumer.max.size: %v", err)
	}
}

// TestAMemberThatDoesNotRevokeIsFenced: a member that keeps partitions it
// must give back past its rebalance timeout is fenced, and the others get
// them.
func TestAMemberThatDoesNotRevokeIsFenced(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 2)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	// a's rebalance timeout is short; b's join takes a partition from it.
	short := a.request()
	short.RebalanceTimeoutMs = 200
	if _, err := c.ConsumerHeartbeat(context.Background(), short); err != nil {
		t.Fatal(err)
	}
	b := newConsumerClient(t, c, "g", "b", "orders")
	b.mustBeat()
	stubborn := a.request() // still owns both partitions
	if res, err := c.ConsumerHeartbeat(context.Background(), stubborn); err != nil || !res.HasAssignment || countOwned(res.Assignment) != 1 {
		t.Fatalf("the revoking heartbeat: %+v %v", res, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for countOwned(b.owned) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("b owns %d partitions after a missed its rebalance timeout", countOwned(b.owned))
		}
		time.Sleep(50 * time.Millisecond)
		b.mustBeat()
	}
	if err := a.beat(); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("the fenced member's heartbeat: %v", err)
	}
}
