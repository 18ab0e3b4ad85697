package server

import (
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// newSinkMetrics returns go-metrics configured as ExportRaftMetrics does,
// over a raftSink on reg.
func newSinkMetrics(t testing.TB, reg *prometheus.Registry) *gometrics.Metrics {
	t.Helper()
	sink, err := newRaftSink(reg)
	if err != nil {
		t.Fatal(err)
	}
	conf := gometrics.DefaultConfig("")
	conf.EnableHostname, conf.EnableHostnameLabel, conf.EnableRuntimeMetrics = false, false, false
	conf.FilterDefault = true
	m, err := gometrics.New(conf, sink)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The sink exports raft's timings that matter, with raft's labels, and
// its state changes, and drops everything else raft emits.
func TestRaftSinkExportsTheChosenMetricsOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newSinkMetrics(t, reg)
	start := time.Now().Add(-3 * time.Millisecond)
	m.MeasureSince([]string{"raft", "commitTime"}, start)
	m.MeasureSince([]string{"raft", "fsm", "apply"}, start)
	m.MeasureSinceWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, start, []gometrics.Label{{Name: "peer_id", Value: "2"}})
	m.MeasureSince([]string{"raft", "replication", "appendEntries", "rpc", "2"}, start) // the per-peer name: dropped
	m.MeasureSinceWithLabels([]string{"raft", "net", "rpcDecode"}, start, []gometrics.Label{{Name: "rpcType", Value: "AppendEntries"}})
	m.MeasureSince([]string{"raft", "fsm", "applyBatch"}, start)
	m.AddSample([]string{"raft", "fsm", "applyBatchNum"}, 3) // a longer name than fsm.applyBatch: dropped
	m.IncrCounter([]string{"raft", "state", "leader"}, 1)
	m.IncrCounter([]string{"raft", "state", "leader"}, 1)
	m.IncrCounter([]string{"raft", "apply"}, 1)
	m.SetGauge([]string{"raft", "peers"}, 3)

	if v, ok := gatherValue(t, reg, "kcoord_raft_commitTime"); !ok || v != 1 {
		t.Errorf("kcoord_raft_commitTime: %v samples (%v), want 1", v, ok)
	}
	if v, ok := gatherValue(t, reg, "kcoord_raft_replication_appendEntries_rpc", "peer_id", "2"); !ok || v != 1 {
		t.Errorf("kcoord_raft_replication_appendEntries_rpc{peer_id=2}: %v (%v), want 1", v, ok)
	}
	if v, ok := gatherValue(t, reg, "kcoord_raft_state_leader"); !ok || v != 2 {
		t.Errorf("kcoord_raft_state_leader = %v (%v), want 2", v, ok)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "kcoord_raft_net_rpcDecode", "kcoord_raft_fsm_applyBatchNum", "kcoord_raft_apply", "kcoord_raft_peers",
			"kcoord_raft_replication_appendEntries_rpc_2":
			t.Errorf("%s was exported", mf.GetName())
		case "kcoord_raft_fsm_apply", "kcoord_raft_fsm_applyBatch":
			if s := mf.GetMetric()[0].GetSummary(); s.GetSampleCount() != 1 || s.GetSampleSum() < 3 {
				t.Errorf("%s: %d samples summing to %v ms, want 1 of at least 3 ms", mf.GetName(), s.GetSampleCount(), s.GetSampleSum())
			}
		}
	}
}

// BenchmarkRaftSink measures what raft's metrics cost it per emission
// through the sink ExportRaftMetrics installs, beside go-metrics' own
// Prometheus sink behind a prefix filter (what kcoord used before), in
// one run: go test ./server -run '^$' -bench RaftSink -benchmem
func BenchmarkRaftSink(b *testing.B) {
	start := time.Now()
	emit := map[string]func(m *gometrics.Metrics){
		"exported": func(m *gometrics.Metrics) { m.MeasureSince([]string{"raft", "commitTime"}, start) },
		"exported-labels": func(m *gometrics.Metrics) {
			m.MeasureSinceWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, start, []gometrics.Label{{Name: "peer_id", Value: "2"}})
		},
		"dropped": func(m *gometrics.Metrics) {
			m.MeasureSinceWithLabels([]string{"raft", "net", "rpcDecode"}, start, []gometrics.Label{{Name: "rpcType", Value: "AppendEntries"}})
		},
	}
	before := func(b *testing.B) *gometrics.Metrics {
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: prometheus.NewRegistry()})
		if err != nil {
			b.Fatal(err)
		}
		conf := gometrics.DefaultConfig("kcoord")
		conf.EnableHostname, conf.EnableHostnameLabel, conf.EnableRuntimeMetrics = false, false, false
		conf.FilterDefault = false
		conf.AllowedPrefixes = []string{"kcoord.raft.commitTime", "kcoord.raft.fsm.apply", "kcoord.raft.leader.dispatchLog",
			"kcoord.raft.rpc.appendEntries.storeLogs", "kcoord.raft.replication.appendEntries.rpc", "kcoord.raft.state.",
			"kcoord.raft.transition.", "kcoord.raft.snapshot."}
		m, err := gometrics.New(conf, sink)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	for _, name := range []string{"exported", "exported-labels", "dropped"} {
		b.Run(name+"/go-metrics-prometheus", func(b *testing.B) {
			m := before(b)
			b.ReportAllocs()
			for b.Loop() {
				emit[name](m)
			}
		})
		b.Run(name+"/raftSink", func(b *testing.B) {
			m := newSinkMetrics(b, prometheus.NewRegistry())
			b.ReportAllocs()
			for b.Loop() {
				emit[name](m)
			}
		})
	}
}
