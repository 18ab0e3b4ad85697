package server

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// gatherValue returns the value of metric name with labels (label=value
// pairs) from reg, and whether it is there.
func gatherValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Summary != nil:
				return float64(m.GetSummary().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func createTopicOn(t *testing.T, s *Server, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The metadata leader reports, per shard, its Raft indexes and term, that
// it leads, and each follower's lag, which falls to 0 once the followers
// have the last entry.
func TestRaftCollectorReportsShardsAndFollowers(t *testing.T) {
	servers := StartTestCluster(t, 3, nil)
	waitAllReady(t, servers)
	b, ok := servers[0].Node().MetaLeader()
	if !ok {
		t.Fatal("no metadata leader")
	}
	leader := servers[b.NodeID-1]
	createTopicOn(t, leader, "metrics")
	reg := prometheus.NewRegistry()
	reg.MustRegister(newRaftCollector(leader))

	if v, ok := gatherValue(t, reg, "kcoord_raft_leader", "shard", "-1"); !ok || v != 1 {
		t.Errorf("kcoord_raft_leader{shard=-1} = %v (%v) on the metadata leader, want 1", v, ok)
	}
	applied, _ := gatherValue(t, reg, "kcoord_raft_applied_index", "shard", "-1")
	last, _ := gatherValue(t, reg, "kcoord_raft_last_index", "shard", "-1")
	if applied < 1 || applied > last {
		t.Errorf("applied index %v, last index %v: want 1 <= applied <= last", applied, last)
	}
	if v, ok := gatherValue(t, reg, "kcoord_raft_term", "shard", "0"); !ok || v < 1 {
		t.Errorf("kcoord_raft_term{shard=0} = %v (%v)", v, ok)
	}
	for _, s := range servers {
		if s == leader {
			continue
		}
		follower := []string{"shard", "-1", "follower", strconv.Itoa(int(s.cfg.NodeID))}
		deadline := time.Now().Add(10 * time.Second)
		for {
			lag, ok := gatherValue(t, reg, "kcoord_raft_follower_lag_entries", follower...)
			if ok && lag == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("follower %s: lag %v (%v), want 0", follower[3], lag, ok)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if c, ok := gatherValue(t, reg, "kcoord_raft_follower_last_contact_seconds", follower...); !ok || c < 0 || c > 5 {
			t.Errorf("follower %s: last contact %v s ago (%v)", follower[3], c, ok)
		}
	}
}

// bridgedRegistry is the one registry ExportRaftMetrics may be given in
// this test process (go-metrics is process-wide), so -count=2 reuses it.
var bridgedRegistry = prometheus.NewRegistry()

// hashicorp/raft's own metrics (commit time, state changes) reach the
// registry ExportRaftMetrics was given.
func TestExportRaftMetricsBridgesRaftsOwn(t *testing.T) {
	reg := bridgedRegistry
	if err := ExportRaftMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := ExportRaftMetrics(prometheus.NewRegistry()); err == nil {
		t.Error("a second registry was accepted; it would get none of raft's metrics")
	}
	s := StartTestServer(t, TestConfig(t.TempDir()))
	createTopicOn(t, s, "bridged")
	for _, name := range []string{"kcoord_raft_commitTime", "kcoord_raft_fsm_apply", "kcoord_raft_state_leader"} {
		if v, ok := gatherValue(t, reg, name); !ok || v < 1 {
			t.Errorf("%s = %v (%v), want at least one sample", name, v, ok)
		}
	}
	if _, ok := gatherValue(t, reg, "kcoord_raft_net_rpcDecode"); ok {
		t.Error("a raft metric outside raftMetricPrefixes was exported")
	}
}
