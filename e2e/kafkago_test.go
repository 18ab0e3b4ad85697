package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestKafkaGoRange runs a three-member segmentio/kafka-go consumer group
// (its ConsumerGroup/Generation API, which exposes assignments and commit
// control) with the range balancer on a 12-partition topic: one owner per
// partition as generations and DescribeGroups agree, commits through
// Generation.CommitOffsets read back exactly through kadm, and the two
// remaining members take over when the third closes.
func TestKafkaGoRange(t *testing.T) {
	t.Parallel()
	addr := startServer(t)
	ctx := testContext(t, 50*time.Second)
	adm := newAdmin(t, addr)
	const topic, group, protocol = "kafkago-topic", "kafkago-group", "range"
	createTopic(ctx, t, adm, topic, groupPartitions)

	members := make([]*kafkaGoMember, 3)
	for i := range members {
		members[i] = startKafkaGoMember(ctx, t, addr, group, topic, i)
	}
	waitFor(ctx, t, "three kafka-go members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, protocol, kafkaGoView(members))
	})

	// kafka-go's OffsetCommit v2 carries no metadata: it reads back empty.
	want := map[string]map[int32]committed{topic: {}}
	for i, m := range members {
		offsets := make(map[int]int64)
		for _, p := range m.owned.list() {
			offsets[int(p)] = commitOffsetFor(i, p, 0)
			want[topic][p] = committed{Offset: offsets[int(p)]}
		}
		if err := m.commit(topic, offsets); err != nil {
			t.Fatalf("member %d commit: %v", i, err)
		}
	}
	checkOffsets(ctx, t, adm, group, want)

	members[2].close()
	waitFor(ctx, t, "two kafka-go members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, protocol, kafkaGoView(members[:2]))
	})
	checkOffsets(ctx, t, adm, group, want)
}

// kafkaGoMember is one kafka-go ConsumerGroup member. Ownership is the
// current generation's assignment, cleared when the generation ends.
type kafkaGoMember struct {
	cg        *kafka.ConsumerGroup
	owned     ownedSet
	mu        sync.Mutex
	gen       *kafka.Generation
	done      chan struct{}
	closeOnce sync.Once
}

func startKafkaGoMember(ctx context.Context, t *testing.T, addr, group, topic string, idx int) *kafkaGoMember {
	t.Helper()
	name := fmt.Sprintf("kafka-go-%d", idx)
	logw := logWriter(t, name).(*testWriter)
	m := &kafkaGoMember{done: make(chan struct{})}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                group,
		Brokers:           []string{addr},
		Dialer:            &kafka.Dialer{ClientID: name, Timeout: 5 * time.Second},
		Topics:            []string{topic},
		GroupBalancers:    []kafka.GroupBalancer{kafka.RangeGroupBalancer{}},
		HeartbeatInterval: heartbeatInterval,
		SessionTimeout:    sessionTimeout,
		RebalanceTimeout:  rebalanceTimeout,
		JoinGroupBackoff:  200 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
		Timeout:           5 * time.Second,
		ErrorLogger:       kafka.LoggerFunc(logw.logf),
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m.cg = cg
	go func() {
		defer close(m.done)
		for {
			gen, err := cg.Next(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
					return
				}
				logw.logf("next generation: %v", err)
				continue
			}
			var ps []int32
			for _, a := range gen.Assignments[topic] {
				ps = append(ps, int32(a.ID))
			}
			m.mu.Lock()
			m.gen = gen
			m.owned.set(ps)
			m.mu.Unlock()
			// The generation ends (rebalance, error or close) when this
			// context does; Next then waits for the following one.
			gen.Start(func(gctx context.Context) {
				<-gctx.Done()
				m.mu.Lock()
				if m.gen == gen {
					m.gen = nil
					m.owned.set(nil)
				}
				m.mu.Unlock()
			})
		}
	}()
	t.Cleanup(m.close)
	return m
}

// commit commits offsets in the current generation (kafka-go sends them as
// given).
func (m *kafkaGoMember) commit(topic string, offsets map[int]int64) error {
	m.mu.Lock()
	gen := m.gen
	m.mu.Unlock()
	if gen == nil {
		return errors.New("no live generation")
	}
	return gen.CommitOffsets(map[string]map[int]int64{topic: offsets})
}

// close leaves the group (kafka-go sends LeaveGroup on Close).
func (m *kafkaGoMember) close() {
	m.closeOnce.Do(func() {
		closed := make(chan struct{})
		go func() {
			_ = m.cg.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
		}
	})
}

func kafkaGoView(members []*kafkaGoMember) groupView {
	v := make(groupView)
	for _, m := range members {
		m.mu.Lock()
		if m.gen != nil {
			v[m.gen.MemberID] = m.owned.list()
		} else {
			v[""] = nil // between generations: checkGroup rejects the view
		}
		m.mu.Unlock()
	}
	return v
}
