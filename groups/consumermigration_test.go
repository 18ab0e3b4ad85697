package groups

// Cases of classic members, upgrades and downgrades found in review; each
// failed before its fix.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
)

// stableClassicGroup makes a Stable classic group "g" of n members on topic
// orders (6 partitions), static when instances are given, and returns the
// join results.
func stableClassicGroup(t *testing.T, c *Coordinator, instances ...string) []JoinResult {
	t.Helper()
	meta := kmsg.ConsumerMemberMetadata{Version: 1, Topics: []string{"orders"}}
	var chans []<-chan JoinResult
	for _, inst := range instances {
		chans = append(chans, joinAsync(c, JoinRequest{GroupID: "g", InstanceID: inst, ClientID: "sarama", ClientHost: "/127.0.0.1", ProtocolType: "consumer",
			Protocols: []fsm.Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}}, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000}))
		time.Sleep(5 * time.Millisecond)
	}
	var rs []JoinResult
	for _, ch := range chans {
		r := recv(t, ch)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		rs = append(rs, r)
	}
	assign := func(parts ...int32) []byte {
		a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "orders", Partitions: parts}}}
		return a.AppendTo(nil)
	}
	assignments := map[string][]byte{}
	for i, r := range rs {
		var parts []int32
		for p := int32(i); p < 6; p += int32(len(rs)) {
			parts = append(parts, p)
		}
		assignments[r.MemberID] = assign(parts...)
	}
	var syncs []<-chan SyncResult
	for i, r := range rs {
		req := SyncRequest{GroupID: "g", MemberID: r.MemberID, InstanceID: instances[i], Generation: r.Generation}
		if r.MemberID == r.Leader {
			req.Assignments = assignments
		}
		syncs = append(syncs, syncAsync(c, req))
	}
	for _, ch := range syncs {
		if r := recv(t, ch); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return rs
}

// Kafka 4.x (getOrMaybeSubscribeStaticConsumerGroupMember) replaces
// an existing static member without the UNRELEASED_INSTANCE_ID check when
// either it or the newcomer uses the classic protocol. A rolling upgrade of
// static classic members to group.protocol=consumer restarts each process
// with the same group.instance.id; the dead classic member never sent a
// leave. kcoord refuses the newcomer with UNRELEASED_INSTANCE_ID (fatal to
// the Java client) — and, since the upgrade was already written, leaves
// the group upgraded even though the join that asked for it was refused.
func TestAConsumerStaticMemberTakesOverAClassicOnesInstanceID(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 6)
	stableClassicGroup(t, c, "i1", "i2")

	inst := "i1"
	a := newConsumerClient(t, c, "g", "new-i1", "orders")
	a.instance = &inst
	err := a.beat()
	if err != nil {
		_, stillClassic := log.FSM.Group("g")
		_, consumer := log.FSM.ConsumerGroup("g")
		t.Fatalf("a consumer-protocol static member taking over a classic static member's instance id: %v (Kafka replaces it); "+
			"classic group stored: %v, consumer group stored: %v", err, stillClassic, consumer)
	}
}

// The other direction: a classic static member rejoining with a new
// member id while a consumer-protocol member holds its instance id is
// refused UNRELEASED_INSTANCE_ID; Kafka replaces (useClassicProtocol=true
// skips throwIfInstanceIdIsUnreleased). A rollback of a consumer-protocol
// deployment to the classic protocol hits it.
func TestAClassicStaticMemberTakesOverAConsumerOnesInstanceID(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 6)
	inst := "i1"
	a := newConsumerClient(t, c, "g", "a", "orders")
	a.instance = &inst
	b := newConsumerClient(t, c, "g", "b", "orders")
	converge(t, c, "g", a, b)
	meta := kmsg.ConsumerMemberMetadata{Version: 1, Topics: []string{"orders"}}
	res := c.Join(context.Background(), JoinRequest{GroupID: "g", InstanceID: "i1", ClientID: "java", ClientHost: "/127.0.0.1", ProtocolType: "consumer",
		Protocols: []fsm.Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}}, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, RequireKnownMemberID: true})
	if res.Err != nil {
		t.Fatalf("a classic static member taking over a consumer-protocol static member's instance id: %v (Kafka replaces it)", res.Err)
	}
}

// A ConsumerGroupHeartbeat join that upgrades a classic group but is
// then refused (here group.consumer.max.size: the classic group fits, the
// joiner does not) leaves the group upgraded. Kafka writes the conversion
// and the join in one batch, so a refused join leaves the classic group.
// docs/architecture.md says "a refused heartbeat changes nothing".
func TestARefusedJoinDoesNotUpgrade(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, func(cfg *Config) { cfg.ConsumerMaxSize = 2 })
	topics.Put("orders", 6)
	stableClassicGroup(t, c, "", "")
	a := newConsumerClient(t, c, "g", "a", "orders")
	err := a.beat()
	wantErr(t, err, ErrGroupMaxSizeReached)
	time.Sleep(20 * time.Millisecond)
	if _, ok := log.FSM.Group("g"); !ok {
		t.Fatal("a refused join upgraded the classic group anyway (the classic group is no longer stored)")
	}
}

// The online upgrade's write failing (an enqueue timeout, the
// coordinator still leading) makes the group stale; reloadConsumer finds
// no stored consumer group and deletes the in-memory one, but the classic
// group it had replaced in memory is never put back. The FSM still holds
// the classic group with its members; they get UNKNOWN_MEMBER_ID.
func TestAFailedUpgradeWriteKeepsTheClassicGroup(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 6)
	rs := stableClassicGroup(t, c, "", "")
	log.SetFault(ErrTimeout)
	a := newConsumerClient(t, c, "g", "a", "orders")
	if err := a.beat(); err == nil {
		t.Fatal("the join succeeded with every write failing")
	}
	log.SetFault(nil)
	if _, ok := log.FSM.Group("g"); !ok {
		t.Fatal("precondition: the classic group should still be stored")
	}
	var err error
	for range 50 {
		time.Sleep(20 * time.Millisecond)
		err = c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: rs[0].MemberID, Generation: rs[0].Generation})
		if !errors.Is(err, ErrLoadInProgress) {
			break
		}
	}
	if err != nil {
		t.Fatalf("a classic member of the stored classic group after a failed upgrade write: %v", err)
	}
}

// memberTimer.stop does not invalidate the token, so a join or sync
// timer (still == nil) that fired while the request that stops it held the
// lock fences the member afterwards: a SyncGroup arriving right at its
// deadline is answered and the member is then fenced.
func TestAStoppedTimerThatAlreadyFiredDoesNotFence(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 6)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	s := &classicClient{t: t, c: c, group: "g", topics: []string{"orders"}}
	s.joinAndSync()
	for range 5 {
		a.mustBeat()
		s.heartbeat()
	}
	g := c.consumerOf("g")
	g.mu.Lock()
	m := g.members[s.id]
	g.arm(&m.sync, m, time.Millisecond, nil, "test: the sync deadline") // as scheduleSync does
	time.Sleep(30 * time.Millisecond)                                   // it fires and waits for the lock
	if _, err := g.classicSync(SyncRequest{GroupID: "g", MemberID: s.id, Generation: s.generation}, c.topicsView()); err != nil {
		g.mu.Unlock()
		t.Fatalf("sync: %v", err)
	}
	g.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	g.mu.Lock()
	_, still := g.members[s.id]
	g.mu.Unlock()
	if !still {
		t.Fatal("a member whose SyncGroup stopped its sync timer was fenced by that timer")
	}
}

// A classic request that looked the id up as a consumer group just
// before the downgrade replaced it gets UNKNOWN_MEMBER_ID (lookup's
// takeOverConsumer finds the consumer group closed and answers "no group"
// instead of looking again), and a commit gets GROUP_ID_NOT_FOUND
// (lookupConsumer finds a classic group with members).
func TestClassicRequestsDuringTheDowngradeFindTheClassicGroup(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 4)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	s := &classicClient{t: t, c: c, group: "g", topics: []string{"orders"}}
	s.joinAndSync()
	for range 5 {
		a.mustBeat()
		s.heartbeat()
	}
	g := c.consumerOf("g")
	g.mu.Lock() // the downgrade is being computed
	hb := make(chan error, 1)
	go func() {
		hb <- c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: s.id, Generation: s.generation})
	}()
	cm := make(chan error, 1)
	go func() {
		cm <- commitOffsets(c, CommitRequest{Version: 5, GroupID: "g", MemberID: s.id, Generation: s.generation,
			Partitions: []CommitPartition{{Topic: "orders", Partition: 0, Offset: 1, LeaderEpoch: -1}}})
	}()
	time.Sleep(50 * time.Millisecond)
	pw := g.fenceAndEnqueue(g.members[a.id]) // a leaves: the downgrade
	g.mu.Unlock()
	if err := pw.await(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.consumerOf("g") != nil {
		t.Fatal("precondition: no downgrade")
	}
	herr, cerr := recv(t, hb), recv(t, cm)
	if errors.Is(herr, ErrUnknownMemberID) || errors.Is(cerr, ErrGroupIDNotFound) {
		t.Fatalf("during the downgrade a classic member's heartbeat got %v and its commit %v (it is a member of the classic group)", herr, cerr)
	}
}

// The downgrade stores what members hold, not their targets (Kafka
// stores the targets): the downgrade stores each classic member's target as its
// assignment, not what it holds. A re-upgrade (a consumer-protocol member
// joining before the classic rebalance finished) reads those back as the
// members' assigned partitions, so a partition still held by one member
// but targeted to another is handed to the other at once.
func TestADowngradeThenAnUpgradeNeverSharesAPartition(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 4)
	cm := newConsumerClient(t, c, "g", "c", "orders")
	converge(t, c, "g", cm)
	a := &classicClient{t: t, c: c, group: "g", topics: []string{"orders"}}
	a.joinAndSync()
	for range 5 {
		cm.mustBeat()
		a.heartbeat()
	}
	assertMixedOwnership(t, topics, []*consumerClient{cm}, []*classicClient{a})
	t.Logf("before b: c owns %v, a owns %v", cm.owned, a.owned)
	b := &classicClient{t: t, c: c, group: "g", topics: []string{"orders"}}
	b.joinAndSync() // a new target: a must give something up; a does not heartbeat from here
	cm.mustBeat()
	cm.mustLeave(leaveMemberEpoch)
	if c.consumerOf("g") != nil {
		t.Fatal("precondition: no downgrade")
	}
	d := newConsumerClient(t, c, "g", "d", "orders")
	d.mustBeat() // the upgrade
	for range 3 {
		d.mustBeat()
		b.heartbeat()
		d.mustBeat()
		t.Logf("d owns %v, a (silent) owns %v, b owns %v", d.owned, a.owned, b.owned)
		assertMixedOwnership(t, topics, []*consumerClient{d}, []*classicClient{a, b})
	}
}
