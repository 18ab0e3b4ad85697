package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/cluster"
)

// AddNodeResult is a node added to the full cluster under a steady commit
// load (Load's last phase).
type AddNodeResult struct {
	// Node is the added node's id; Target the replicas that are its share
	// (floor of shards × 3 / nodes); Replicas those it voted in once
	// placement settled.
	Node, Target, Replicas int
	// Share is from its start until it voted in Target shards; Settled
	// until no shard was moving or under-replicated any more.
	Share, Settled time.Duration
	// Before is the probe's commits in the baseline before the node
	// started; During those from its start until placement settled.
	Before, During ProbeWindow
}

const (
	// probeClients is how many clients commit during the add-node phase:
	// a steady load that does not saturate the cluster, so its latency
	// shows what the moves cost (as e2e's BenchmarkReplicaMoves).
	probeClients = 8
	// addNodeBound bounds the wait for placement to settle after the add.
	addNodeBound = 30 * time.Minute
	// addNodePoll is how often the cluster's status is asked meanwhile.
	addNodePoll = 500 * time.Millisecond
)

// loadAddNode keeps probeClients committing to the groups of the fill's
// first segment, for cfg.MoveBaseline, then adds a node and waits until
// placement has settled with the new node holding replicas, the probe
// going on all along.
func loadAddNode(ctx context.Context, cfg LoadConfig, p *Procs, firstSegment FillResult) (AddNodeResult, error) {
	var r AddNodeResult
	if err := waitSpread(ctx, p); err != nil {
		return r, err
	}
	st, err := p.Status(ctx)
	if err != nil {
		return r, err
	}
	shards, nodes := GroupShards(st), p.Nodes()+1
	r.Target = shards * min(3, nodes) / nodes
	adm, err := kgo.NewClient(kgo.SeedBrokers(p.Brokers()...))
	if err != nil {
		return r, err
	}
	topicID, err := ensureTopic(ctx, kadm.NewClient(adm), loadTopic)
	adm.Close()
	if err != nil {
		return r, err
	}
	group := func(k int) string { return fmt.Sprintf("%s-%d", loadPrefix(0), k) }
	probe, err := startCommitProbe(ctx, p.Brokers(), probeClients, firstSegment.Groups, group, loadTopic, topicID, cfg.Partitions)
	if err != nil {
		return r, err
	}
	defer probe.stop()
	baselineStart := time.Now()
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(cfg.MoveBaseline):
	}
	added := time.Now()
	if r.Node, err = p.AddNode(ctx); err != nil {
		return r, fmt.Errorf("add node %d: %w", r.Node, errorsJoinRunning(err, p))
	}
	cfg.Logger.Info("node added; waiting for placement to settle", "node", r.Node, "share", r.Target)
	pctx, cancel := context.WithTimeout(ctx, addNodeBound)
	defer cancel()
	var last cluster.ClusterStatus
	err = poll(pctx, addNodePoll, func() bool {
		st, err := p.Status(pctx)
		if err != nil {
			return false // a node busy with a move may answer late: ask again
		}
		last = st
		held := replicasOf(st, r.Node)
		if r.Share == 0 && held >= r.Target {
			r.Share = time.Since(added)
		}
		if held > 0 && st.Moving == 0 && st.UnderReplicated == 0 {
			r.Settled, r.Replicas = time.Since(added), held
			if r.Share == 0 { // placement gave it fewer than floor
				r.Share = r.Settled
			}
			return true
		}
		return false
	}, fmt.Sprintf("node %d not given its share", r.Node))
	settled := time.Now()
	if err != nil {
		return r, fmt.Errorf("%w (last status: node %d votes in %d shards, %d moving, %d under-replicated)",
			errorsJoinRunning(err, p), r.Node, replicasOf(last, r.Node), last.Moving, last.UnderReplicated)
	}
	r.Before, r.During = probe.window(baselineStart, added), probe.window(added, settled)
	cfg.Logger.Info("placement settled", "node", r.Node, "share", r.Share, "settled", r.Settled,
		"before", r.Before.String(), "during", r.During.String())
	return r, nil
}

// replicasOf is how many group shards st says node votes in.
func replicasOf(st cluster.ClusterStatus, node int) int {
	for _, n := range st.Nodes {
		if int(n.ID) == node {
			return n.Replicas
		}
	}
	return 0
}
