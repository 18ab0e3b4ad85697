package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kcoord/kcoord/cluster"
)

// collector reports the coordinators' state at scrape time, so nothing on
// the request path updates metrics.
type collector struct {
	s           *Server
	groups      *prometheus.Desc
	members     *prometheus.Desc
	shardsLed   *prometheus.Desc
	shards      *prometheus.Desc
	committed   *prometheus.Desc
	rebalances  *prometheus.Desc
	expired     *prometheus.Desc
	offsetsExp  *prometheus.Desc
	held        *prometheus.Desc
	heldFor     *prometheus.Desc
	holdsLapsed *prometheus.Desc
	// placement (cluster.PlacementStats)
	underReplicated *prometheus.Desc
	movesTotal      *prometheus.Desc
	movesInFlight   *prometheus.Desc
	// disk (cluster.Node.DiskHealth)
	diskHealthy *prometheus.Desc
	diskFences  *prometheus.Desc
}

func newCollector(s *Server) *collector {
	return &collector{
		s:           s,
		groups:      prometheus.NewDesc("kcoord_groups", "Groups this node coordinates, by state.", []string{"state"}, nil),
		members:     prometheus.NewDesc("kcoord_group_members", "Members of the groups this node coordinates.", nil, nil),
		shardsLed:   prometheus.NewDesc("kcoord_shards_led", "Group shards this node leads and serves.", nil, nil),
		shards:      prometheus.NewDesc("kcoord_shards", "Group shards this node holds a voting replica of.", nil, nil),
		committed:   prometheus.NewDesc("kcoord_offsets_committed_total", "Partition offsets committed through this node (acknowledged).", nil, nil),
		rebalances:  prometheus.NewDesc("kcoord_rebalances_total", "Rebalances completed on this node (a group became Stable).", nil, nil),
		expired:     prometheus.NewDesc("kcoord_members_expired_total", "Members removed for missing their session, join or sync deadline.", nil, nil),
		offsetsExp:  prometheus.NewDesc("kcoord_offsets_expired_total", "Partitions' committed offsets removed for retention (offsets.retention.minutes).", nil, nil),
		held:        prometheus.NewDesc("kcoord_group_requests_held_total", "Group requests held on this node while their shard's leadership settled.", nil, nil),
		heldFor:     prometheus.NewDesc("kcoord_group_request_hold_seconds_total", "Total time group requests were held while their shard's leadership settled.", nil, nil),
		holdsLapsed: prometheus.NewDesc("kcoord_group_request_holds_expired_total", "Held group requests answered because kcoord.group.election.hold.ms ran out.", nil, nil),
		underReplicated: prometheus.NewDesc("kcoord_shards_under_replicated",
			"Shards, the metadata shard among them, with fewer live voters than placement desires, or no known leader (on the metadata leader; 0 elsewhere).", nil, nil),
		movesTotal: prometheus.NewDesc("kcoord_replica_moves_total",
			"Replicas this node, as a shard's leader, promoted to voter after they caught up.", nil, nil),
		movesInFlight: prometheus.NewDesc("kcoord_replica_moves_in_flight",
			"Shards, the metadata shard among them, whose configuration is not yet their desired voters (on the metadata leader; 0 elsewhere).", nil, nil),
		diskHealthy: prometheus.NewDesc("kcoord_log_disk_healthy",
			"1 while the node's log disk completes every write within kcoord.log.max.sync.ms; 0 while the node is fenced for it (state: stalled or failed).", []string{"state"}, nil),
		diskFences: prometheus.NewDesc("kcoord_log_disk_fences_total",
			"Times this node fenced itself because its log disk stalled or failed.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.groups
	ch <- c.members
	ch <- c.shardsLed
	ch <- c.committed
	ch <- c.rebalances
	ch <- c.expired
	ch <- c.offsetsExp
	ch <- c.held
	ch <- c.heldFor
	ch <- c.holdsLapsed
	ch <- c.shards
	ch <- c.underReplicated
	ch <- c.movesTotal
	ch <- c.movesInFlight
	ch <- c.diskHealthy
	ch <- c.diskFences
}

// Collect implements prometheus.Collector; it runs on the scraper's
// goroutine.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	coords := c.s.coords
	c.s.mu.Unlock()
	byState := map[string]int{"Empty": 0, "PreparingRebalance": 0, "CompletingRebalance": 0, "Stable": 0}
	members, led := 0, 0
	var committed, rebalances, expired, offsetsExpired, held, lapsed uint64
	var heldFor float64
	for _, co := range coords {
		if co == nil {
			continue
		}
		st := co.Stats()
		committed, rebalances, expired = committed+st.Committed, rebalances+st.Rebalances, expired+st.Expired
		offsetsExpired += st.OffsetsExpired
		held, lapsed, heldFor = held+st.Held, lapsed+st.HoldsExpired, heldFor+st.HeldFor.Seconds()
		if !st.Active {
			continue
		}
		led++
		members += st.Members
		for state, n := range st.GroupsByState {
			byState[state] += n
		}
	}
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(members))
	ch <- prometheus.MustNewConstMetric(c.shardsLed, prometheus.GaugeValue, float64(led))
	ch <- prometheus.MustNewConstMetric(c.committed, prometheus.CounterValue, float64(committed))
	ch <- prometheus.MustNewConstMetric(c.rebalances, prometheus.CounterValue, float64(rebalances))
	ch <- prometheus.MustNewConstMetric(c.expired, prometheus.CounterValue, float64(expired))
	ch <- prometheus.MustNewConstMetric(c.offsetsExp, prometheus.CounterValue, float64(offsetsExpired))
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.CounterValue, float64(held))
	ch <- prometheus.MustNewConstMetric(c.heldFor, prometheus.CounterValue, heldFor)
	ch <- prometheus.MustNewConstMetric(c.holdsLapsed, prometheus.CounterValue, float64(lapsed))
	var ps cluster.PlacementStats
	if node := c.s.raftNode.Load(); node != nil {
		ps = node.PlacementStats()
	}
	ch <- prometheus.MustNewConstMetric(c.shards, prometheus.GaugeValue, float64(ps.Replicas))
	ch <- prometheus.MustNewConstMetric(c.underReplicated, prometheus.GaugeValue, float64(ps.UnderReplicated))
	ch <- prometheus.MustNewConstMetric(c.movesTotal, prometheus.CounterValue, float64(ps.MovesDone))
	ch <- prometheus.MustNewConstMetric(c.movesInFlight, prometheus.GaugeValue, float64(ps.MovesInFlight))
	disk, fences := cluster.DiskHealth{State: cluster.DiskHealthy}, uint64(0)
	if node := c.s.raftNode.Load(); node != nil {
		disk, fences = node.DiskHealth(), node.DiskFences()
	}
	healthy := 1.0
	if disk.Fenced() {
		healthy = 0
	}
	ch <- prometheus.MustNewConstMetric(c.diskHealthy, prometheus.GaugeValue, healthy, string(disk.State))
	ch <- prometheus.MustNewConstMetric(c.diskFences, prometheus.CounterValue, float64(fences))
}
