package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kcoord/kcoord/server"
)

const (
	// statusPoll is how often drainNode asks for the cluster's status
	// (each ask calls every live node).
	statusPoll = 200 * time.Millisecond
	// shardsStatusTimeout bounds one in-process status call.
	shardsStatusTimeout = 5 * time.Second
)

// addNode starts a fresh node, as `kcoord serve --join` alone starts one
// (no bootstrap-expect), joining the live nodes' gossip, and times it
// until placement has given it its share of replicas (AddResult). Bounded
// by phase.
func (c *shardsCluster) addNode(ctx context.Context, phase time.Duration) (AddResult, error) {
	id := slices.Max(slices.Collect(maps.Keys(c.live))) + 1
	nodes := len(c.live) + 1
	r := AddResult{Node: id, Target: c.shards * min(shardsRF, nodes) / nodes}
	cfg, err := c.nodeConfig(id, 0)
	if err != nil {
		return r, err
	}
	cfg.Join = c.gossipAddrs()
	t0 := time.Now()
	s, err := c.start(cfg)
	if err != nil {
		return r, fmt.Errorf("start node %d: %w", id, err)
	}
	pctx, cancel := context.WithTimeout(ctx, phase)
	defer cancel()
	err = poll(pctx, settlePoll, func() bool {
		held := s.Node().PlacementStats().Replicas
		if r.Share == 0 && held >= r.Target && held > 0 {
			r.Share = time.Since(t0)
		}
		if held > 0 && c.settled() {
			r.Settled, r.Replicas = time.Since(t0), held
			if r.Share == 0 { // it holds fewer than floor: what placement gives it
				r.Share = r.Settled
			}
			return true
		}
		return false
	}, fmt.Sprintf("node %d not given its share", id))
	return r, err
}

// drainNode removes (drains) the original node with the highest id that
// does not lead the metadata group, as `kcoord cluster remove-node` does,
// and times it until the cluster's status, asked of another node, reports
// it drained: no shard's configuration names it a voter. Bounded by
// phase.
func (c *shardsCluster) drainNode(ctx context.Context, phase time.Duration) (DrainResult, error) {
	var r DrainResult
	var observer *server.Server
	for _, id := range slices.Backward(c.original) {
		s, ok := c.live[id]
		if !ok {
			continue
		}
		if b, ok := s.Node().MetaLeader(); r.Node == 0 && ok && b.NodeID != id {
			r.Node = id
		} else if observer == nil {
			observer = s
		}
	}
	if r.Node == 0 || observer == nil {
		return r, fmt.Errorf("no original node to drain and another to ask (live: %v)", slices.Sorted(maps.Keys(c.live)))
	}
	r.Replicas = c.live[r.Node].Node().PlacementStats().Replicas
	pctx, cancel := context.WithTimeout(ctx, phase)
	defer cancel()
	t0 := time.Now()
	var last error
	if err := poll(pctx, statusPoll, func() bool {
		last = observer.Node().RemoveNode(pctx, r.Node)
		return last == nil
	}, "remove-node"); err != nil {
		return r, fmt.Errorf("%w (last error: %v)", err, last)
	}
	state := ""
	err := poll(pctx, statusPoll, func() bool {
		sctx, cancel := context.WithTimeout(pctx, shardsStatusTimeout)
		defer cancel()
		for _, n := range observer.Node().Status(sctx).Nodes {
			if n.ID == r.Node {
				state = n.State
			}
		}
		return state == "drained"
	}, fmt.Sprintf("node %d not drained", r.Node))
	r.Took = time.Since(t0)
	if err != nil {
		return r, fmt.Errorf("%w (last state %q)", err, state)
	}
	return r, nil
}
