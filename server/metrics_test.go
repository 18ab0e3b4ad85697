package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A consumer group's rebalance shows in kcoord_rebalance_duration_seconds
// and kcoord_rebalances_total, as Kafka's rebalance-latency and
// rebalance-rate metrics do.
func TestMetricsCountRebalancesAndTheirLength(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(TestConfig(t.TempDir()), TestLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	createTopicOn(t, s, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	member, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	go func() {
		for ctx.Err() == nil && !member.PollFetches(ctx).IsClientClosed() {
		}
	}()
	admin, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for {
		d, err := kadm.NewClient(admin).DescribeGroups(ctx, "g")
		if err == nil && d["g"].State == "Stable" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group g not Stable: %+v, %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, ok := gatherValue(t, reg, "kcoord_rebalances_total"); !ok || n != 1 {
		t.Errorf("kcoord_rebalances_total = %v (%v), want 1", n, ok)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "kcoord_rebalance_duration_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			found = h.GetSampleCount() == 1 && h.GetSampleSum() > 0
		}
	}
	if !found {
		t.Error("kcoord_rebalance_duration_seconds has not the one rebalance, with its length")
	}
	if _, ok := gatherValue(t, reg, "kcoord_offsets_expired_total"); !ok {
		t.Error("kcoord_offsets_expired_total is missing")
	}
}
