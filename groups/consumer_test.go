package groups

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
)

// consumerClient is a consumer-protocol member as a client runs it: it
// sends what it owns on every heartbeat and takes an assignment at once
// (revoking and consuming instantly), as the fastest real client would.
type consumerClient struct {
	t        *testing.T
	c        *Coordinator
	group    string
	id       string
	instance *string
	topics   []string
	epoch    int32
	owned    []TopicIDPartitions
}

func newConsumerClient(t *testing.T, c *Coordinator, group, id string, topics ...string) *consumerClient {
	return &consumerClient{t: t, c: c, group: group, id: id, topics: topics}
}

// request is the client's next heartbeat: a full one when joining.
func (cl *consumerClient) request() ConsumerHeartbeatRequest {
	req := ConsumerHeartbeatRequest{Version: 1, GroupID: cl.group, MemberID: cl.id, MemberEpoch: cl.epoch,
		InstanceID: cl.instance, RebalanceTimeoutMs: -1, ClientID: "client-" + cl.id, ClientHost: "/127.0.0.1",
		Owned: append([]TopicIDPartitions{}, cl.owned...)}
	if cl.epoch == 0 {
		req.RebalanceTimeoutMs = 30000
		req.SubscribedTopicNames = append([]string{}, cl.topics...)
		req.Owned = []TopicIDPartitions{}
	}
	return req
}

// beat sends one heartbeat and applies the answer.
func (cl *consumerClient) beat() error {
	res, err := cl.c.ConsumerHeartbeat(context.Background(), cl.request())
	if err != nil {
		return err
	}
	cl.id, cl.epoch = res.MemberID, res.MemberEpoch
	if res.HasAssignment {
		cl.owned = res.Assignment
	}
	return nil
}

// mustLeave sends a leave at epoch (-1, or -2 for a static member's
// temporary leave).
func (cl *consumerClient) mustLeave(epoch int32) {
	cl.t.Helper()
	req := cl.request()
	req.MemberEpoch = epoch
	if _, err := cl.c.ConsumerHeartbeat(context.Background(), req); err != nil {
		cl.t.Fatalf("member %s leaving at %d: %v", cl.id, epoch, err)
	}
}

func (cl *consumerClient) mustBeat() {
	cl.t.Helper()
	if err := cl.beat(); err != nil {
		cl.t.Fatalf("member %s: %v", cl.id, err)
	}
}

// converge heartbeats every client in turn until the group is Stable,
// checking after every answer that no partition is owned twice.
func converge(t *testing.T, c *Coordinator, group string, clients ...*consumerClient) {
	t.Helper()
	for round := 0; round < 20; round++ {
		for _, cl := range clients {
			cl.mustBeat()
			assertNoPartitionSharedBy(t, clients...)
		}
		if d, err := c.DescribeConsumer(context.Background(), group); err == nil && d.State == ConsumerStable && allAtEpoch(d, clients) {
			return
		}
	}
	d, err := c.DescribeConsumer(context.Background(), group)
	t.Fatalf("group %s did not settle: %+v %v", group, d, err)
}

// allAtEpoch reports whether every client knows the epoch the group
// gives it.
func allAtEpoch(d ConsumerGroupDescription, clients []*consumerClient) bool {
	for _, cl := range clients {
		found := false
		for _, m := range d.Members {
			if m.MemberID == cl.id {
				found = m.MemberEpoch == cl.epoch && len(m.Target) == len(m.Assignment) && countNamed(m.Assignment) == countOwned(cl.owned)
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func countNamed(ps []NamedTopicPartitions) (n int) {
	for _, p := range ps {
		n += len(p.Partitions)
	}
	return n
}

func countOwned(ps []TopicIDPartitions) (n int) {
	for _, p := range ps {
		n += len(p.Partitions)
	}
	return n
}

func assertNoPartitionSharedBy(t *testing.T, clients ...*consumerClient) {
	t.Helper()
	owner := map[string]string{}
	for _, cl := range clients {
		for _, tp := range cl.owned {
			for _, p := range tp.Partitions {
				key := fmt.Sprintf("%x/%d", tp.TopicID, p)
				if o, ok := owner[key]; ok {
					t.Fatalf("partition %s owned by %s and %s", key, o, cl.id)
				}
				owner[key] = cl.id
			}
		}
	}
}

// newConsumerTestCoordinator is newTestCoordinator with a topic registry.
func newConsumerTestCoordinator(t *testing.T, mutate func(*Config)) (*Coordinator, *MemLog, *MemTopics) {
	t.Helper()
	topics := NewMemTopics()
	c, log := newTestCoordinator(t, func(cfg *Config) {
		cfg.Topics = topics
		if mutate != nil {
			mutate(cfg)
		}
	})
	return c, log, topics
}

// TestConsumerGroupSharesEveryPartitionOnce: three members of a
// 12-partition topic end with four partitions each, each partition owned
// by exactly one of them at every step, and the group is Stable at one
// epoch; when one leaves, the other two cover all twelve.
func TestConsumerGroupSharesEveryPartitionOnce(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 12)
	a, b, d := newConsumerClient(t, c, "g", "a", "orders"), newConsumerClient(t, c, "g", "b", "orders"), newConsumerClient(t, c, "g", "d", "orders")
	converge(t, c, "g", a)
	if countOwned(a.owned) != 12 {
		t.Fatalf("the only member owns %d partitions", countOwned(a.owned))
	}
	converge(t, c, "g", a, b, d)
	for _, cl := range []*consumerClient{a, b, d} {
		if n := countOwned(cl.owned); n != 4 {
			t.Fatalf("member %s owns %d partitions, want 4", cl.id, n)
		}
	}
	desc, err := c.DescribeConsumer(context.Background(), "g")
	if err != nil || desc.Epoch != 3 || desc.AssignmentEpoch != 3 || desc.AssignorName != "uniform" || len(desc.Members) != 3 {
		t.Fatalf("described: %+v %v", desc, err)
	}

	// d leaves for good; a and b take its partitions.
	leave := d.request()
	leave.MemberEpoch = leaveMemberEpoch
	res, err := c.ConsumerHeartbeat(context.Background(), leave)
	if err != nil || res.MemberEpoch != leaveMemberEpoch {
		t.Fatalf("leave: %+v %v", res, err)
	}
	converge(t, c, "g", a, b)
	if countOwned(a.owned)+countOwned(b.owned) != 12 {
		t.Fatalf("after a leave the members own %d and %d partitions", countOwned(a.owned), countOwned(b.owned))
	}
	if err := d.beat(); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("the departed member's heartbeat: %v, want ErrUnknownMemberID", err)
	}
}

// TestConsumerGroupSurvivesCoordinatorFailover: a new coordinator loaded
// from the replicated state continues every member at its epoch, so a
// failover fences nobody and starts no rebalance.
func TestConsumerGroupSurvivesCoordinatorFailover(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 6)
	a, b := newConsumerClient(t, c, "g", "a", "orders"), newConsumerClient(t, c, "g", "b", "orders")
	converge(t, c, "g", a, b)
	before, _ := c.DescribeConsumer(context.Background(), "g")

	c.Deactivate()
	cfg := c.cfg
	next, err := NewCoordinator(cfg, 0, log, log.FSM)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Activate(log.SetLeader(true)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(next.Deactivate)
	a.c, b.c = next, next
	epochA, epochB := a.epoch, b.epoch
	a.mustBeat()
	b.mustBeat()
	if a.epoch != epochA || b.epoch != epochB {
		t.Fatalf("epochs moved across the failover: a %d→%d, b %d→%d", epochA, a.epoch, epochB, b.epoch)
	}
	after, err := next.DescribeConsumer(context.Background(), "g")
	if err != nil || after.Epoch != before.Epoch || after.State != ConsumerStable {
		t.Fatalf("after failover: %+v %v (before %+v)", after, err, before)
	}
}

// TestStaticMemberGetsItsPartitionsBackWithoutARebalance: a static member
// that leaves for a while (epoch -2) keeps its partitions reserved; its
// successor with the same instance id gets them back at the same group
// epoch, and another member cannot take the instance id meanwhile.
func TestStaticMemberGetsItsPartitionsBackWithoutARebalance(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 4)
	a := newConsumerClient(t, c, "g", "a", "orders")
	s := newConsumerClient(t, c, "g", "s1", "orders")
	s.instance = strp("instance-1")
	converge(t, c, "g", a, s)
	held := s.owned
	before, _ := c.DescribeConsumer(context.Background(), "g")

	leave := s.request()
	leave.MemberEpoch = leaveStaticMemberEpoch
	if res, err := c.ConsumerHeartbeat(context.Background(), leave); err != nil || res.MemberEpoch != leaveStaticMemberEpoch {
		t.Fatalf("static leave: %+v %v", res, err)
	}
	a.mustBeat()
	if countOwned(a.owned) != 2 {
		t.Fatalf("the other member took the absent static member's partitions: owns %d", countOwned(a.owned))
	}

	restarted := newConsumerClient(t, c, "g", "s2", "orders")
	restarted.instance = strp("instance-1")
	restarted.mustBeat()
	if fmt.Sprint(restarted.owned) != fmt.Sprint(held) {
		t.Fatalf("the restarted static member got %v, want its predecessor's %v", restarted.owned, held)
	}
	after, _ := c.DescribeConsumer(context.Background(), "g")
	if after.Epoch != before.Epoch {
		t.Fatalf("the group epoch moved from %d to %d on a static member's restart", before.Epoch, after.Epoch)
	}

	thief := newConsumerClient(t, c, "g", "s3", "orders")
	thief.instance = strp("instance-1")
	if err := thief.beat(); !errors.Is(err, ErrUnreleasedInstanceID) {
		t.Fatalf("joining with a held instance id: %v, want ErrUnreleasedInstanceID", err)
	}
}

// TestConsumerGroupMemberIsFencedWhenItsSessionExpires: a member that
// stops heartbeating loses its partitions to the others.
func TestConsumerGroupMemberIsFencedWhenItsSessionExpires(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, func(cfg *Config) {
		cfg.ConsumerMinSessionTimeout, cfg.ConsumerSessionTimeout = 100*time.Millisecond, 300*time.Millisecond
		cfg.ConsumerMinHeartbeatInterval, cfg.ConsumerHeartbeatInterval = 10*time.Millisecond, 50*time.Millisecond
	})
	topics.Put("orders", 4)
	a, b := newConsumerClient(t, c, "g", "a", "orders"), newConsumerClient(t, c, "g", "b", "orders")
	converge(t, c, "g", a, b)
	deadline := time.Now().Add(5 * time.Second)
	for countOwned(a.owned) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the live member owns %d partitions after the other's session expired", countOwned(a.owned))
		}
		time.Sleep(50 * time.Millisecond)
		a.mustBeat()
	}
	if err := b.beat(); !errors.Is(err, ErrUnknownMemberID) {
		t.Fatalf("the expired member's heartbeat: %v, want ErrUnknownMemberID", err)
	}
}

// TestConsumerGroupReloadsAfterAFailedWrite: when a write is lost, the
// group is rebuilt from what the log holds, and the members carry on from
// there (a member whose answer was lost retries at the epoch it has).
func TestConsumerGroupReloadsAfterAFailedWrite(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 4)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	epoch := a.epoch

	log.SetFault(ErrTimeout)
	b := newConsumerClient(t, c, "g", "b", "orders")
	if err := b.beat(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a join whose write failed: %v, want ErrTimeout", err)
	}
	log.SetFault(nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := a.beat()
		if err == nil {
			break
		}
		if !errors.Is(err, ErrLoadInProgress) || time.Now().After(deadline) {
			t.Fatalf("heartbeat while the group reloads: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a.epoch != epoch || countOwned(a.owned) != 4 {
		t.Fatalf("after the reload a is at epoch %d with %d partitions, want %d with 4", a.epoch, countOwned(a.owned), epoch)
	}
	converge(t, c, "g", a, b)
}

// TestConsumerGroupCommitsNeedTheMembersEpoch: Kafka 4.x's offset-commit
// checks for consumer groups.
func TestConsumerGroupCommitsNeedTheMembersEpoch(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 2)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	offsets := []CommitPartition{{Topic: "orders", Partition: 0, Offset: 7, LeaderEpoch: -1}}
	commit := func(version int16, member string, epoch int32) error {
		return commitOffsets(c, CommitRequest{Version: version, GroupID: "g", MemberID: member, Generation: epoch, Partitions: offsets})
	}
	wantErr(t, commit(9, "a", a.epoch-1), ErrStaleMemberEpoch)
	wantErr(t, commit(9, "nobody", a.epoch), ErrUnknownMemberID)
	wantErr(t, commit(8, "a", a.epoch), ErrUnsupportedVersion)
	wantErr(t, commit(9, "", -1), ErrUnknownMemberID) // an admin commit to a group with members
	if err := commit(9, "a", a.epoch); err != nil {
		t.Fatal(err)
	}
	if o, ok := log.FSM.Offset("g", fsm.TopicPartition{Topic: "orders", Partition: 0}); !ok || o.Offset != 7 {
		t.Fatalf("committed offset: %+v %v", o, ok)
	}
	wantErr(t, c.checkFetchMember("g", strp("a"), a.epoch-1), ErrStaleMemberEpoch)
	wantErr(t, c.checkFetchMember("g", strp("x"), 1), ErrUnknownMemberID)
	if err := c.checkFetchMember("g", nil, -1); err != nil {
		t.Fatalf("an admin fetch: %v", err)
	}
}

// TestClassicAndConsumerGroupsKeepToTheirIDs: a classic member whose
// metadata is not the consumer protocol's cannot join a consumer group,
// nor any classic member with group.consumer.migration.policy disabled;
// a consumer member cannot join (upgrade) a classic group whose metadata
// is not the consumer protocol's; an empty consumer group becomes classic
// on a classic join.
func TestClassicAndConsumerGroupsKeepToTheirIDs(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 2)
	a := newConsumerClient(t, c, "consumer", "a", "orders")
	converge(t, c, "consumer", a)
	res := c.Join(context.Background(), joinReq("consumer", "")) // metadata "meta-range"
	wantErr(t, res.Err, ErrInconsistentGroupProtocol)
	c.cfg.MigrationPolicy = MigrationDisabled
	s := &classicClient{t: t, c: c, group: "consumer", topics: []string{"orders"}}
	meta := kmsg.ConsumerMemberMetadata{Topics: s.topics}
	res = c.Join(context.Background(), JoinRequest{GroupID: "consumer", ProtocolType: "consumer", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000,
		Protocols: []fsm.Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}}})
	wantErr(t, res.Err, ErrInconsistentGroupProtocol)
	c.cfg.MigrationPolicy = MigrationBidirectional

	stableGroup(t, c, "classic", 1)
	if err := newConsumerClient(t, c, "classic", "x", "orders").beat(); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("a consumer member joining a classic group: %v, want ErrGroupIDNotFound", err)
	}

	a.mustLeave(leaveMemberEpoch)
	stableGroup(t, c, "consumer", 1) // the empty consumer group, downgraded
}

// TestConcurrentHeartbeatsNeverShareAPartition: members heartbeat at once
// while every write takes a while to commit, so heartbeats compute from
// state whose writes are still in flight; what the coordinator tells them
// never gives one partition to two of them.
func TestConcurrentHeartbeatsNeverShareAPartition(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 8)
	topics.Put("payments", 3)
	log.SetDelay(3 * time.Millisecond)
	var mu sync.Mutex
	clients := make([]*consumerClient, 5)
	for i := range clients {
		clients[i] = newConsumerClient(t, c, "g", fmt.Sprintf("m%d", i), "orders", "payments")
	}
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() {
			for range 40 {
				res, err := c.ConsumerHeartbeat(context.Background(), cl.locked(&mu).request())
				mu.Lock()
				if err == nil {
					cl.id, cl.epoch = res.MemberID, res.MemberEpoch
					if res.HasAssignment {
						cl.owned = res.Assignment
					}
				}
				assertNoPartitionSharedBy(t, clients...)
				mu.Unlock()
				if err != nil {
					t.Errorf("member %s: %v", cl.id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	log.SetDelay(0)
	converge(t, c, "g", clients...)
}

// locked returns cl after taking and releasing mu, so a request is built
// from a consistent client.
func (cl *consumerClient) locked(mu *sync.Mutex) *consumerClient {
	mu.Lock()
	defer mu.Unlock()
	copied := *cl
	copied.owned = append([]TopicIDPartitions{}, cl.owned...)
	return &copied
}

// TestConsumerGroupOffsetsExpireUnlessSubscribed: Kafka 4.x's retention
// for consumer groups: an offset of a topic no member subscribes to
// expires its retention after its commit; a subscribed topic's offsets
// stay while a member subscribes; a group left with no members and no
// offsets is removed.
func TestConsumerGroupOffsetsExpireUnlessSubscribed(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 1)
	topics.Put("old", 1)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	offsets := []CommitPartition{
		{Topic: "orders", Partition: 0, Offset: 1, LeaderEpoch: -1},
		{Topic: "old", Partition: 0, Offset: 2, LeaderEpoch: -1},
	}
	if err := commitOffsets(c, CommitRequest{Version: 9, GroupID: "g", MemberID: "a", Generation: a.epoch, Partitions: offsets}); err != nil {
		t.Fatal(err)
	}
	const retention = int64(60_000)
	later := c.now() + retention
	if n, g := c.ExpireOffsets(later, retention); n != 1 || g != 0 {
		t.Fatalf("with a subscribed member: expired %d offsets and %d groups, want 1 and 0", n, g)
	}
	if _, ok := log.FSM.Offset("g", fsm.TopicPartition{Topic: "orders", Partition: 0}); !ok {
		t.Fatal("the subscribed topic's offset expired")
	}
	a.mustLeave(leaveMemberEpoch)
	if n, g := c.ExpireOffsets(later, retention); n != 1 || g != 1 {
		t.Fatalf("once empty: expired %d offsets and %d groups, want 1 and 1", n, g)
	}
	time.Sleep(10 * time.Millisecond) // the writes are not waited for
	if _, ok := log.FSM.ConsumerGroup("g"); ok || log.FSM.HasOffsets("g") {
		t.Fatal("the empty consumer group or its offsets are still stored")
	}
}

// classicClient is a classic-protocol (eager) consumer as sarama runs
// one: JoinGroup, SyncGroup, heartbeats, and on REBALANCE_IN_PROGRESS it
// gives up everything and joins again.
type classicClient struct {
	t          *testing.T
	c          *Coordinator
	group, id  string
	topics     []string
	generation int32
	owned      map[string][]int32
	// topicsOf gives partition counts, for leading a classic group; nil
	// for a client that expects never to lead.
	topicsOf func(string) int32
}

func (cl *classicClient) joinAndSync() {
	cl.t.Helper()
	cl.owned = nil // eager: revoke everything first
	meta := kmsg.ConsumerMemberMetadata{Version: 1, Topics: cl.topics}
	req := JoinRequest{GroupID: cl.group, MemberID: cl.id, ClientID: "sarama", ClientHost: "/127.0.0.1", ProtocolType: "consumer",
		Protocols:        []fsm.Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}},
		SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, RequireKnownMemberID: true}
	res := cl.c.Join(context.Background(), req)
	if errors.Is(res.Err, ErrMemberIDRequired) {
		req.MemberID = res.MemberID
		res = cl.c.Join(context.Background(), req)
	}
	if res.Err != nil || res.Protocol != "range" || cl.topicsOf == nil && res.Leader != "" {
		cl.t.Fatalf("classic join: %+v", res)
	}
	cl.id, cl.generation = res.MemberID, res.Generation
	syncReq := SyncRequest{GroupID: cl.group, MemberID: cl.id, Generation: cl.generation, ProtocolType: "consumer", Protocol: "range"}
	if res.Leader == cl.id {
		// A classic group's leader assigns, here round-robin.
		syncReq.Assignments = map[string][]byte{}
		per := map[string]*kmsg.ConsumerMemberAssignment{}
		for _, m := range res.Members {
			per[m.MemberID] = &kmsg.ConsumerMemberAssignment{}
		}
		i := 0
		for _, topic := range cl.topics {
			for p := int32(0); p < cl.topicsOf(topic); p++ {
				a := per[res.Members[i%len(res.Members)].MemberID]
				a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: topic, Partitions: []int32{p}})
				i++
			}
		}
		for id, a := range per {
			syncReq.Assignments[id] = a.AppendTo(nil)
		}
	}
	sync := cl.c.Sync(context.Background(), syncReq)
	if sync.Err != nil {
		cl.t.Fatalf("classic sync: %v", sync.Err)
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(sync.Assignment); err != nil {
		cl.t.Fatalf("classic assignment: %v", err)
	}
	cl.owned = map[string][]int32{}
	for _, tp := range a.Topics {
		cl.owned[tp.Topic] = append(cl.owned[tp.Topic], tp.Partitions...)
	}
}

// heartbeat heartbeats, rejoining when told to; it reports whether it
// rejoined.
func (cl *classicClient) heartbeat() bool {
	cl.t.Helper()
	err := cl.c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: cl.group, MemberID: cl.id, Generation: cl.generation})
	switch {
	case errors.Is(err, ErrRebalanceInProgress):
		cl.joinAndSync()
		return true
	case err != nil:
		cl.t.Fatalf("classic heartbeat: %v", err)
	}
	return false
}

// assertMixedOwnership checks that consumer and classic clients own
// every partition of topics at most once, and returns how many each owns.
func assertMixedOwnership(t *testing.T, topics *MemTopics, consumers []*consumerClient, classics []*classicClient) map[string]int {
	t.Helper()
	names := map[[16]byte]string{}
	for _, tp := range topics.Topics() {
		names[tp.ID] = tp.Name
	}
	owner := map[string]string{}
	counts := map[string]int{}
	own := func(who, topic string, p int32) {
		key := fmt.Sprintf("%s/%d", topic, p)
		if o, ok := owner[key]; ok {
			t.Fatalf("partition %s owned by %s and %s", key, o, who)
		}
		owner[key] = who
		counts[who]++
	}
	for _, cl := range consumers {
		for _, tp := range cl.owned {
			for _, p := range tp.Partitions {
				own(cl.id, names[tp.TopicID], p)
			}
		}
	}
	for _, cl := range classics {
		for topic, parts := range cl.owned {
			for _, p := range parts {
				own(cl.id, topic, p)
			}
		}
	}
	return counts
}

// TestClassicMemberJoinsAConsumerGroup: a classic (sarama-like) member
// joins a consumer group of two consumer-protocol members: it gets a
// share through JoinGroup and SyncGroup, is told to rejoin when the
// assignment moves, no partition is owned twice at any step, and when a
// consumer-protocol member leaves, the classic one takes its part.
func TestClassicMemberJoinsAConsumerGroup(t *testing.T) {
	c, _, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 6)
	a, b := newConsumerClient(t, c, "g", "a", "orders"), newConsumerClient(t, c, "g", "b", "orders")
	converge(t, c, "g", a, b)
	s := &classicClient{t: t, c: c, group: "g", topics: []string{"orders"}}
	s.joinAndSync()
	settle := func(consumers []*consumerClient) map[string]int {
		t.Helper()
		var counts map[string]int
		for range 20 {
			for _, cl := range consumers {
				cl.mustBeat()
				counts = assertMixedOwnership(t, topics, consumers, []*classicClient{s})
			}
			rejoined := s.heartbeat()
			counts = assertMixedOwnership(t, topics, consumers, []*classicClient{s})
			if d, err := c.DescribeConsumer(context.Background(), "g"); err == nil && d.State == ConsumerStable && !rejoined {
				return counts
			}
		}
		d, err := c.DescribeConsumer(context.Background(), "g")
		t.Fatalf("the mixed group did not settle: %+v %v", d, err)
		return nil
	}
	counts := settle([]*consumerClient{a, b})
	if counts[a.id] != 2 || counts[b.id] != 2 || counts[s.id] != 2 {
		t.Fatalf("a mixed group of three shares 6 partitions as %v", counts)
	}
	d, _ := c.DescribeConsumer(context.Background(), "g")
	classics := 0
	for _, m := range d.Members {
		if m.Classic {
			classics++
		}
	}
	if classics != 1 {
		t.Fatalf("described %d classic members, want 1", classics)
	}
	if err := commitOffsets(c, CommitRequest{Version: 5, GroupID: "g", MemberID: s.id, Generation: s.generation,
		Partitions: []CommitPartition{{Topic: "orders", Partition: s.owned["orders"][0], Offset: 3, LeaderEpoch: -1}}}); err != nil {
		t.Fatalf("the classic member's commit: %v", err)
	}
	wantErr(t, commitOffsets(c, CommitRequest{Version: 5, GroupID: "g", MemberID: s.id, Generation: s.generation - 1}), ErrIllegalGeneration)

	a.mustLeave(leaveMemberEpoch)
	counts = settle([]*consumerClient{b})
	if counts[b.id]+counts[s.id] != 6 {
		t.Fatalf("after a consumer member left, the others own %v", counts)
	}

	// The classic member leaves through LeaveGroup.
	res, err := c.Leave(context.Background(), "g", []LeaveMember{{MemberID: s.id}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("classic leave: %+v %v", res, err)
	}
	converge(t, c, "g", b)
	if countOwned(b.owned) != 6 {
		t.Fatalf("the last member owns %d partitions", countOwned(b.owned))
	}
}

// TestConsumerMemberUpgradesAClassicGroup: a consumer-protocol member
// joining a classic group with members turns it into a consumer group
// (Kafka's online upgrade): the classic members keep their partitions at
// the group's generation, are told to rejoin, and the three settle on two
// partitions each without a partition ever owned twice.
func TestConsumerMemberUpgradesAClassicGroup(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 6)
	meta := kmsg.ConsumerMemberMetadata{Version: 1, Topics: []string{"orders"}}
	classicJoin := func() <-chan JoinResult {
		return joinAsync(c, JoinRequest{GroupID: "g", ClientID: "sarama", ClientHost: "/127.0.0.1", ProtocolType: "consumer",
			Protocols: []fsm.Protocol{{Name: "range", Metadata: meta.AppendTo(nil)}}, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000})
	}
	j1, j2 := classicJoin(), classicJoin()
	r1, r2 := recv(t, j1), recv(t, j2)
	if r1.Err != nil || r2.Err != nil {
		t.Fatalf("classic joins: %v %v", r1.Err, r2.Err)
	}
	assign := func(parts ...int32) []byte {
		a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "orders", Partitions: parts}}}
		return a.AppendTo(nil)
	}
	leader := r1.Leader
	assignments := map[string][]byte{r1.MemberID: assign(0, 1, 2), r2.MemberID: assign(3, 4, 5)}
	var syncs []<-chan SyncResult
	for _, r := range []JoinResult{r1, r2} {
		req := SyncRequest{GroupID: "g", MemberID: r.MemberID, Generation: r.Generation}
		if r.MemberID == leader {
			req.Assignments = assignments
		}
		syncs = append(syncs, syncAsync(c, req))
	}
	for _, ch := range syncs {
		if r := recv(t, ch); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	s1 := &classicClient{t: t, c: c, group: "g", id: r1.MemberID, topics: []string{"orders"}, generation: r1.Generation, owned: map[string][]int32{"orders": {0, 1, 2}}}
	s2 := &classicClient{t: t, c: c, group: "g", id: r2.MemberID, topics: []string{"orders"}, generation: r2.Generation, owned: map[string][]int32{"orders": {3, 4, 5}}}

	a := newConsumerClient(t, c, "g", "a", "orders")
	a.mustBeat()
	if _, ok := log.FSM.Group("g"); ok {
		t.Fatal("the classic group is still stored after the upgrade")
	}
	classics := []*classicClient{s1, s2}
	for round := 0; round < 20; round++ {
		a.mustBeat()
		assertMixedOwnership(t, topics, []*consumerClient{a}, classics)
		rejoined := false
		for _, s := range classics {
			rejoined = s.heartbeat() || rejoined
			assertMixedOwnership(t, topics, []*consumerClient{a}, classics)
		}
		d, err := c.DescribeConsumer(context.Background(), "g")
		if err == nil && d.State == ConsumerStable && !rejoined {
			counts := assertMixedOwnership(t, topics, []*consumerClient{a}, classics)
			if counts[a.id] != 2 || counts[s1.id] != 2 || counts[s2.id] != 2 {
				t.Fatalf("after the upgrade the members own %v", counts)
			}
			return
		}
	}
	d, err := c.DescribeConsumer(context.Background(), "g")
	t.Fatalf("the upgraded group did not settle: %+v %v", d, err)
}

// TestLastConsumerMemberLeavingDowngradesTheGroup: when the last
// consumer-protocol member leaves and a classic member remains, the
// group becomes a classic group again (Kafka's online downgrade): stored
// as one, its member told to rejoin, and led by it from there.
func TestLastConsumerMemberLeavingDowngradesTheGroup(t *testing.T) {
	c, log, topics := newConsumerTestCoordinator(t, nil)
	topics.Put("orders", 4)
	a := newConsumerClient(t, c, "g", "a", "orders")
	converge(t, c, "g", a)
	s := &classicClient{t: t, c: c, group: "g", topics: []string{"orders"}}
	s.joinAndSync()
	for range 5 {
		a.mustBeat()
		s.heartbeat()
	}
	assertMixedOwnership(t, topics, []*consumerClient{a}, []*classicClient{s})
	s.topicsOf = func(string) int32 { return 4 }

	a.mustLeave(leaveMemberEpoch)
	if _, ok := log.FSM.ConsumerGroup("g"); ok {
		t.Fatal("the consumer group is still stored after the downgrade")
	}
	stored, ok := log.FSM.Group("g")
	if !ok || len(stored.Members) != 1 || stored.Members[0].ID != s.id {
		t.Fatalf("the downgraded group as stored: %+v %v", stored, ok)
	}
	if !s.heartbeat() {
		t.Fatal("the classic member was not told to rejoin after the downgrade")
	}
	if len(s.owned["orders"]) != 4 {
		t.Fatalf("the classic member leads and owns %v", s.owned)
	}
	d, err := c.Describe(context.Background(), "g")
	if err != nil || d.State != "Stable" || d.ConsumerProtocol || len(d.Members) != 1 {
		t.Fatalf("described after the downgrade: %+v %v", d, err)
	}
}
