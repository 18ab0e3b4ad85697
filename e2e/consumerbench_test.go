package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkConsumerGroupHeartbeat measures steady-state KIP-848
// heartbeats: one group of benchClients consumer-protocol members on a
// topic of as many partitions, settled, each heartbeating at its epoch
// with nothing to change (the answer is read from the coordinator's
// memory; kcoord confirms its leadership with a quorum first, as for
// every read, and writes nothing). One iteration is one heartbeat;
// "serial" is one member, "parallel64" all of them. kfake is the
// baseline. Compare heartbeats/s.
//
//	go test ./e2e -run '^$' -bench ConsumerGroupHeartbeat -benchtime 2000x
func BenchmarkConsumerGroupHeartbeat(b *testing.B) {
	b.Run("kcoord", func(b *testing.B) {
		benchConsumerHeartbeat(b, startServer(b))
	})
	b.Run("kfake", func(b *testing.B) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		benchConsumerHeartbeat(b, c.ListenAddrs()[0])
	})
}

// benchMember is one raw consumer-protocol member of the benchmark group.
type benchMember struct {
	cl    *kgo.Client
	id    string
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

func (m *benchMember) heartbeat(ctx context.Context, group, topic string, full bool) error {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, m.id, m.epoch, -1
	if full {
		req.RebalanceTimeoutMillis = 60000
		req.SubscribedTopicNames = []string{topic}
		req.Topics = append([]kmsg.ConsumerGroupHeartbeatRequestTopic{}, m.owned...)
	}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("member %s: %w", m.id, err)
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = m.owned[:0]
		for _, t := range resp.Assignment.Topics {
			m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	return nil
}

func benchConsumerHeartbeat(b *testing.B, addr string) {
	const topic, group = "bench-kip848", "bench-kip848-group"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	adm := newAdmin(b, addr)
	createTopic(ctx, b, adm, topic, benchClients)
	members := make([]*benchMember, benchClients)
	for i := range members {
		members[i] = &benchMember{cl: newClient(b, addr), id: fmt.Sprintf("bench-member-%02d-000000000", i),
			owned: []kmsg.ConsumerGroupHeartbeatRequestTopic{}}
	}
	// Settle the group: full heartbeats, each saying what the member
	// owns, until every member is at the group's epoch with its share.
	deadline := time.Now().Add(time.Minute)
	for {
		for _, m := range members {
			if err := m.heartbeat(ctx, group, topic, true); err != nil {
				b.Fatalf("settling: %v", err)
			}
		}
		described, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			b.Fatal(err)
		}
		d := described[group]
		settled := d.State == "Stable" && len(d.Members) == benchClients
		for _, m := range members {
			settled = settled && m.epoch == d.Epoch
		}
		if settled {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the benchmark group did not settle: %s at epoch %d", d.State, d.Epoch)
		}
	}
	benchRoundTrips(b, "heartbeats/s", func(i int) error { return members[i].heartbeat(ctx, group, topic, false) })
}
