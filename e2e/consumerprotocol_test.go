package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzGoConsumerProtocolGroups runs three franz-go members with
// kgo.ServerSideBalancer() (KIP-848: the coordinator assigns) on a
// 12-partition topic against a three-node cluster, once with the range
// balancer (the "range" server assignor) and once with cooperative-sticky
// ("uniform"): every partition must have exactly one owner, as the
// clients' callbacks and ConsumerGroupDescribe say, with the group Stable
// at three members; commits read back through kadm; and when a member
// leaves, the other two take over all partitions.
func TestFranzGoConsumerProtocolGroups(t *testing.T) {
	t.Parallel()
	_, seeds := startTestCluster(t)
	for _, tc := range []struct {
		name, assignor string
		balancer       kgo.GroupBalancer
	}{
		{"range", "range", kgo.RangeBalancer()},
		{"cooperative-sticky", "uniform", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runConsumerProtocolGroup(t, seeds, tc.assignor, tc.balancer)
		})
	}
}

func runConsumerProtocolGroup(t *testing.T, seeds []string, assignor string, balancer kgo.GroupBalancer) {
	ctx := testContext(t, 60*time.Second)
	adm := newAdmin(t, seeds[0])
	topic, group := "kip848-"+assignor, "kip848-group-"+assignor
	createTopic(ctx, t, adm, topic, groupPartitions)

	members := make([]*kgoMember, 3)
	for i := range members {
		members[i] = startKgoMember(ctx, t, seeds[i], group, topic, i, balancer, kgo.SeedBrokers(seeds[i]), kgo.ServerSideBalancer())
	}
	waitFor(ctx, t, "three consumer-protocol members to own all partitions", func(ctx context.Context) error {
		return checkConsumerGroup(ctx, adm, group, topic, groupPartitions, assignor, kgoView(members))
	})

	want := commitOwned(ctx, t, members, topic, 0)
	checkOffsets(ctx, t, adm, group, want)

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if lg, ok := listed[group]; !ok || lg.ProtocolType != "consumer" || lg.State != "Stable" {
		t.Errorf("ListGroups shows %s as %+v (listed: %v), want a Stable consumer group", group, lg, ok)
	}

	members[2].close()
	waitFor(ctx, t, "two consumer-protocol members to own all partitions", func(ctx context.Context) error {
		return checkConsumerGroup(ctx, adm, group, topic, groupPartitions, assignor, kgoView(members[:2]))
	})
	checkOffsets(ctx, t, adm, group, want)
}

// TestConsumerProtocolGroupSurvivesCoordinatorKill kills the node that
// coordinates a running three-member consumer-protocol group (no
// leadership transfer, as a crash): the members carry on at their member
// ids and epochs, with no assignment callback, and commit again.
func TestConsumerProtocolGroupSurvivesCoordinatorKill(t *testing.T) {
	t.Parallel()
	servers, seeds := startTestCluster(t)
	ctx := testContext(t, 90*time.Second)
	adm := newAdmin(t, seeds[0])
	const topic, group = "kip848-failover-topic", "kip848-failover-group"
	createTopic(ctx, t, adm, topic, groupPartitions)
	members := make([]*kgoMember, 3)
	for i := range members {
		members[i] = startKgoMember(ctx, t, seeds[i], group, topic, i, kgo.CooperativeStickyBalancer(),
			kgo.SeedBrokers(seeds...), kgo.ServerSideBalancer())
	}
	waitFor(ctx, t, "three consumer-protocol members to own all partitions", func(ctx context.Context) error {
		return checkConsumerGroup(ctx, adm, group, topic, groupPartitions, "uniform", kgoView(members))
	})
	before := memberStates(members)

	victim := coordinatorIndex(ctx, t, adm, group, servers)
	t.Logf("killing node %d, the group's coordinator; members before: %+v", victim+1, before)
	if err := servers[victim].Kill(); err != nil {
		t.Fatal(err)
	}
	survivorAddr := seeds[(victim+1)%3]
	waitFor(ctx, t, "the group to be described by its new coordinator", func(ctx context.Context) error {
		// A fresh client each try: one that asked while the survivors
		// still routed to the dead node keeps dialing it.
		cl, err := kgo.NewClient(kgo.SeedBrokers(survivorAddr))
		if err != nil {
			return err
		}
		defer cl.Close()
		return checkConsumerGroup(ctx, kadm.NewClient(cl), group, topic, groupPartitions, "uniform", kgoView(members))
	})
	survivor := newAdmin(t, survivorAddr)
	// Several heartbeat intervals against the new coordinator.
	time.Sleep(2 * time.Second)
	if after := memberStates(members); !slices.EqualFunc(before, after, memberState.same) {
		t.Errorf("members changed across the coordinator's crash:\nbefore %+v\nafter  %+v", before, after)
	}
	want := commitOwned(ctx, t, members, topic, 1)
	checkOffsets(ctx, t, survivor, group, want)
}

// checkConsumerGroup checks a consumer-protocol group through
// ConsumerGroupDescribe: Stable, at one epoch, with assignor, each member
// a live client whose owned partitions are its described assignment and
// its target, and every partition of topic owned exactly once.
func checkConsumerGroup(ctx context.Context, adm *kadm.Client, group, topic string, n int32, assignor string, view groupView) error {
	for id := range view {
		if id == "" {
			return fmt.Errorf("a client has no member id yet")
		}
	}
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	g, ok := described[group]
	switch {
	case !ok:
		return fmt.Errorf("group %s not in the answer", group)
	case g.Err != nil:
		return fmt.Errorf("describe group: %w", g.Err)
	case g.State != "Stable" || g.Epoch != g.AssignmentEpoch:
		return fmt.Errorf("group state %q at epoch %d, assignment epoch %d; want Stable", g.State, g.Epoch, g.AssignmentEpoch)
	case g.AssignorName != assignor:
		return fmt.Errorf("assignor %q, want %q", g.AssignorName, assignor)
	case len(g.Members) != len(view):
		return fmt.Errorf("described %d members, clients report %d", len(g.Members), len(view))
	}
	owners := make(map[int32]string)
	for _, m := range g.Members {
		clientOwned, ok := view[m.MemberID]
		if !ok {
			return fmt.Errorf("described member %s is not a live client", m.MemberID)
		}
		if m.MemberEpoch != g.Epoch || m.MemberType != 0 && m.MemberType != 1 {
			return fmt.Errorf("member %s at epoch %d (type %d), group at %d", m.MemberID, m.MemberEpoch, m.MemberType, g.Epoch)
		}
		assigned := sorted(slices.Collect(maps.Keys(m.Assignment[topic])))
		if target := sorted(slices.Collect(maps.Keys(m.TargetAssignment[topic]))); !slices.Equal(assigned, target) {
			return fmt.Errorf("member %s: assigned %v, target %v", m.MemberID, assigned, target)
		}
		if !slices.Equal(assigned, sorted(clientOwned)) {
			return fmt.Errorf("member %s: described assignment %v, client owns %v", m.MemberID, assigned, sorted(clientOwned))
		}
		for _, p := range assigned {
			if prev, dup := owners[p]; dup {
				return fmt.Errorf("partition %d assigned to both %s and %s", p, prev, m.MemberID)
			}
			owners[p] = m.MemberID
		}
	}
	for p := range n {
		if _, ok := owners[p]; !ok {
			return fmt.Errorf("partition %d has no owner", p)
		}
	}
	return nil
}

// TestMixedConsumerAndClassicGroup runs two franz-go consumer-protocol
// members and one sarama classic member in one group (Kafka 4.x's
// migration: a classic member joins a consumer group through JoinGroup and
// SyncGroup at the coordinator's assignment): every partition has one
// owner and the three hold four each; when a franz-go member leaves, the
// other two take over all partitions; when the sarama member leaves, the
// last franz-go member holds everything.
func TestMixedConsumerAndClassicGroup(t *testing.T) {
	t.Parallel()
	addr := startServer(t)
	ctx := testContext(t, 60*time.Second)
	adm := newAdmin(t, addr)
	const topic, group = "mixed-topic", "mixed-group"
	createTopic(ctx, t, adm, topic, groupPartitions)
	kgos := make([]*kgoMember, 2)
	for i := range kgos {
		kgos[i] = startKgoMember(ctx, t, addr, group, topic, i, kgo.CooperativeStickyBalancer(), kgo.ServerSideBalancer())
	}
	waitFor(ctx, t, "two consumer-protocol members to own all partitions", func(ctx context.Context) error {
		return checkConsumerGroup(ctx, adm, group, topic, groupPartitions, "uniform", kgoView(kgos))
	})
	classic := startSaramaMember(ctx, t, addr, group, topic, 0)
	view := func(ks []*kgoMember, withClassic bool) groupView {
		v := kgoView(ks)
		if withClassic {
			for id, owned := range saramaView([]*saramaMember{classic}) {
				v[id] = owned
			}
		}
		return v
	}
	waitFor(ctx, t, "the mixed group of three to own all partitions, four each", func(ctx context.Context) error {
		if err := checkConsumerGroup(ctx, adm, group, topic, groupPartitions, "uniform", view(kgos, true)); err != nil {
			return err
		}
		for id, owned := range view(kgos, true) {
			if len(owned) != 4 {
				return fmt.Errorf("member %s owns %d partitions", id, len(owned))
			}
		}
		return nil
	})
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	types := map[int8]int{}
	for _, m := range described[group].Members {
		types[m.MemberType]++
	}
	if types[0] != 1 || types[1] != 2 {
		t.Errorf("member types %v, want one classic (0) and two consumer (1)", types)
	}

	kgos[1].close()
	waitFor(ctx, t, "a franz-go and the sarama member to own all partitions", func(ctx context.Context) error {
		return checkConsumerGroup(ctx, adm, group, topic, groupPartitions, "uniform", view(kgos[:1], true))
	})
	classic.close()
	waitFor(ctx, t, "the last franz-go member to own all partitions", func(ctx context.Context) error {
		return checkConsumerGroup(ctx, adm, group, topic, groupPartitions, "uniform", view(kgos[:1], false))
	})
}

// TestClassicGroupUpgradedAndDowngraded starts a sarama classic group,
// then two franz-go consumer-protocol members join it (Kafka's online
// upgrade): the group becomes a consumer group with all three sharing the
// partitions, four each, the sarama member rejoining at the new epoch.
// When both franz-go members leave, the group is a classic group again
// (the online downgrade), the sarama member owning everything.
func TestClassicGroupUpgradedAndDowngraded(t *testing.T) {
	t.Parallel()
	addr := startServer(t)
	ctx := testContext(t, 60*time.Second)
	adm := newAdmin(t, addr)
	const topic, group = "upgrade-topic", "upgrade-group"
	createTopic(ctx, t, adm, topic, groupPartitions)
	classic := startSaramaMember(ctx, t, addr, group, topic, 0)
	waitFor(ctx, t, "the sarama member to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, "roundrobin", saramaView([]*saramaMember{classic}))
	})
	kgos := make([]*kgoMember, 2)
	for i := range kgos {
		kgos[i] = startKgoMember(ctx, t, addr, group, topic, i, kgo.CooperativeStickyBalancer(), kgo.ServerSideBalancer())
	}
	waitFor(ctx, t, "the upgraded group of three to own all partitions, four each", func(ctx context.Context) error {
		v := kgoView(kgos)
		for id, owned := range saramaView([]*saramaMember{classic}) {
			v[id] = owned
		}
		if err := checkConsumerGroup(ctx, adm, group, topic, groupPartitions, "uniform", v); err != nil {
			return err
		}
		for id, owned := range v {
			if len(owned) != 4 {
				return fmt.Errorf("member %s owns %d partitions", id, len(owned))
			}
		}
		return nil
	})
	for _, m := range kgos {
		m.close()
	}
	waitFor(ctx, t, "the downgraded classic group's sarama member to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, "roundrobin", saramaView([]*saramaMember{classic}))
	})
}

// TestKillNineKeepsConsumerProtocolEpochs kills the kcoord process (kill
// -9) under a running three-member consumer-protocol group and starts it
// again: from the replicated log alone, the restarted coordinator
// continues every member at its member id, epoch and partitions, with no
// callback, and their commits at that epoch go through.
func TestKillNineKeepsConsumerProtocolEpochs(t *testing.T) {
	t.Parallel()
	p := newProc(t, "-c", "group.consumer.min.heartbeat.interval.ms=100", "-c", "group.consumer.heartbeat.interval.ms=300")
	ctx := testContext(t, 60*time.Second)
	p.start(ctx)
	const topic, group = "kill9-kip848-topic", "kill9-kip848-group"
	adm := newAdmin(t, p.kafka)
	createTopic(ctx, t, adm, topic, groupPartitions)
	members := make([]*kgoMember, 3)
	for i := range members {
		members[i] = startKgoMember(ctx, t, p.kafka, group, topic, i, kgo.RangeBalancer(), kgo.ServerSideBalancer(), kgo.RetryTimeout(20*time.Second))
	}
	waitFor(ctx, t, "three consumer-protocol members to own all partitions", func(ctx context.Context) error {
		return checkConsumerGroup(ctx, adm, group, topic, groupPartitions, "range", kgoView(members))
	})
	before := memberStates(members)

	p.kill9()
	t.Log("killed kcoord under a live consumer-protocol group")
	p.start(ctx)
	adm = newAdmin(t, p.kafka)
	time.Sleep(2 * time.Second) // several heartbeat intervals against the new process
	waitFor(ctx, t, "the group to be described again", func(ctx context.Context) error {
		return checkConsumerGroup(ctx, adm, group, topic, groupPartitions, "range", kgoView(members))
	})
	if after := memberStates(members); !slices.EqualFunc(before, after, memberState.same) {
		t.Errorf("members changed across kill -9:\nbefore %+v\nafter  %+v", before, after)
	}
	want := commitOwned(ctx, t, members, topic, 1)
	checkOffsets(ctx, t, adm, group, want)
}

// memberState is what a franz-go member knows of its membership: a
// failover must change none of it.
type memberState struct {
	memberID  string
	epoch     int32
	owned     []int32
	callbacks int64
}

func (a memberState) same(b memberState) bool {
	return a.memberID == b.memberID && a.epoch == b.epoch && slices.Equal(a.owned, b.owned) && a.callbacks == b.callbacks
}

// memberStates reads every member's state.
func memberStates(members []*kgoMember) []memberState {
	var s []memberState
	for _, m := range members {
		id, epoch := m.cl.GroupMetadata()
		s = append(s, memberState{id, epoch, m.owned.list(), m.callbacks.Load()})
	}
	return s
}

// commitOwned has every member commit what it owns, in round, and
// returns what the group's offsets must then read.
func commitOwned(ctx context.Context, t *testing.T, members []*kgoMember, topic string, round int) map[string]map[int32]committed {
	t.Helper()
	want := map[string]map[int32]committed{topic: {}}
	for i, m := range members {
		memberID, _ := m.cl.GroupMetadata()
		offsets := make(map[int32]int64)
		for _, p := range m.owned.list() {
			offsets[p] = commitOffsetFor(i, p, round)
			want[topic][p] = committed{Offset: offsets[p], Metadata: memberID}
		}
		if err := m.commit(ctx, topic, offsets); err != nil {
			t.Fatalf("round %d: member %d commit: %v", round, i, err)
		}
	}
	return want
}
