package groups

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
)

func TestMemberIDRequiredThenJoin(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	req := joinReq("g", "")
	req.RequireKnownMemberID = true
	r := c.Join(context.Background(), req)
	wantErr(t, r.Err, ErrMemberIDRequired)
	if r.MemberID == "" {
		t.Fatal("MEMBER_ID_REQUIRED without a member id")
	}
	req.MemberID = r.MemberID
	j := recv(t, joinAsync(c, req))
	if j.Err != nil || j.Generation != 1 || j.Leader != r.MemberID || j.Protocol != "range" || len(j.Members) != 1 {
		t.Fatalf("join: %+v", j)
	}
	s := recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: j.MemberID, Generation: 1, Assignments: map[string][]byte{j.MemberID: []byte("a")}}))
	if s.Err != nil || string(s.Assignment) != "a" || s.Protocol != "range" || s.ProtocolType != "consumer" {
		t.Fatalf("sync: %+v", s)
	}
	// Invariant 4: the completed rebalance is in the FSM.
	g, ok := log.FSM.Group("g")
	if !ok || g.Generation != 1 || g.State != fsm.StateStable || string(g.Members[0].Assignment) != "a" {
		t.Fatalf("stored group: %+v", g)
	}
}

func TestUnknownMemberIDJoinForMissingGroup(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	wantErr(t, c.Join(context.Background(), joinReq("g", "ghost")).Err, ErrUnknownMemberID)
}

func TestInvalidSessionTimeout(t *testing.T) {
	c, _ := newTestCoordinator(t, func(cfg *Config) { cfg.MinSessionTimeout = time.Second; cfg.MaxSessionTimeout = 2 * time.Second })
	for _, ms := range []int32{999, 2001} {
		req := joinReq("g", "")
		req.SessionTimeoutMs = ms
		wantErr(t, c.Join(context.Background(), req).Err, ErrInvalidSessionTimeout)
	}
}

func TestInconsistentProtocols(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	stableGroup(t, c, "g", 1)
	other := joinReq("g", "", "roundrobin")
	wantErr(t, c.Join(context.Background(), other).Err, ErrInconsistentGroupProtocol)
	wrongType := joinReq("g", "")
	wrongType.ProtocolType = "connect"
	wantErr(t, c.Join(context.Background(), wrongType).Err, ErrInconsistentGroupProtocol)
	empty := joinReq("g2", "")
	empty.Protocols = nil
	wantErr(t, c.Join(context.Background(), empty).Err, ErrInconsistentGroupProtocol)
}

func TestProtocolVote(t *testing.T) {
	c, _ := newTestCoordinator(t, func(cfg *Config) { cfg.InitialRebalanceDelay = 100 * time.Millisecond })
	a := joinAsync(c, joinReq("g", "", "range", "roundrobin"))
	time.Sleep(5 * time.Millisecond)
	b := joinAsync(c, joinReq("g", "", "roundrobin", "range", "sticky"))
	time.Sleep(5 * time.Millisecond)
	d := joinAsync(c, joinReq("g", "", "roundrobin", "range"))
	for _, ch := range []<-chan JoinResult{a, b, d} {
		if r := recv(t, ch); r.Err != nil || r.Protocol != "roundrobin" {
			t.Fatalf("vote: %+v", r)
		}
	}
}

func TestHeartbeatErrors(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	ids, gen := stableGroup(t, c, "g", 2)
	if err := c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: "nobody", Generation: gen}), ErrUnknownMemberID)
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen + 1}), ErrIllegalGeneration)
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "nogroup", MemberID: ids[0], Generation: gen}), ErrUnknownMemberID)
	// A rejoin by the leader starts a rebalance: the other member is told.
	pending := joinAsync(c, joinReq("g", ids[0]))
	assertPending(t, pending)
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[1], Generation: gen}), ErrRebalanceInProgress)
	// Its sync for the old generation is refused too.
	wantErr(t, c.Sync(context.Background(), SyncRequest{GroupID: "g", MemberID: ids[1], Generation: gen}).Err, ErrRebalanceInProgress)
	other := recv(t, joinAsync(c, joinReq("g", ids[1])))
	lead := recv(t, pending)
	if other.Err != nil || lead.Err != nil || lead.Generation != gen+1 || other.Generation != gen+1 {
		t.Fatalf("rejoin: %+v %+v", lead, other)
	}
	wantErr(t, c.Sync(context.Background(), SyncRequest{GroupID: "g", MemberID: ids[1], Generation: gen}).Err, ErrIllegalGeneration)
}

func TestLeaderLeavesAndOtherLeads(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	ids, gen := stableGroup(t, c, "g", 2)
	res, err := c.Leave(context.Background(), "g", []LeaveMember{{MemberID: ids[0]}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[1], Generation: gen}), ErrRebalanceInProgress)
	r := recv(t, joinAsync(c, joinReq("g", ids[1])))
	if r.Err != nil || r.Leader != ids[1] || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("after leader left: %+v", r)
	}
	res, _ = c.Leave(context.Background(), "g", []LeaveMember{{MemberID: ids[0]}})
	wantErr(t, res[0].Err, ErrUnknownMemberID)
}

func TestSessionExpiryRemovesMember(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	a := joinReq("g", "")
	a.SessionTimeoutMs = 60000
	b := joinReq("g", "")
	b.SessionTimeoutMs = 150
	ra, rb := joinAsync(c, a), joinAsync(c, b)
	ja, jb := recv(t, ra), recv(t, rb)
	leader := ja
	if jb.Leader == jb.MemberID {
		leader = jb
	}
	assign := map[string][]byte{ja.MemberID: []byte("x"), jb.MemberID: []byte("y")}
	sa := syncAsync(c, SyncRequest{GroupID: "g", MemberID: leader.MemberID, Generation: leader.Generation, Assignments: assign})
	other := ja.MemberID
	if leader.MemberID == ja.MemberID {
		other = jb.MemberID
	}
	recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: other, Generation: leader.Generation}))
	recv(t, sa)
	// b never heartbeats: it expires and a is told to rejoin.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ja.MemberID, Generation: ja.Generation})
		if err == ErrRebalanceInProgress {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member b never expired (last heartbeat error %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := recv(t, joinAsync(c, JoinRequest{GroupID: "g", MemberID: ja.MemberID, ProtocolType: "consumer", Protocols: a.Protocols, SessionTimeoutMs: 60000, RebalanceTimeoutMs: 2000}))
	if r.Err != nil || len(r.Members) != 1 || r.Leader != ja.MemberID {
		t.Fatalf("after expiry: %+v", r)
	}
}

func TestRebalanceTimeoutRemovesMembersThatDoNotRejoin(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	ids, gen := stableGroup(t, c, "g", 2)
	// Lower the second member's rebalance timeout by rejoining it... simpler:
	// the first member rejoins; the second never does and is dropped after
	// the rebalance timeout (2s in joinReq).
	start := time.Now()
	r := recv(t, joinAsync(c, joinReq("g", ids[0])))
	if r.Err != nil || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("join completed after %v, before the rebalance timeout", waited)
	}
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[1], Generation: gen}), ErrUnknownMemberID)
}

func TestInitialDelayWaitsForMoreMembers(t *testing.T) {
	c, _ := newTestCoordinator(t, func(cfg *Config) { cfg.InitialRebalanceDelay = 150 * time.Millisecond })
	a := joinAsync(c, joinReq("g", ""))
	time.Sleep(100 * time.Millisecond)
	b := joinAsync(c, joinReq("g", "")) // arrives in the delay: extends it
	time.Sleep(100 * time.Millisecond)
	assertPending(t, a)
	ra, rb := recv(t, a), recv(t, b)
	if ra.Generation != 1 || rb.Generation != 1 || ra.Leader != rb.Leader {
		t.Fatalf("both must join generation 1 together: %+v %+v", ra, rb)
	}
}

func TestCommitValidation(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	off := []CommitPartition{{Topic: "t", Partition: 0, Offset: 5}}
	// Admin commit (generation -1) creates an Empty group.
	if err := commitOffsets(c, CommitRequest{GroupID: "simple", Generation: -1, Partitions: off}); err != nil {
		t.Fatal(err)
	}
	if o, ok := log.FSM.Offset("simple", fsm.TopicPartition{Topic: "t"}); !ok || o.Offset != 5 || o.CommitTimestamp == 0 {
		t.Fatalf("stored offset %+v %v", o, ok)
	}
	wantErr(t, commitOffsets(c, CommitRequest{GroupID: "missing", Generation: 3, MemberID: "m", Partitions: off}), ErrGroupIDNotFound)

	ids, gen := stableGroup(t, c, "g", 2)
	if err := commitOffsets(c, CommitRequest{GroupID: "g", MemberID: ids[1], Generation: gen, Partitions: off}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, commitOffsets(c, CommitRequest{GroupID: "g", Generation: -1, Partitions: off}), ErrUnknownMemberID)
	wantErr(t, commitOffsets(c, CommitRequest{GroupID: "g", MemberID: ids[1], Generation: gen + 1, Partitions: off}), ErrIllegalGeneration)
	wantErr(t, commitOffsets(c, CommitRequest{GroupID: "g", MemberID: "x", Generation: gen, Partitions: off}), ErrUnknownMemberID)

	// During CompletingRebalance commits are refused.
	j0 := joinAsync(c, joinReq("g", ids[0]))
	waitState(t, c, "g", "PreparingRebalance")
	j1 := joinAsync(c, joinReq("g", ids[1]))
	recv(t, j0)
	recv(t, j1)
	wantErr(t, commitOffsets(c, CommitRequest{GroupID: "g", MemberID: ids[1], Generation: gen + 1, Partitions: off}), ErrRebalanceInProgress)
	// ... after the member and generation checks (Kafka 3.7).
	wantErr(t, commitOffsets(c, CommitRequest{GroupID: "g", MemberID: ids[1], Generation: gen, Partitions: off}), ErrIllegalGeneration)
	wantErr(t, commitOffsets(c, CommitRequest{GroupID: "g", MemberID: "bogus", Generation: gen + 1, Partitions: off}), ErrUnknownMemberID)

	// A failed write is reported, not acknowledged.
	log.SetFault(raft.ErrNotLeader)
	wantErr(t, commitOffsets(c, CommitRequest{GroupID: "simple", Generation: -1, Partitions: off}), ErrNotCoordinator)
}

func TestSyncWriteFailureFailsTheRebalance(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	j := recv(t, joinAsync(c, joinReq("g", "")))
	log.SetFault(raft.ErrLeadershipLost)
	s := recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: j.MemberID, Generation: j.Generation, Assignments: map[string][]byte{j.MemberID: []byte("a")}}))
	wantErr(t, s.Err, ErrNotCoordinator)
	if _, ok := log.FSM.Group("g"); ok {
		t.Fatal("a failed assignment must not be stored")
	}
	d, _ := c.Describe(context.Background(), "g")
	if d.State != PreparingRebalance.String() {
		t.Fatalf("state after a failed store: %s", d.State)
	}
}

func TestFailoverKeepsGenerationAndAssignment(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	ids, gen := stableGroup(t, c, "g", 2)
	pending := joinAsync(c, joinReq("other", ""))
	c.Deactivate()
	wantErr(t, recv(t, pending).Err, ErrNotCoordinator)
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen}), ErrNotCoordinator)

	// A new leader with the same FSM: members keep their generation.
	c2, err := NewCoordinator(c.cfg, 0, log, log.FSM)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Activate(log.SetLeader(true)); err != nil {
		t.Fatal(err)
	}
	defer c2.Deactivate()
	for _, id := range ids {
		if err := c2.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: id, Generation: gen}); err != nil {
			t.Fatalf("heartbeat after failover: %v", err)
		}
	}
	s := c2.Sync(context.Background(), SyncRequest{GroupID: "g", MemberID: ids[1], Generation: gen})
	if s.Err != nil || string(s.Assignment) != "assignment-of-"+ids[1] {
		t.Fatalf("sync after failover: %+v", s)
	}
	d, _ := c2.Describe(context.Background(), "g")
	if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 2 {
		t.Fatalf("describe after failover: %+v", d)
	}
}

func TestDeleteGroups(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	ids, _ := stableGroup(t, c, "g", 1)
	wantErr(t, c.Delete(context.Background(), "g"), ErrNonEmptyGroup)
	wantErr(t, c.Delete(context.Background(), "nope"), ErrGroupIDNotFound)
	off := []CommitPartition{{Topic: "t", Offset: 1}}
	if err := commitOffsets(c, CommitRequest{GroupID: "e", Generation: -1, Partitions: off}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), "e"); err != nil {
		t.Fatal(err)
	}
	if log.FSM.HasOffsets("e") {
		t.Fatal("offsets survived the delete")
	}
	if d, _ := c.Describe(context.Background(), "e"); d.State != "Dead" {
		t.Fatalf("deleted group: %+v", d)
	}
	// After the last member leaves, the group is Empty and can go.
	if _, err := c.Leave(context.Background(), "g", []LeaveMember{{MemberID: ids[0]}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "g", "Empty")
	if err := c.Delete(context.Background(), "g"); err != nil {
		t.Fatal(err)
	}
}

func TestDescribe(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	if d, err := c.Describe(context.Background(), "unknown"); err != nil || d.State != "Dead" || len(d.Members) != 0 {
		t.Fatalf("unknown group: %+v %v", d, err)
	}
	j := recv(t, joinAsync(c, joinReq("g", "")))
	d, _ := c.Describe(context.Background(), "g")
	if d.State != "CompletingRebalance" || d.Protocol != "" || d.Members[0].Metadata != nil {
		t.Fatalf("no protocol or metadata unless Stable: %+v", d)
	}
	recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: j.MemberID, Generation: 1, Assignments: map[string][]byte{j.MemberID: []byte("a")}}))
	d, _ = c.Describe(context.Background(), "g")
	if d.State != "Stable" || d.Protocol != "range" || string(d.Members[0].Metadata) != "meta-range" || string(d.Members[0].Assignment) != "a" {
		t.Fatalf("stable: %+v", d)
	}
	list, _ := c.List(context.Background())
	if len(list) != 1 || list[0].State != "Stable" || list[0].ProtocolType != "consumer" {
		t.Fatalf("list: %+v", list)
	}
}

func TestStaticMemberReplacementFencesOldID(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	req := joinReq("g", "")
	req.InstanceID = "instance-1"
	first := recv(t, joinAsync(c, req))
	recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: first.MemberID, InstanceID: "instance-1", Generation: first.Generation, Assignments: map[string][]byte{first.MemberID: []byte("a")}}))

	// Before JoinGroup v9 the returning leader is given the old leader id,
	// so it does not assign; the group does not rebalance.
	second := recv(t, joinAsync(c, req))
	if second.Err != nil || second.MemberID == first.MemberID || second.Generation != first.Generation || second.Leader != first.MemberID || second.SkipAssignment {
		t.Fatalf("rejoin of the static member: %+v", second)
	}
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: first.MemberID, InstanceID: "instance-1", Generation: first.Generation}), ErrFencedInstanceID)
	s := c.Sync(context.Background(), SyncRequest{GroupID: "g", MemberID: second.MemberID, InstanceID: "instance-1", Generation: second.Generation})
	if s.Err != nil || string(s.Assignment) != "a" {
		t.Fatalf("the new member id keeps the assignment: %+v", s)
	}
	if g, _ := log.FSM.Group("g"); g.Members[0].ID != second.MemberID || g.Leader != second.MemberID {
		t.Fatalf("the new member id is stored: %+v", g)
	}

	// From v9 it is told it leads and must skip the assignment (KIP-814).
	req.SupportsSkipAssignment = true
	third := recv(t, joinAsync(c, req))
	if third.Err != nil || third.Generation != first.Generation || third.Leader != third.MemberID || !third.SkipAssignment || len(third.Members) != 1 {
		t.Fatalf("v9 rejoin of the static leader: %+v", third)
	}
	if d, _ := c.Describe(context.Background(), "g"); d.State != "Stable" {
		t.Fatalf("a static rejoin must not rebalance: %s", d.State)
	}

	// A failed write undoes the replacement.
	log.SetFault(raft.ErrNotLeader)
	wantErr(t, recv(t, joinAsync(c, req)).Err, ErrNotCoordinator)
	log.SetFault(nil)
	if err := c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: third.MemberID, InstanceID: "instance-1", Generation: first.Generation}); err != nil {
		t.Fatalf("the previous member id must stay valid after a failed replacement: %v", err)
	}

	res, _ := c.Leave(context.Background(), "g", []LeaveMember{{InstanceID: "instance-1"}})
	if res[0].Err != nil {
		t.Fatalf("leave by instance id: %v", res[0].Err)
	}
}

func TestGroupMaxSize(t *testing.T) {
	c, _ := newTestCoordinator(t, func(cfg *Config) { cfg.MaxSize = 1 })
	stableGroup(t, c, "g", 1)
	wantErr(t, c.Join(context.Background(), joinReq("g", "")).Err, ErrGroupMaxSizeReached)
}

func waitState(t *testing.T, c *Coordinator, group, state string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, _ := c.Describe(context.Background(), group)
		if d.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s stuck in %s, want %s", group, d.State, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLeaderThatNeverSyncsIsRemoved(t *testing.T) {
	c, _ := newTestCoordinator(t, nil)
	a, b := joinReq("g", ""), joinReq("g", "")
	a.RebalanceTimeoutMs, b.RebalanceTimeoutMs = 300, 300
	ja, jb := joinAsync(c, a), joinAsync(c, b)
	ra, rb := recv(t, ja), recv(t, jb)
	leader, follower := ra, rb
	if rb.MemberID == rb.Leader {
		leader, follower = rb, ra
	}
	// Only the follower syncs; the leader goes silent.
	s := recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: follower.MemberID, Generation: follower.Generation}))
	wantErr(t, s.Err, ErrRebalanceInProgress)
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: leader.MemberID, Generation: leader.Generation}), ErrUnknownMemberID)
	r := recv(t, joinAsync(c, JoinRequest{GroupID: "g", MemberID: follower.MemberID, ProtocolType: "consumer", Protocols: b.Protocols, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 300}))
	if r.Err != nil || r.Leader != follower.MemberID || len(r.Members) != 1 || r.Generation != leader.Generation+1 {
		t.Fatalf("after the leader was dropped: %+v", r)
	}
}

func TestGroupMaxSizeDuringRebalance(t *testing.T) {
	c, _ := newTestCoordinator(t, func(cfg *Config) { cfg.MaxSize = 2 })
	ids, _ := stableGroup(t, c, "g", 2)
	// A third member is refused while the group is full.
	wantErr(t, c.Join(context.Background(), joinReq("g", "")).Err, ErrGroupMaxSizeReached)
	// Existing members still rejoin.
	j0, j1 := joinAsync(c, joinReq("g", ids[0])), joinAsync(c, joinReq("g", ids[1]))
	if r0, r1 := recv(t, j0), recv(t, j1); r0.Err != nil || r1.Err != nil {
		t.Fatalf("members of a full group must rejoin: %v %v", r0.Err, r1.Err)
	}
}

func TestDeleteOffsets(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	commit := func(group string, gen int32, member string, topics ...string) {
		t.Helper()
		var offs []CommitPartition
		for _, tp := range topics {
			offs = append(offs, CommitPartition{Topic: tp, Offset: 1})
		}
		if err := commitOffsets(c, CommitRequest{GroupID: group, Generation: gen, MemberID: member, Partitions: offs}); err != nil {
			t.Fatal(err)
		}
	}
	// A consumer group subscribed to "a" keeps a's offsets.
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{"a"}}
	req := joinReq("g", "")
	req.Protocols = []fsm.Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	j := recv(t, joinAsync(c, req))
	recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: j.MemberID, Generation: j.Generation, Assignments: map[string][]byte{j.MemberID: nil}}))
	commit("g", j.Generation, j.MemberID, "a", "b")
	res, err := c.DeleteOffsets(context.Background(), "g", []fsm.TopicPartition{{Topic: "a"}, {Topic: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, res[fsm.TopicPartition{Topic: "a"}], ErrGroupSubscribedToTopic)
	if res[fsm.TopicPartition{Topic: "b"}] != nil {
		t.Fatal(res)
	}
	if !log.FSM.HasOffsets("g") {
		t.Fatal("a's offset must stay")
	}
	if _, ok := log.FSM.Offset("g", fsm.TopicPartition{Topic: "b"}); ok {
		t.Fatal("b's offset must go")
	}
	// An Empty group loses any partition; unknown groups are not found.
	commit("e", -1, "", "a")
	if res, err := c.DeleteOffsets(context.Background(), "e", []fsm.TopicPartition{{Topic: "a"}}); err != nil || res[fsm.TopicPartition{Topic: "a"}] != nil {
		t.Fatal(res, err)
	}
	_, err = c.DeleteOffsets(context.Background(), "nope", nil)
	wantErr(t, err, ErrGroupIDNotFound)
}

func TestExpireOffsets(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	now := int64(1_000_000)
	c.now = func() int64 { return now }
	const retention = 1000
	// A simple consumer's offsets expire by commit time, then the group goes.
	if err := commitOffsets(c, CommitRequest{GroupID: "simple", Generation: -1, Partitions: []CommitPartition{{Topic: "t", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	if n, g := c.ExpireOffsets(now+retention-1, retention); n != 0 || g != 0 {
		t.Fatalf("expired too early: %d %d", n, g)
	}
	if n, g := c.ExpireOffsets(now+retention, retention); n != 1 || g != 1 {
		t.Fatalf("expired %d offsets, %d groups", n, g)
	}
	waitFor(t, func() bool { _, ok := log.FSM.Group("simple"); return !ok && !log.FSM.HasOffsets("simple") })

	// A Stable consumer group keeps subscribed topics' offsets forever and
	// loses the others by commit time.
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{"a"}}
	req := joinReq("g", "")
	req.Protocols = []fsm.Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	j := recv(t, joinAsync(c, req))
	recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: j.MemberID, Generation: j.Generation, Assignments: map[string][]byte{j.MemberID: nil}}))
	offs := []CommitPartition{{Topic: "a", Offset: 1}, {Topic: "b", Offset: 2}}
	if err := commitOffsets(c, CommitRequest{GroupID: "g", Generation: j.Generation, MemberID: j.MemberID, Partitions: offs}); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.ExpireOffsets(now+10*retention, retention); n != 1 {
		t.Fatalf("stable group expired %d offsets, want only b's", n)
	}
	waitFor(t, func() bool { _, ok := log.FSM.Offset("g", fsm.TopicPartition{Topic: "b"}); return !ok })

	// Once Empty, the rest expire retention after the group became Empty.
	now += 5 * retention
	if _, err := c.Leave(context.Background(), "g", []LeaveMember{{MemberID: j.MemberID}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "g", "Empty")
	if n, _ := c.ExpireOffsets(now+retention-1, retention); n != 0 {
		t.Fatal("expired before the group was Empty for the retention")
	}
	if n, g := c.ExpireOffsets(now+retention, retention); n != 1 || g != 1 {
		t.Fatalf("empty group: %d offsets, %d groups", n, g)
	}
	if d, _ := c.Describe(context.Background(), "g"); d.State != "Dead" {
		t.Fatalf("removed group: %+v", d)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNoServingOnceRaftSteppedDown(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	ids, gen := stableGroup(t, c, "g", 1)
	// Raft stepped down; Deactivate has not run yet.
	log.StepDown()
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen}), ErrNotCoordinator)
	wantErr(t, c.Check(context.Background()), ErrNotCoordinator)
	_, err := c.Describe(context.Background(), "g")
	wantErr(t, err, ErrNotCoordinator)
}

// TestSlowAssignmentWriteDoesNotBlockTheNextGeneration: while generation
// 1's assignment is still being written, the group moves to generation 2;
// the leader's sync for generation 2 must be written and answered.
func TestSlowAssignmentWriteDoesNotBlockTheNextGeneration(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	a, b := joinReq("g", ""), joinReq("g", "")
	ca, cb := joinAsync(c, a), joinAsync(c, b)
	ja, jb := recv(t, ca), recv(t, cb)
	leader, follower := ja, jb
	if jb.MemberID == jb.Leader {
		leader, follower = jb, ja
	}
	if ja.Generation != 1 || jb.Generation != 1 {
		t.Fatalf("joins: %+v %+v", ja, jb)
	}
	log.SetDelay(300 * time.Millisecond)
	pending := syncAsync(c, SyncRequest{GroupID: "g", MemberID: leader.MemberID, Generation: 1, Assignments: map[string][]byte{leader.MemberID: []byte("x")}})
	time.Sleep(20 * time.Millisecond)
	// The follower leaves: generation 2 starts for the leader alone.
	if _, err := c.Leave(context.Background(), "g", []LeaveMember{{MemberID: follower.MemberID}}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, recv(t, pending).Err, ErrRebalanceInProgress)
	j2 := recv(t, joinAsync(c, JoinRequest{GroupID: "g", MemberID: leader.MemberID, ProtocolType: "consumer", Protocols: a.Protocols, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 2000}))
	if j2.Generation != 2 {
		t.Fatalf("rejoin: %+v", j2)
	}
	s := recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: leader.MemberID, Generation: 2, Assignments: map[string][]byte{leader.MemberID: []byte("y")}}))
	if s.Err != nil || string(s.Assignment) != "y" {
		t.Fatalf("generation 2 sync: %+v", s)
	}
}

func TestStatsCountCommitsRebalancesAndExpiries(t *testing.T) {
	var rebalances []time.Duration
	c, _ := newTestCoordinator(t, func(cfg *Config) {
		cfg.ObserveRebalance = func(r Rebalance) { rebalances = append(rebalances, r.Took) }
	})
	stableGroup(t, c, "g", 2)
	off := []CommitPartition{{Topic: "t", Offset: 1}, {Topic: "t", Partition: 1, Offset: 1}}
	if err := commitOffsets(c, CommitRequest{GroupID: "x", Generation: -1, Partitions: off}); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Committed != 2 || st.Rebalances != 1 || st.GroupsByState["Stable"] != 1 || st.Members != 2 || !st.Active {
		t.Fatalf("stats: %+v", st)
	}
	c.mu.RLock()
	g := c.classics["g"]
	c.mu.RUnlock()
	g.mu.Lock()
	n := len(rebalances)
	g.mu.Unlock()
	if n != 1 || rebalances[0] <= 0 {
		t.Errorf("rebalances observed: %v, want the one, with its length", rebalances)
	}

	now := c.now()
	if n, _ := c.ExpireOffsets(now+time.Hour.Milliseconds()*24*8, time.Hour.Milliseconds()*24*7); n == 0 {
		t.Fatal("nothing expired")
	}
	waitFor(t, func() bool { return c.Stats().OffsetsExpired == 2 }) // the 2 partitions of group x, once deleted
}

// Offsets whose deletion failed to commit are not counted as expired:
// they are still there, and the next retention pass tries again.
func TestOffsetsExpiredCountOnlyCommittedDeletions(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	now, week := c.now(), time.Hour.Milliseconds()*24*7
	// Partition 0 committed two weeks before partition 1: only it expires,
	// and the group stays.
	for p, at := range []int64{now - 2*week, now} {
		c.now = func() int64 { return at }
		off := []CommitPartition{{Topic: "t", Partition: int32(p), Offset: 1}}
		if err := commitOffsets(c, CommitRequest{GroupID: "x", Generation: -1, Partitions: off}); err != nil {
			t.Fatal(err)
		}
	}
	log.SetFault(errors.New("disk gone"))
	if n, _ := c.ExpireOffsets(now+1, week); n != 1 {
		t.Fatalf("%d offsets picked to expire, want 1", n)
	}
	time.Sleep(50 * time.Millisecond) // the failed deletion's wait ends
	if got := c.Stats().OffsetsExpired; got != 0 {
		t.Errorf("OffsetsExpired %d after the deletion failed, want 0", got)
	}
	log.SetFault(nil)
	c.ExpireOffsets(now+1, week)
	waitFor(t, func() bool { return c.Stats().OffsetsExpired == 1 })
}

// A rebalance that ends with no members (the group goes Empty) is not
// counted into the next one's length.
func TestObservedRebalanceStartsAfterAnEmptyGroup(t *testing.T) {
	var mu sync.Mutex
	var lengths []time.Duration
	c, _ := newTestCoordinator(t, func(cfg *Config) {
		cfg.ObserveRebalance = func(r Rebalance) { mu.Lock(); lengths = append(lengths, r.Took); mu.Unlock() }
	})
	ids, _ := stableGroup(t, c, "g", 1)
	if _, err := c.Leave(context.Background(), "g", []LeaveMember{{MemberID: ids[0]}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		d, err := c.Describe(context.Background(), "g")
		return err == nil && d.State == Empty.String()
	})
	const idle = 300 * time.Millisecond
	time.Sleep(idle)
	stableGroup(t, c, "g", 1)
	mu.Lock()
	defer mu.Unlock()
	if len(lengths) != 2 || lengths[1] >= idle {
		t.Errorf("rebalance lengths %v: the second counts the %v the group sat Empty", lengths, idle)
	}
}
