package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestSaramaRoundRobin runs a three-member sarama consumer group with the
// round-robin strategy on a 12-partition topic: exactly one owner per
// partition (the sessions' claims and DescribeGroups agree), commits made
// through sessions read back exactly through kadm, and the two remaining
// members take over everything when the third closes.
func TestSaramaRoundRobin(t *testing.T) {
	t.Parallel()
	addr := startServer(t)
	ctx := testContext(t, 50*time.Second)
	adm := newAdmin(t, addr)
	const topic, group, protocol = "sarama-topic", "sarama-group", "roundrobin"
	createTopic(ctx, t, adm, topic, groupPartitions)

	members := make([]*saramaMember, 3)
	for i := range members {
		members[i] = startSaramaMember(ctx, t, addr, group, topic, i)
	}
	waitFor(ctx, t, "three sarama members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, protocol, saramaView(members))
	})

	want := map[string]map[int32]committed{topic: {}}
	for i, m := range members {
		meta := fmt.Sprintf("sarama-%d", i)
		offsets := make(map[int32]int64)
		for _, p := range m.owned.list() {
			offsets[p] = commitOffsetFor(i, p, 0)
			want[topic][p] = committed{Offset: offsets[p], Metadata: meta}
		}
		if err := m.commit(topic, offsets, meta); err != nil {
			t.Fatalf("member %d commit: %v", i, err)
		}
	}
	// sarama's Commit reports failures only on the Errors channel, so the
	// commits are confirmed by reading them back.
	checkOffsets(ctx, t, adm, group, want)

	members[2].close()
	waitFor(ctx, t, "two sarama members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, protocol, saramaView(members[:2]))
	})
	checkOffsets(ctx, t, adm, group, want)
}

// saramaMember is one sarama consumer group member; it is its own
// ConsumerGroupHandler. Ownership is the current session's claims, set in
// Setup and cleared in Cleanup.
type saramaMember struct {
	name      string
	group     sarama.ConsumerGroup
	owned     ownedSet
	mu        sync.Mutex
	sess      sarama.ConsumerGroupSession
	done      chan struct{}
	closeOnce sync.Once
}

func startSaramaMember(ctx context.Context, t *testing.T, addr, group, topic string, idx int) *saramaMember {
	t.Helper()
	m := &saramaMember{name: fmt.Sprintf("sarama-%d", idx), done: make(chan struct{})}
	cfg := sarama.NewConfig()
	cfg.ClientID = m.name
	cfg.Version = sarama.V3_0_0_0
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	cfg.Consumer.Group.Session.Timeout = sessionTimeout
	cfg.Consumer.Group.Heartbeat.Interval = heartbeatInterval
	cfg.Consumer.Group.Rebalance.Timeout = rebalanceTimeout
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	cfg.Consumer.Retry.Backoff = 200 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	g, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatalf("%s: %v", m.name, err)
	}
	m.group = g
	logw := logWriter(t, m.name).(*testWriter)
	go func() {
		for err := range g.Errors() {
			logw.logf("error: %v", err)
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			err := g.Consume(ctx, []string{topic}, m)
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
			if err != nil {
				logw.logf("consume: %v", err)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}()
	t.Cleanup(m.close)
	return m
}

// Setup implements sarama.ConsumerGroupHandler.
func (m *saramaMember) Setup(sess sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sess = sess
	var ps []int32
	for _, claimed := range sess.Claims() { // only the test topic is subscribed
		ps = append(ps, claimed...)
	}
	m.owned.set(ps)
	return nil
}

// Cleanup implements sarama.ConsumerGroupHandler.
func (m *saramaMember) Cleanup(sess sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sess == sess {
		m.sess = nil
		m.owned.set(nil)
	}
	return nil
}

// ConsumeClaim implements sarama.ConsumerGroupHandler.
func (m *saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	return awaitClaimEnd(sess, claim)
}

// awaitClaimEnd is a sarama ConsumeClaim for kcoord, which has no records:
// it waits for the claim or the session to end.
func awaitClaimEnd(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case _, ok := <-claim.Messages():
			if !ok {
				return nil
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

// commit marks offsets in the current session and commits synchronously.
func (m *saramaMember) commit(topic string, offsets map[int32]int64, meta string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sess == nil {
		return errors.New("no live session")
	}
	for p, o := range offsets {
		m.sess.MarkOffset(topic, p, o, meta)
	}
	m.sess.Commit()
	return nil
}

func (m *saramaMember) close() {
	m.closeOnce.Do(func() {
		_ = m.group.Close()
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
		}
	})
}

func saramaView(members []*saramaMember) groupView {
	v := make(groupView)
	for _, m := range members {
		m.mu.Lock()
		if m.sess != nil {
			v[m.sess.MemberID()] = m.owned.list()
		} else {
			v[""] = nil // not in a session: checkGroup rejects the view
		}
		m.mu.Unlock()
	}
	return v
}
