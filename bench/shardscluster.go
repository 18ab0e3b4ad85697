package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kcoord/kcoord/server"
)

// shardsCluster is the in-process cluster of one configuration of the
// shard-count study: nodes on loopback, data under dir, production Raft
// timings, shards group shards with replication factor 3. Only Shards'
// goroutine uses it; killAll must run when it is done with, on error too.
type shardsCluster struct {
	dir    string
	shards int
	logger hclog.Logger
	// live are the running servers by node id, killed those stopped by
	// kill (until restarted), started every server ever started.
	live, killed map[int32]*server.Server
	started      []*server.Server
	// original are the node ids started by startAll.
	original []int32
}

// startAll starts nodes nodes (ids 1..nodes, each joining the first's
// gossip, bootstrap-expect nodes), waits until every one is ready and
// then until leadership is spread, and records both times and the spread
// in r. Each wait is bounded by phase.
func (c *shardsCluster) startAll(ctx context.Context, nodes int, phase time.Duration, r *ShardsResult) error {
	c.live, c.killed = map[int32]*server.Server{}, map[int32]*server.Server{}
	t0 := time.Now()
	for i := range nodes {
		id := int32(i + 1)
		cfg, err := c.nodeConfig(id, nodes)
		if err != nil {
			return err
		}
		if i > 0 {
			cfg.Join = []string{c.live[1].BoundConfig().GossipAddr}
		}
		if _, err := c.start(cfg); err != nil {
			return fmt.Errorf("start node %d: %w", id, err)
		}
		c.original = append(c.original, id)
	}
	pctx, cancel := context.WithTimeout(ctx, phase)
	defer cancel()
	for _, s := range c.servers() {
		if err := s.WaitReady(pctx); err != nil {
			return fmt.Errorf("node %d not ready: %w", s.Node().ID(), err)
		}
	}
	r.Ready = time.Since(t0)
	t1 := time.Now()
	pctx, cancel = context.WithTimeout(ctx, phase)
	defer cancel()
	if err := WaitLeadersSpread(pctx, c.servers()); err != nil {
		return err
	}
	r.Spread = time.Since(t1)
	r.LeadMin, r.LeadMax = c.shards, 0
	for _, s := range c.servers() {
		led := leads(s)
		r.LeadMin, r.LeadMax = min(r.LeadMin, led), max(r.LeadMax, led)
	}
	return nil
}

// nodeConfig is node id's configuration with a fresh data directory:
// server.TestClusterConfig's loopback ports, with production Raft timings
// and the study's shards and replication factor. expect is its
// bootstrap-expect (0 for a node added with Join alone).
func (c *shardsCluster) nodeConfig(id int32, expect int) (server.Config, error) {
	dir, err := os.MkdirTemp(c.dir, fmt.Sprintf("node%d-", id))
	if err != nil {
		return server.Config{}, err
	}
	cfg := server.TestClusterConfig(dir, int(id-1), expect)
	cfg.Raft = nil // production timings
	cfg.OffsetsTopicNumPartitions = int32(c.shards)
	cfg.OffsetsTopicReplicationFactor = shardsRF
	return cfg, nil
}

// start starts a server with cfg, logging as node<id>; it does not wait
// for it to be ready. A server whose Start failed is still killed by
// killAll.
func (c *shardsCluster) start(cfg server.Config) (*server.Server, error) {
	s, err := server.New(cfg, c.logger.Named(fmt.Sprintf("node%d", cfg.NodeID)), nil)
	if err != nil {
		return nil, err
	}
	c.started = append(c.started, s)
	if err := s.Start(); err != nil {
		return nil, err
	}
	c.live[cfg.NodeID] = s
	return s, nil
}

// kill stops node id abruptly, as a crash (server.Kill).
func (c *shardsCluster) kill(id int32) {
	s := c.live[id]
	delete(c.live, id)
	c.killed[id] = s
	_ = s.Kill()
}

// restart starts killed node id again on its data and addresses, joining
// the live nodes' gossip, and waits until it is ready and placement has
// settled (within phase).
func (c *shardsCluster) restart(ctx context.Context, id int32, phase time.Duration) error {
	cfg := c.killed[id].BoundConfig()
	cfg.Join = c.gossipAddrs()
	s, err := c.start(cfg)
	if err != nil {
		return err
	}
	delete(c.killed, id)
	pctx, cancel := context.WithTimeout(ctx, phase)
	defer cancel()
	if err := s.WaitReady(pctx); err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	return c.waitSettled(pctx, nil)
}

// killAll kills every server ever started. Idempotent.
func (c *shardsCluster) killAll() {
	for _, s := range c.started {
		_ = s.Kill()
	}
}

// servers are the live servers, by node id.
func (c *shardsCluster) servers() []*server.Server {
	var out []*server.Server
	for _, id := range slices.Sorted(maps.Keys(c.live)) {
		out = append(out, c.live[id])
	}
	return out
}

// brokers are the live servers' Kafka addresses.
func (c *shardsCluster) brokers() []string {
	var out []string
	for _, s := range c.servers() {
		out = append(out, s.KafkaAddr().String())
	}
	return out
}

// gossipAddrs are the live servers' gossip addresses.
func (c *shardsCluster) gossipAddrs() []string {
	var out []string
	for _, s := range c.servers() {
		out = append(out, s.BoundConfig().GossipAddr)
	}
	return out
}

// leads is how many group shards s leads, by its own Raft instances.
func leads(s *server.Server) int {
	n := 0
	for _, sh := range s.Node().Shards() {
		if sh.IsLeader() {
			n++
		}
	}
	return n
}

// settled reports whether the metadata leader, among the live servers,
// says placement has settled: no shard moving, queued behind the move
// limit or under-replicated (cluster.PlacementStats).
func (c *shardsCluster) settled() bool {
	for _, s := range c.servers() {
		st := s.Node().PlacementStats()
		if st.MetaLeader && st.MovesInFlight == 0 && st.MovesQueued == 0 && st.UnderReplicated == 0 {
			return true
		}
	}
	return false
}

// waitSettled polls until placement settled and done (if set) reports
// true, or ctx ends.
func (c *shardsCluster) waitSettled(ctx context.Context, done func() bool) error {
	return poll(ctx, settlePoll, func() bool { return c.settled() && (done == nil || done()) }, "placement not settled")
}

// poll calls cond every interval until it reports true, or ctx ends
// (an error saying what, wrapping ctx's).
func poll(ctx context.Context, interval time.Duration, cond func() bool, what string) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// settlePoll is how often placement's progress is looked at: each look
// reads the nodes' own state, no call between nodes.
const settlePoll = 50 * time.Millisecond
