package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFranzGoGroups runs a three-member franz-go consumer group on a
// 12-partition topic, once with the eager range balancer and once with the
// cooperative-sticky one: every partition must end up with exactly one
// owner, as both the clients' callbacks and DescribeGroups say; each
// member's commits must read back exactly through kadm; and when one member
// leaves, the other two must take over all partitions.
func TestFranzGoGroups(t *testing.T) {
	t.Parallel()
	addr := startServer(t)
	for _, tc := range []struct {
		name     string
		protocol string
		balancer kgo.GroupBalancer
	}{
		{"range", "range", kgo.RangeBalancer()},
		{"cooperative-sticky", "cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runFranzGoGroup(t, addr, tc.protocol, tc.balancer)
		})
	}
}

func runFranzGoGroup(t *testing.T, addr, protocol string, balancer kgo.GroupBalancer) {
	ctx := testContext(t, 50*time.Second)
	adm := newAdmin(t, addr)
	topic, group := "franz-"+protocol, "franz-group-"+protocol
	createTopic(ctx, t, adm, topic, groupPartitions)

	members := make([]*kgoMember, 3)
	for i := range members {
		members[i] = startKgoMember(ctx, t, addr, group, topic, i, balancer)
	}
	waitFor(ctx, t, "three franz-go members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, protocol, kgoView(members))
	})

	// kgo commits its member id as each offset's metadata.
	want := map[string]map[int32]committed{topic: {}}
	for i, m := range members {
		memberID, _ := m.cl.GroupMetadata()
		offsets := make(map[int32]int64)
		for _, p := range m.owned.list() {
			offsets[p] = commitOffsetFor(i, p, 0)
			want[topic][p] = committed{Offset: offsets[p], Metadata: memberID}
		}
		if err := m.commit(ctx, topic, offsets); err != nil {
			t.Fatalf("member %d commit: %v", i, err)
		}
	}
	checkOffsets(ctx, t, adm, group, want)

	members[2].close()
	waitFor(ctx, t, "two franz-go members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, protocol, kgoView(members[:2]))
	})
	// The rebalance moved ownership but no commit: the offsets stay.
	checkOffsets(ctx, t, adm, group, want)

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if lg, ok := listed[group]; !ok || lg.ProtocolType != "consumer" || lg.State != "Stable" {
		t.Errorf("ListGroups shows %s as %+v (listed: %v), want a Stable consumer group", group, lg, ok)
	}

	// Once everyone left, the group is Empty and keeps its offsets.
	members[0].close()
	members[1].close()
	waitFor(ctx, t, "the group to be empty", func(ctx context.Context) error {
		described, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		if g := described[group]; g.Err != nil || g.State != "Empty" || len(g.Members) != 0 {
			return fmt.Errorf("group %s: state %q, %d members, err %v", group, g.State, len(g.Members), g.Err)
		}
		return nil
	})
	checkOffsets(ctx, t, adm, group, want)
}

// kgoMember is one franz-go group member, polling in its own goroutine.
type kgoMember struct {
	cl        *kgo.Client
	owned     ownedSet
	callbacks atomic.Int64 // assigned, revoked and lost callbacks so far
	done      chan struct{}
	closeOnce sync.Once
}

// startKgoMember starts member idx of group; opts override the defaults.
func startKgoMember(ctx context.Context, t *testing.T, addr, group, topic string, idx int, balancer kgo.GroupBalancer, opts ...kgo.Opt) *kgoMember {
	t.Helper()
	m := &kgoMember{done: make(chan struct{})}
	name := fmt.Sprintf("kgo-%d", idx)
	onlyTopic := func(a map[string][]int32) []int32 {
		for tp := range a {
			if tp != topic {
				t.Errorf("%s: callback names foreign topic %q", name, tp)
			}
		}
		m.callbacks.Add(1)
		return a[topic]
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(balancer),
		kgo.SessionTimeout(sessionTimeout),
		kgo.HeartbeatInterval(heartbeatInterval),
		kgo.RebalanceTimeout(rebalanceTimeout),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.DisableAutoCommit(),
		kgo.RetryTimeout(15 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { m.owned.add(onlyTopic(a)) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { m.owned.remove(onlyTopic(r)) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) { m.owned.remove(onlyTopic(l)) }),
		kgo.WithLogger(kgo.BasicLogger(logWriter(t, name), kgo.LogLevelWarn, nil)),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
		}
	}()
	t.Cleanup(m.close)
	return m
}

// close leaves the group (kgo's Close sends LeaveGroup) and waits for the
// poll loop to stop.
func (m *kgoMember) close() {
	m.closeOnce.Do(func() {
		m.cl.Close()
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
		}
	})
}

// commit commits offsets for topic in the member's current generation and
// returns the first error, per-partition ones included.
func (m *kgoMember) commit(ctx context.Context, topic string, offsets map[int32]int64) error {
	eo := make(map[int32]kgo.EpochOffset)
	for p, o := range offsets {
		eo[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var rerr error
	m.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: eo}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		n := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				n++
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && rerr == nil {
					rerr = fmt.Errorf("partition %d: %w", rp.Partition, err)
				}
			}
		}
		if rerr == nil && n != len(offsets) {
			rerr = fmt.Errorf("commit response has %d partitions, sent %d", n, len(offsets))
		}
	})
	return rerr
}

// kgoView is the members' own view: member id → owned partitions.
func kgoView(members []*kgoMember) groupView {
	v := make(groupView)
	for _, m := range members {
		id, _ := m.cl.GroupMetadata()
		v[id] = m.owned.list()
	}
	return v
}
