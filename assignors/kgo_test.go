package assignors_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/assignors"
	"github.com/kcoord/kcoord/server"
)

// TestKgoGroups runs franz-go consumer groups whose members balance with
// each strategy, through the adapter, against a kcoord server: three
// members share a topic's twelve partitions, each owned once, and when one
// leaves the other two take its share. The coordinator stores the
// strategy's name as the group's protocol. A last group mixes kcoord's
// cooperative-sticky members with franz-go's: either may lead.
func TestKgoGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and consumer groups")
	}
	t.Parallel()
	s := server.StartTestServer(t, server.TestConfig(t.TempDir()))
	addr := s.KafkaAddr().String()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	adm := kadm.NewClient(admin)

	cooperative := assignors.Balancer(assignors.CooperativeSticky())
	for _, tc := range []struct {
		name      string
		balancers []kgo.GroupBalancer // per member
		even      bool                // shares differ by at most one
	}{
		{"range", same(assignors.Balancer(assignors.Range())), true},
		{"roundrobin", same(assignors.Balancer(assignors.RoundRobin())), true},
		{"sticky", same(assignors.Balancer(assignors.Sticky())), true},
		{"cooperative-sticky", same(cooperative), true},
		{"random", same(assignors.Balancer(assignors.Random(5))), false},
		{"mixed-cooperative-sticky", []kgo.GroupBalancer{kgo.CooperativeStickyBalancer(), cooperative, kgo.CooperativeStickyBalancer()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			topic, group := "assign-"+tc.name, "group-"+tc.name
			resp, err := adm.CreateTopic(ctx, 12, 1, nil, topic)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatal(err)
			}
			members := make([]*consumer, len(tc.balancers))
			for i, b := range tc.balancers {
				members[i] = startConsumer(ctx, t, addr, group, topic, b)
			}
			waitOwned(ctx, t, members, 12, tc.even)
			protocol := tc.balancers[0].ProtocolName()
			described, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			if got := described[group].Protocol; got != protocol {
				t.Errorf("group protocol %q, want %q", got, protocol)
			}

			members[len(members)-1].close()
			waitOwned(ctx, t, members[:len(members)-1], 12, tc.even)
		})
	}
}

func same(b kgo.GroupBalancer) []kgo.GroupBalancer { return []kgo.GroupBalancer{b, b, b} }

// consumer is a group member that tracks what it owns from its callbacks.
type consumer struct {
	cl    *kgo.Client
	mu    sync.Mutex
	owned map[int32]bool
	done  chan struct{}
	once  sync.Once
}

func startConsumer(ctx context.Context, t *testing.T, addr, group, topic string, b kgo.GroupBalancer) *consumer {
	c := &consumer{owned: map[int32]bool{}, done: make(chan struct{})}
	update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, p := range m[topic] {
				if add {
					c.owned[p] = true
				} else {
					delete(c.owned, p)
				}
			}
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(b),
		kgo.SessionTimeout(3*time.Second),
		kgo.HeartbeatInterval(200*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(update(true)),
		kgo.OnPartitionsRevoked(update(false)),
		kgo.OnPartitionsLost(update(false)),
	)
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	go func() {
		defer close(c.done)
		for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *consumer) close() {
	c.once.Do(func() {
		c.cl.Close()
		<-c.done
	})
}

func (c *consumer) snapshot() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.owned))
}

// waitOwned waits until the members own all n partitions, each exactly
// once, and, if even, in shares at most one apart.
func waitOwned(ctx context.Context, t *testing.T, members []*consumer, n int, even bool) {
	t.Helper()
	var last string
	for {
		count := map[int32]int{}
		lo, hi := n, 0
		var shares [][]int32
		for _, m := range members {
			s := m.snapshot()
			shares = append(shares, s)
			lo, hi = min(lo, len(s)), max(hi, len(s))
			for _, p := range s {
				count[p]++
			}
		}
		ok := len(count) == n && (!even || hi-lo <= 1)
		for _, k := range count {
			ok = ok && k == 1
		}
		if ok {
			return
		}
		last = fmt.Sprint(shares)
		select {
		case <-ctx.Done():
			t.Fatalf("members never owned all %d partitions once each; last: %s", n, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
