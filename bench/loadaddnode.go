package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/groups"
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
	// Steady is those of During whose shard kept its leader from the
	// client's previous commit to the group until after this one; Moved
	// the others, which met a leadership change (NOT_COORDINATOR, and the
	// client's back-off before it looks the coordinator up again).
	// LeaderChanges counts the shards' leader changes seen while replicas
	// moved.
	Steady, Moved ProbeWindow
	LeaderChanges int
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
func loadAddNode(ctx context.Context, cfg LoadConfig, p *Procs) (AddNodeResult, error) {
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
	group := func(k int) string { return fillGroup(loadPrefix(0), int64(k)) }
	probe, err := startCommitProbe(ctx, p.Brokers(), probeClients, segmentGroups(cfg, 0), group, loadTopic, topicID, cfg.Partitions)
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
	if st, err = p.Status(ctx); err != nil {
		return r, err
	}
	leaders := leaderTimeline{{at: added, leaders: shardLeaders(st)}}
	if r.Node, err = p.AddNode(ctx); err != nil {
		return r, fmt.Errorf("add node %d: %w", r.Node, errorsJoinRunning(err, p))
	}
	cfg.Logger.Info("node added; waiting for placement to settle", "node", r.Node, "share", r.Target)
	pctx, cancel := context.WithTimeout(ctx, addNodeBound)
	defer cancel()
	last := st
	var settle settleWatch
	err = poll(pctx, addNodePoll, func() bool {
		asked := time.Now()
		st, err := p.Status(pctx)
		if err != nil {
			return false // a node busy with a move may answer late: ask again
		}
		last = st
		leaders = append(leaders, leaderPoll{at: asked, leaders: shardLeaders(st)})
		held := replicasOf(st, r.Node)
		if r.Share == 0 && held >= r.Target {
			r.Share = asked.Sub(added)
		}
		r.Replicas = held
		return settle.observe(asked, held > 0 && st.Moving == 0 && st.UnderReplicated == 0)
	}, fmt.Sprintf("node %d not given its share", r.Node))
	if err != nil {
		return r, fmt.Errorf("%w (last status: node %d votes in %d shards, %d moving, %d under-replicated)",
			errorsJoinRunning(err, p), r.Node, replicasOf(last, r.Node), last.Moving, last.UnderReplicated)
	}
	settled := settle.since
	r.Settled = settled.Sub(added)
	if r.Share == 0 { // placement gave it fewer than floor
		r.Share = r.Settled
	}
	probe.stop() // the commits in flight end first: every one timed is counted
	// A commit meets a leader change when its shard's leader changed
	// since the client last committed to the group, whose coordinator it
	// kept since: its next commit is the one answered NOT_COORDINATOR.
	met := func(s probeSample) bool {
		from := s.prev
		if from.IsZero() {
			from = s.at
		}
		return leaders.changed(groups.PartitionFor(group(s.key), int32(shards)), from, s.at.Add(s.took))
	}
	r.Before, r.During = probe.window(baselineStart, added, nil), probe.window(added, settled, nil)
	r.Steady = probe.window(added, settled, func(s probeSample) bool { return !met(s) })
	r.Moved = probe.window(added, settled, met)
	r.LeaderChanges = leaders.changes()
	cfg.Logger.Info("placement settled", "node", r.Node, "share", r.Share, "settled", r.Settled, "leader_changes", r.LeaderChanges,
		"before", r.Before.String(), "during", r.During.String(), "steady", r.Steady.String(), "moved", r.Moved.String())
	return r, nil
}

// settleQuiet is how long placement must stay settled before the add is
// over: three placement rounds (kcoord.placement's one second), so the
// pause between two batches of moves is not taken for the end.
const settleQuiet = 3 * time.Second

// settleWatch tells when placement has settled: moves start a few shards
// at a time, a placement round apart, so between two batches none moves
// for a moment, and only a quiet that lasts settleQuiet is the end.
type settleWatch struct {
	since time.Time // the first of the quiet statuses in a row; zero: none
}

// observe takes a status asked at at, quiet when no shard moves, none is
// under-replicated and the new node votes, and reports whether placement
// has been quiet for settleQuiet since.
func (w *settleWatch) observe(at time.Time, quiet bool) bool {
	if !quiet {
		w.since = time.Time{}
		return false
	}
	if w.since.IsZero() {
		w.since = at
	}
	return at.Sub(w.since) >= settleQuiet
}

// leaderPoll is each group shard's leader node (-1: unknown) as one
// status call saw it.
type leaderPoll struct {
	at      time.Time
	leaders map[int32]int32
}

// leaderTimeline is the polls of the add-node phase, in order.
type leaderTimeline []leaderPoll

// shardLeaders is each group shard's leader node in st. Only the node
// counts: a status whose leader's own report was missing names it from
// gossip, without its term.
func shardLeaders(st cluster.ClusterStatus) map[int32]int32 {
	m := make(map[int32]int32, len(st.Shards))
	for _, s := range st.Shards {
		if s.Shard != cluster.MetaShard { // group shards only
			m[s.Shard] = s.Leader
		}
	}
	return m
}

// changed reports whether shard's leader differs between the last poll at
// or before from and the first at or after to (the last poll when none
// is), or is unknown in either.
func (tl leaderTimeline) changed(shard int32, from, to time.Time) bool {
	if len(tl) == 0 {
		return false
	}
	i := max(sort.Search(len(tl), func(i int) bool { return tl[i].at.After(from) })-1, 0)
	j := min(sort.Search(len(tl), func(i int) bool { return !tl[i].at.Before(to) }), len(tl)-1)
	a, aok := tl[i].leaders[shard]
	b, bok := tl[j].leaders[shard]
	return !aok || !bok || a != b || a < 0
}

// changes counts, over every shard, the polls that found another leader
// than the one last known (a poll that knew none is passed over).
func (tl leaderTimeline) changes() int {
	n := 0
	known := map[int32]int32{}
	for _, p := range tl {
		for shard, node := range p.leaders {
			if node < 0 {
				continue
			}
			if prev, ok := known[shard]; ok && prev != node {
				n++
			}
			known[shard] = node
		}
	}
	return n
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
