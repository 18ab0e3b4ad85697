package server

import (
	"errors"
	"strconv"
	"sync"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

var exportOnce struct {
	sync.Once
	reg prometheus.Registerer
	err error
}

// ExportRaftMetrics bridges hashicorp/raft's go-metrics to reg, as
// summaries and counters named kcoord_raft_* (kcoord_raft_commitTime in
// milliseconds, kcoord_raft_state_leader, ...). go-metrics is process-wide,
// so only the first registry of a process gets them; a call with another
// one is an error: kcoord serve calls it once. The per-shard figures (indexes,
// terms, follower lag) are the server's own collector's.
func ExportRaftMetrics(reg prometheus.Registerer) error {
	exportOnce.Do(func() {
		exportOnce.reg = reg
		sink, err := newRaftSink(reg)
		if err != nil {
			exportOnce.err = err
			return
		}
		// No service name, type prefix, hostname or filter: each would
		// cost raft's every sample a copy of its key or a lookup; the
		// sink picks what it exports.
		conf := gometrics.DefaultConfig("")
		conf.EnableHostname, conf.EnableHostnameLabel, conf.EnableRuntimeMetrics = false, false, false
		conf.EnableTypePrefix, conf.EnableServiceLabel = false, false
		conf.FilterDefault = true
		_, exportOnce.err = gometrics.NewGlobal(conf, sink)
	})
	if exportOnce.err != nil {
		return errors.Join(errors.New("metrics: bridging raft's metrics"), exportOnce.err)
	}
	if exportOnce.reg != reg {
		return errors.New("metrics: raft's metrics go to another registry already (go-metrics is process-wide)")
	}
	return nil
}

// raftCollector reports every shard's Raft state at scrape time
// (cluster.Node.RaftStats).
type raftCollector struct {
	s                                         *Server
	term, last, commit, applied, leader, wins *prometheus.Desc
	lag, contact                              *prometheus.Desc
}

func newRaftCollector(s *Server) *raftCollector {
	shard := []string{"shard"}
	follower := []string{"shard", "follower"}
	return &raftCollector{
		s:       s,
		term:    prometheus.NewDesc("kcoord_raft_term", "The shard's current Raft term (shard -1 is the metadata group).", shard, nil),
		last:    prometheus.NewDesc("kcoord_raft_last_index", "The last entry in this replica's log.", shard, nil),
		commit:  prometheus.NewDesc("kcoord_raft_commit_index", "The last entry this replica knows committed.", shard, nil),
		applied: prometheus.NewDesc("kcoord_raft_applied_index", "The last entry this replica's state machine applied.", shard, nil),
		leader:  prometheus.NewDesc("kcoord_raft_leader", "1 when this node leads the shard.", shard, nil),
		wins:    prometheus.NewDesc("kcoord_raft_leaderships_total", "Times this node became the shard's leader since it started.", shard, nil),
		lag: prometheus.NewDesc("kcoord_raft_follower_lag_entries",
			"On the shard's leader: the entries of its log a follower has not acknowledged.", follower, nil),
		contact: prometheus.NewDesc("kcoord_raft_follower_last_contact_seconds",
			"On the shard's leader: how long ago a follower last answered.", follower, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.term, c.last, c.commit, c.applied, c.leader, c.wins, c.lag, c.contact} {
		ch <- d
	}
}

// Collect implements prometheus.Collector; it runs on the scraper's
// goroutine.
func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	node := c.s.raftNode.Load()
	if node == nil {
		return
	}
	for _, st := range node.RaftStats() {
		shard := strconv.Itoa(int(st.Shard))
		gauge := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), shard)
		}
		gauge(c.term, st.Term)
		gauge(c.last, st.LastIndex)
		gauge(c.commit, st.CommitIndex)
		gauge(c.applied, st.AppliedIndex)
		leads := uint64(0)
		if st.Leader {
			leads = 1
		}
		gauge(c.leader, leads)
		ch <- prometheus.MustNewConstMetric(c.wins, prometheus.CounterValue, float64(st.LeadershipsGained), shard)
		for _, f := range st.Followers {
			id := strconv.Itoa(int(f.NodeID))
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(f.Lag), shard, id)
			if f.SinceContact >= 0 {
				ch <- prometheus.MustNewConstMetric(c.contact, prometheus.GaugeValue, f.SinceContact.Seconds(), shard, id)
			}
		}
	}
}
