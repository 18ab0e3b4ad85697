package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKillNineKeepsCommitsAndAssignment runs a three-member group against
// the kcoord binary, commits offsets in the members' generation, kills the
// process with SIGKILL right after the last acknowledged commit and starts
// it again on the same data directory and ports. The committed offsets must
// all be there, and the group must come back Stable with the same members,
// protocol and assignments (invariant 4 of the design: a completed
// rebalance is committed before members get their assignment). DescribeGroups
// has no generation field, so the generation is checked the way members see
// it: Heartbeat, SyncGroup and OffsetCommit with the old generation succeed,
// and SyncGroup in Stable hands each member its stored assignment.
//
// The members are raw kmsg requests (JoinGroup, SyncGroup, OffsetCommit,
// Heartbeat) with a 60s session timeout, so nothing heartbeats, rejoins or
// leaves behind the test's back across the restart: what is checked after
// it is exactly what was persisted before.
func TestKillNineKeepsCommitsAndAssignment(t *testing.T) {
	t.Parallel()
	p := newProc(t) // builds the binary first, outside the test's time budget
	ctx := testContext(t, 55*time.Second)
	p.start(ctx)

	const topic, group = "kill9-topic", "kill9-group"
	adm := newAdmin(t, p.kafka)
	topicID := createTopic(ctx, t, adm, topic, groupPartitions)

	members := make([]*rawMember, 3)
	for i := range members {
		members[i] = &rawMember{clientID: fmt.Sprintf("raw-%d", i)}
	}
	joinRawGroup(ctx, t, p.kafka, group, topic, groupPartitions, members)
	for _, m := range members {
		if err := m.heartbeat(ctx, t, p.kafka, group); err != nil {
			t.Fatalf("%s heartbeat after sync: %v", m.clientID, err)
		}
	}
	before := describeRaw(ctx, t, p.kafka, group)
	if before.State != "Stable" || len(before.Members) != len(members) {
		t.Fatalf("before kill: group %s with %d members, want Stable with %d", before.State, len(before.Members), len(members))
	}

	// Several rounds of commits, each acknowledged; the last round's
	// offsets are what must survive.
	want := map[string]map[int32]committed{topic: {}}
	for round := range 5 {
		for i, m := range members {
			meta := fmt.Sprintf("%s-round-%d", m.clientID, round)
			offsets := make(map[int32]int64)
			for _, p := range m.partitions {
				offsets[p] = commitOffsetFor(i, p, round)
				want[topic][p] = committed{Offset: offsets[p], Metadata: meta}
			}
			if err := m.commit(ctx, t, p.kafka, group, topic, topicID, offsets, meta); err != nil {
				t.Fatalf("round %d: %s commit: %v", round, m.clientID, err)
			}
		}
	}
	p.kill9()
	t.Log("killed kcoord right after the last acknowledged commit")
	p.start(ctx)

	// Fresh clients: the old connections died with the process.
	adm = newAdmin(t, p.kafka)
	checkOffsets(ctx, t, adm, group, want)
	after := describeRaw(ctx, t, p.kafka, group)
	if err := sameGroup(before, after); err != nil {
		t.Fatalf("group changed across kill -9: %v\nbefore: %s\nafter:  %s", err, describeString(before), describeString(after))
	}
	for _, m := range members {
		if err := m.heartbeat(ctx, t, p.kafka, group); err != nil {
			t.Errorf("%s heartbeat with generation %d after restart: %v", m.clientID, m.generation, err)
		}
		assignment, err := m.sync(ctx, t, p.kafka, group, nil)
		if err != nil {
			t.Errorf("%s SyncGroup with generation %d after restart: %v", m.clientID, m.generation, err)
		} else if !bytes.Equal(assignment, m.assignment) {
			t.Errorf("%s SyncGroup after restart returned assignment %x, want %x", m.clientID, assignment, m.assignment)
		}
	}
	// Still the same generation: a commit in it is accepted, and nothing
	// above started a rebalance.
	for i, m := range members {
		offsets := make(map[int32]int64)
		meta := m.clientID + "-after-restart"
		for _, p := range m.partitions {
			offsets[p] = commitOffsetFor(i, p, 9)
			want[topic][p] = committed{Offset: offsets[p], Metadata: meta}
		}
		if err := m.commit(ctx, t, p.kafka, group, topic, topicID, offsets, meta); err != nil {
			t.Errorf("%s commit with generation %d after restart: %v", m.clientID, m.generation, err)
		}
	}
	checkOffsets(ctx, t, adm, group, want)
	if err := sameGroup(before, describeRaw(ctx, t, p.kafka, group)); err != nil {
		t.Errorf("group changed after heartbeats, syncs and commits in the old generation: %v", err)
	}
	for _, m := range members {
		m.leave(ctx, t, p.kafka, group)
	}
}

// TestKillNineKeepsAdminCommits: offsets committed by an admin (generation
// -1, no members: kadm.CommitOffsets) to several empty groups survive a
// SIGKILL right after the last acknowledgement.
func TestKillNineKeepsAdminCommits(t *testing.T) {
	t.Parallel()
	p := newProc(t) // builds the binary first, outside the test's time budget
	ctx := testContext(t, 55*time.Second)
	p.start(ctx)
	adm := newAdmin(t, p.kafka)
	const topic = "kill9-admin-topic"
	createTopic(ctx, t, adm, topic, groupPartitions)

	// Enough groups to land on most of the 8 shards.
	groups := make([]string, 16)
	want := make(map[string]map[string]map[int32]committed)
	for i := range groups {
		groups[i] = fmt.Sprintf("kill9-admin-%d", i)
		want[groups[i]] = map[string]map[int32]committed{topic: {}}
	}
	for round := range 5 {
		for i, g := range groups {
			offs := make(kadm.Offsets)
			for p := range int32(groupPartitions) {
				o := kadm.Offset{Topic: topic, Partition: p, At: commitOffsetFor(i, p, round), LeaderEpoch: -1, Metadata: fmt.Sprintf("admin-%d", round)}
				offs.Add(o)
				want[g][topic][p] = committed{Offset: o.At, Metadata: o.Metadata}
			}
			if err := adm.CommitAllOffsets(ctx, g, offs); err != nil {
				t.Fatalf("round %d: commit to %s: %v", round, g, err)
			}
		}
	}
	p.kill9()
	t.Log("killed kcoord right after the last acknowledged commit")
	p.start(ctx)

	adm = newAdmin(t, p.kafka)
	for _, g := range groups {
		checkOffsets(ctx, t, adm, g, want[g])
	}
	described, err := adm.DescribeGroups(ctx, groups...)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	for _, g := range groups {
		d := described[g]
		if d.Err != nil || d.State != "Empty" || len(d.Members) != 0 {
			t.Errorf("group %s after restart: state %q, %d members, err %v; want Empty with offsets", g, d.State, len(d.Members), d.Err)
		}
	}
}

// TestKillNineUnderCommitLoad kills kcoord while admin commits are in
// flight: writers each commit rising offsets to their own group, one at a
// time, recording the last acknowledged and the last sent offset. After the
// restart each group's offset must be the last acknowledged one, or the one
// in flight at the kill (it may have been applied without its answer
// arriving), never older and never anything else.
func TestKillNineUnderCommitLoad(t *testing.T) {
	t.Parallel()
	p := newProc(t) // builds the binary first, outside the test's time budget
	ctx := testContext(t, 55*time.Second)
	p.start(ctx)
	adm := newAdmin(t, p.kafka)
	const topic, writers = "kill9-load-topic", 16
	createTopic(ctx, t, adm, topic, 1)

	type progress struct {
		acked, sent int64 // -1: none
		err         error
	}
	results := make([]progress, writers)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	for w := range writers {
		// One client per writer, failing fast once the process is gone.
		cl := newClient(t, p.kafka, kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))
		wadm := kadm.NewClient(cl)
		group := fmt.Sprintf("kill9-load-%d", w)
		wg.Go(func() {
			r := progress{acked: -1, sent: -1}
			defer func() { results[w] = r }()
			for o := int64(1); loadCtx.Err() == nil; o++ {
				r.sent = o
				offs := make(kadm.Offsets)
				offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: o, LeaderEpoch: -1})
				if err := wadm.CommitAllOffsets(loadCtx, group, offs); err != nil {
					r.err = err
					return
				}
				r.acked = o
			}
		})
	}
	// Let the load run, then kill without warning.
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Second):
	}
	p.kill9()
	t.Log("killed kcoord under commit load")
	stopLoad()
	wg.Wait()

	p.start(ctx)
	adm = newAdmin(t, p.kafka)
	total := int64(0)
	for w, r := range results {
		group := fmt.Sprintf("kill9-load-%d", w)
		total += max(r.acked, 0)
		if r.acked < 1 {
			t.Errorf("%s: no commit acknowledged in a second of load (err %v)", group, r.err)
			continue
		}
		var got int64
		waitFor(ctx, t, "offset of "+group, func(ctx context.Context) error {
			offs, err := fetchOffsets(ctx, adm, group)
			if err != nil {
				return err
			}
			c, ok := offs[topic][0]
			if !ok {
				return fmt.Errorf("no offset for %s/0", topic)
			}
			got = c.Offset
			return nil
		})
		if got != r.acked && got != r.sent {
			t.Errorf("%s: offset %d after restart; last acknowledged %d, last sent %d", group, got, r.acked, r.sent)
		}
	}
	t.Logf("%d commits acknowledged before the kill", total)
}

// TestKillNineLiveFranzGoGroup kills kcoord under a running three-member
// franz-go group and starts it again at once: the members, still polling
// and heartbeating, must carry on in the same generation, with the same
// member ids and assignments, without any rebalance callback (design
// invariants 4 and 6: the completed rebalance is in the FSM and a new
// leader gives members a fresh session timeout); their commits in that
// generation keep working.
func TestKillNineLiveFranzGoGroup(t *testing.T) {
	t.Parallel()
	p := newProc(t) // builds the binary first, outside the test's time budget
	ctx := testContext(t, 55*time.Second)
	p.start(ctx)
	const topic, group, protocol = "kill9-live-topic", "kill9-live-group", "range"
	adm := newAdmin(t, p.kafka)
	createTopic(ctx, t, adm, topic, groupPartitions)

	members := make([]*kgoMember, 3)
	for i := range members {
		members[i] = startKgoMember(ctx, t, p.kafka, group, topic, i, kgo.RangeBalancer(),
			kgo.SessionTimeout(10*time.Second), kgo.RetryTimeout(20*time.Second))
	}
	waitFor(ctx, t, "three franz-go members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, protocol, kgoView(members))
	})
	checkOffsets(ctx, t, adm, group, commitOwned(ctx, t, members, topic, 0))
	before := memberStates(members)
	describedBefore := describeRaw(ctx, t, p.kafka, group)

	p.kill9()
	t.Log("killed kcoord under a live franz-go group")
	p.start(ctx)
	adm = newAdmin(t, p.kafka)
	// Several heartbeat intervals, so every member has heartbeated against
	// the new process (kgo retries a heartbeat that found no server).
	time.Sleep(10 * heartbeatInterval)
	waitFor(ctx, t, "the group to be described again", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, protocol, kgoView(members))
	})
	if after := memberStates(members); !slices.EqualFunc(before, after, memberState.same) {
		t.Errorf("members changed across kill -9 (a rebalance or a lost session):\nbefore %+v\nafter  %+v", before, after)
	}
	if err := sameGroup(describedBefore, describeRaw(ctx, t, p.kafka, group)); err != nil {
		t.Errorf("group changed across kill -9: %v", err)
	}
	checkOffsets(ctx, t, adm, group, commitOwned(ctx, t, members, topic, 1))
}

// rawMember is a consumer group member driven by hand-built requests.
type rawMember struct {
	clientID   string
	memberID   string
	generation int32
	protocol   string
	leader     bool
	partitions []int32 // assigned partitions of the one topic
	assignment []byte  // the assignment bytes SyncGroup returned
	cl         *kgo.Client
	clAddr     string
}

const rawSessionTimeout = 60 * time.Second

// client returns the member's kgo client to addr (its own, so requests
// carry its client id), made again after a restart.
func (m *rawMember) client(t testing.TB, addr string) *kgo.Client {
	if m.cl == nil || m.clAddr != addr {
		m.cl, m.clAddr = newClient(t, addr, kgo.ClientID(m.clientID)), addr
	}
	return m.cl
}

// joinRawGroup runs one complete rebalance of members (all at once, so
// they land in the same generation), with the first member's range
// assignment, and fills each member's id, generation and assignment.
func joinRawGroup(ctx context.Context, t *testing.T, addr, group, topic string, n int32, members []*rawMember) {
	t.Helper()
	meta := (&kmsg.ConsumerMemberMetadata{Version: 0, Topics: []string{topic}}).AppendTo(nil)
	newJoin := func(memberID string) *kmsg.JoinGroupRequest {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = group, memberID, "consumer"
		req.SessionTimeoutMillis = int32(rawSessionTimeout / time.Millisecond)
		req.RebalanceTimeoutMillis = int32(rawSessionTimeout / time.Millisecond)
		proto := kmsg.NewJoinGroupRequestProtocol()
		proto.Name, proto.Metadata = "range", meta
		req.Protocols = []kmsg.JoinGroupRequestProtocol{proto}
		return req
	}
	// JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED with the id.
	for _, m := range members {
		resp, err := newJoin("").RequestWith(ctx, m.client(t, addr))
		if err != nil {
			t.Fatalf("%s first join: %v", m.clientID, err)
		}
		if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
			t.Fatalf("%s first join: error %v, member id %q; want MEMBER_ID_REQUIRED with an id", m.clientID, kerr.ErrorForCode(resp.ErrorCode), resp.MemberID)
		}
		m.memberID = resp.MemberID
	}
	joins := make([]*kmsg.JoinGroupResponse, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { joins[i], errs[i] = newJoin(m.memberID).RequestWith(ctx, m.cl) })
	}
	wg.Wait()
	var leader *kmsg.JoinGroupResponse
	for i, m := range members {
		if errs[i] != nil {
			t.Fatalf("%s join: %v", m.clientID, errs[i])
		}
		r := joins[i]
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("%s join: %v", m.clientID, err)
		}
		if r.MemberID != m.memberID || r.Generation != joins[0].Generation || r.Protocol == nil || *r.Protocol != "range" {
			t.Fatalf("%s join: member %q generation %d protocol %v; want member %q, generation %d, range", m.clientID, r.MemberID, r.Generation, r.Protocol, m.memberID, joins[0].Generation)
		}
		m.generation, m.protocol, m.leader = r.Generation, *r.Protocol, r.LeaderID == m.memberID
		if m.leader {
			leader = r
		}
	}
	if leader == nil {
		t.Fatalf("no member was told it leads (leader id %q)", joins[0].LeaderID)
	}
	if len(leader.Members) != len(members) {
		t.Fatalf("leader's JoinGroup lists %d members, want %d (did the members land in different generations?)", len(leader.Members), len(members))
	}
	// Range over member ids, as Kafka's RangeAssignor does.
	ids := make([]string, 0, len(members))
	for _, lm := range leader.Members {
		ids = append(ids, lm.MemberID)
	}
	slices.Sort(ids)
	plan := make(map[string][]byte)
	wantParts := make(map[string][]int32)
	per, extra := int(n)/len(ids), int(n)%len(ids)
	next := int32(0)
	for i, id := range ids {
		cnt := per
		if i < extra {
			cnt++
		}
		var ps []int32
		for range cnt {
			ps = append(ps, next)
			next++
		}
		wantParts[id] = ps
		a := kmsg.ConsumerMemberAssignment{Version: 0, Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: ps}}}
		plan[id] = a.AppendTo(nil)
	}
	assignments := make([][]byte, len(members))
	for i, m := range members {
		var groupPlan map[string][]byte
		if m.leader {
			groupPlan = plan
		}
		wg.Go(func() { assignments[i], errs[i] = m.sync(ctx, t, addr, group, groupPlan) })
	}
	wg.Wait()
	for i, m := range members {
		if errs[i] != nil {
			t.Fatalf("%s sync: %v", m.clientID, errs[i])
		}
		if !bytes.Equal(assignments[i], plan[m.memberID]) {
			t.Fatalf("%s sync: assignment %x, want %x", m.clientID, assignments[i], plan[m.memberID])
		}
		m.assignment, m.partitions = assignments[i], wantParts[m.memberID]
	}
}

// sync sends SyncGroup in the member's generation; plan is the leader's
// assignment (nil for followers and for a re-sync).
func (m *rawMember) sync(ctx context.Context, t testing.TB, addr, group string, plan map[string][]byte) ([]byte, error) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.Generation, req.MemberID = group, m.generation, m.memberID
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(m.protocol)
	for id, a := range plan {
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID, sa.MemberAssignment = id, a
		req.GroupAssignment = append(req.GroupAssignment, sa)
	}
	resp, err := req.RequestWith(ctx, m.client(t, addr))
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	return resp.MemberAssignment, nil
}

func (m *rawMember) heartbeat(ctx context.Context, t testing.TB, addr, group string) error {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation, req.MemberID = group, m.generation, m.memberID
	resp, err := req.RequestWith(ctx, m.client(t, addr))
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// commit sends one OffsetCommit in the member's generation and returns the
// first error, per-partition ones included.
func (m *rawMember) commit(ctx context.Context, t testing.TB, addr, group, topic string, topicID kadm.TopicID, offsets map[int32]int64, meta string) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, m.generation, m.memberID
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o, -1, kmsg.StringPtr(meta)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	resp, err := req.RequestWith(ctx, m.client(t, addr))
	if err != nil {
		return err
	}
	n := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			n++
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	if n != len(offsets) {
		return fmt.Errorf("commit answered %d partitions, sent %d", n, len(offsets))
	}
	return nil
}

func (m *rawMember) leave(ctx context.Context, t testing.TB, addr, group string) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = group, m.memberID
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m.memberID
	req.Members = []kmsg.LeaveGroupRequestMember{lm}
	if resp, err := req.RequestWith(ctx, m.client(t, addr)); err != nil {
		t.Logf("%s leave: %v", m.clientID, err)
	} else if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Logf("%s leave: %v", m.clientID, err)
	}
}

// describeRaw describes one group with a raw DescribeGroups request, so
// metadata and assignments compare as bytes.
func describeRaw(ctx context.Context, t testing.TB, addr, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	cl := newClient(t, addr)
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("describe %s: %v", group, err)
	}
	if len(resp.Groups) != 1 {
		t.Fatalf("describe %s: %d groups in response", group, len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		t.Fatalf("describe %s: %v", group, err)
	}
	return g
}

// sameGroup compares two descriptions: state, protocol, and the members
// (id, instance id, client id and host, metadata and assignment bytes).
func sameGroup(a, b kmsg.DescribeGroupsResponseGroup) error {
	if a.State != b.State || a.ProtocolType != b.ProtocolType || a.Protocol != b.Protocol {
		return fmt.Errorf("state/protocol %s/%s/%s became %s/%s/%s", a.State, a.ProtocolType, a.Protocol, b.State, b.ProtocolType, b.Protocol)
	}
	key := func(m kmsg.DescribeGroupsResponseGroupMember) string { return m.MemberID }
	am, bm := slices.Clone(a.Members), slices.Clone(b.Members)
	slices.SortFunc(am, func(x, y kmsg.DescribeGroupsResponseGroupMember) int { return strings.Compare(key(x), key(y)) })
	slices.SortFunc(bm, func(x, y kmsg.DescribeGroupsResponseGroupMember) int { return strings.Compare(key(x), key(y)) })
	if len(am) != len(bm) {
		return fmt.Errorf("%d members became %d", len(am), len(bm))
	}
	for i := range am {
		x, y := am[i], bm[i]
		switch {
		case x.MemberID != y.MemberID:
			return fmt.Errorf("member %s became %s", x.MemberID, y.MemberID)
		case !equalStrPtr(x.InstanceID, y.InstanceID):
			return fmt.Errorf("member %s: instance id changed", x.MemberID)
		case x.ClientID != y.ClientID || x.ClientHost != y.ClientHost:
			return fmt.Errorf("member %s: client %s@%s became %s@%s", x.MemberID, x.ClientID, x.ClientHost, y.ClientID, y.ClientHost)
		case !bytes.Equal(x.ProtocolMetadata, y.ProtocolMetadata):
			return fmt.Errorf("member %s: metadata %x became %x", x.MemberID, x.ProtocolMetadata, y.ProtocolMetadata)
		case !bytes.Equal(x.MemberAssignment, y.MemberAssignment):
			return fmt.Errorf("member %s: assignment %x became %x", x.MemberID, x.MemberAssignment, y.MemberAssignment)
		}
	}
	return nil
}

func describeString(g kmsg.DescribeGroupsResponseGroup) string {
	s := fmt.Sprintf("%s %s/%s [", g.State, g.ProtocolType, g.Protocol)
	for _, m := range g.Members {
		s += fmt.Sprintf(" %s(%s@%s assignment %x)", m.MemberID, m.ClientID, m.ClientHost, m.MemberAssignment)
	}
	return s + " ]"
}

func equalStrPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
