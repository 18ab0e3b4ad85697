package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// maxTransfersPerRound bounds the leadership transfers one node starts per
// balance round, so a returning node is not hit by a storm of elections.
const maxTransfersPerRound = 16

// balanceLoop spreads group-shard leadership evenly over the live nodes
// that hold replicas: every BalanceInterval a node that leads more than its
// share hands the excess to the nodes that lead least, and one above the
// floor hands one to a node below it (50 shards on 3 nodes end 16/17/17,
// on 4 nodes 12 or 13 each).
// Runs on its own goroutine until shutdown.
func (n *Node) balanceLoop() { n.every(n.cfg.BalanceInterval, n.balanceLeaders) }

// every calls fn every d, on the caller's goroutine, until the node stops.
func (n *Node) every(d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// balanceLeaders runs one round. It waits until this node has gained no
// leadership for a balance interval: gains follow elections, and right after
// a crash gossip may still list the dead node, so a transfer to it would
// block the shard's writes until it timed out. (Losses are this node's own
// transfers and do not hold it back.) A failed transfer ends the round.
func (n *Node) balanceLeaders() {
	if since := time.Since(time.Unix(0, n.lastLeaderGain.Load())); since < n.cfg.BalanceInterval {
		return
	}
	if n.slowDisk.Load() || n.disk.fenced() {
		return // it hands off everything it leads (slowdisk.go, diskfence.go)
	}
	// Only live nodes that are voters of this node's shards share the
	// leaderships: a member that joined with Join alone holds no replica.
	// Nor do draining nodes: their leaderships are on their way off.
	voters := n.voterIDs()
	draining := n.drainingNodes()
	var live []int32
	for _, b := range n.members.brokers(n.mux.Deaths()) {
		// Nor do nodes on a slow disk (slowdisk.go): they would slow
		// every commit of what they led.
		if slices.Contains(voters, b.NodeID) && !draining[b.NodeID] && !n.members.slowNode(b.NodeID) {
			live = append(live, b.NodeID)
		}
	}
	if len(live) < 2 {
		return
	}
	counts := make(map[int32]int, len(live))
	for _, id := range live {
		counts[id] = 0
	}
	var mine []*Shard
	for _, s := range n.shards {
		b, ok := n.LeaderOf(s.ID)
		if !ok || (b.NodeID == n.cfg.NodeID && !s.IsLeader()) {
			// An election is under way (a settling replica names itself):
			// wait for a settled view.
			return
		}
		if _, shares := counts[b.NodeID]; shares || b.NodeID == n.cfg.NodeID {
			counts[b.NodeID]++ // a leader that shares no more (draining) is no target
		}
		if b.NodeID == n.cfg.NodeID && s.IsLeader() && !n.moving(s) {
			mine = append(mine, s)
		}
	}
	excess, limit := balanceQuota(counts, live, n.cfg.NodeID, len(n.shards), len(mine))
	led := counts[n.cfg.NodeID]
	var moves []string
	defer func() {
		// One line per round: which shards went where, and why.
		if len(moves) > 0 {
			n.logger.Info("moved shard leadership for balance", "moves", strings.Join(moves, " "),
				"reason", fmt.Sprintf("this node led %d of %d shards over %d nodes", led, len(n.shards), len(live)),
				"leads_now", counts[n.cfg.NodeID])
		}
	}()
	for i := 0; i < len(mine) && excess > 0; i++ {
		s := mine[i]
		target, ok := leastLoaded(s, counts, limit)
		if !ok {
			continue
		}
		if err := s.transferLeadership(target.ID, target.Address); err != nil {
			n.logger.Warn("leadership transfer failed", "shard", s.ID, "to", target.ID, "error", err)
			return
		}
		counts[voterID(target)]++
		counts[n.cfg.NodeID]--
		excess--
		n.logger.Debug("moved shard leadership for balance", "shard", s.ID, "to", target.ID)
		moves = append(moves, fmt.Sprintf("%d→%s", s.ID, target.ID))
	}
}

// balanceQuota is how many of the mine shards this node (self) leads and
// can hand off it gives away this round, and the count of leaderships a
// target must lead fewer than. counts holds the leaderships of the live
// nodes (those that share them) and self, out of shards. It is a pure
// function:
//   - above ceil, the excess goes, each to a node below ceil;
//   - at most ceil but above floor while a node leads fewer than floor
//     (13/13/13/11 of 50 on four nodes, which no node above ceil would
//     fix), one goes to a node below floor, and this node keeps floor.
func balanceQuota(counts map[int32]int, live []int32, self int32, shards, mine int) (excess, limit int) {
	if len(live) == 0 {
		return 0, 0
	}
	floor, ceil := shards/len(live), (shards+len(live)-1)/len(live)
	if excess := min(mine-ceil, maxTransfersPerRound); excess > 0 {
		return excess, ceil
	}
	if mine > 0 && counts[self] > floor && slices.ContainsFunc(live, func(id int32) bool { return counts[id] < floor }) {
		return 1, floor
	}
	return 0, ceil
}

// leastLoaded picks the voter of s that leads fewest shards, if it leads
// fewer than limit.
func leastLoaded(s *Shard, counts map[int32]int, limit int) (target raftServer, ok bool) {
	voters := s.otherVoters()
	slices.SortFunc(voters, func(a, b raftServer) int { return voterCount(a, counts) - voterCount(b, counts) })
	for _, v := range voters {
		if c, live := counts[voterID(v)]; live && c < limit {
			return v, true
		}
	}
	return raftServer{}, false
}

// TransferLeadership hands every shard this node leads to another voter and
// waits (at most timeout) for the transfers, so a node stopping on purpose
// costs its groups no election timeout. Called on SIGTERM before leaving;
// it returns how many leaderships moved.
func (n *Node) TransferLeadership(timeout time.Duration) int {
	var wg sync.WaitGroup
	moved := 0
	var mu sync.Mutex
	for _, s := range n.all {
		if !s.IsLeader() || len(s.otherVoters()) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.transferLeadership("", ""); err != nil {
				n.logger.Warn("leadership transfer on leave failed", "shard", s.ID, "error", err)
				return
			}
			mu.Lock()
			moved++
			mu.Unlock()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
	mu.Lock()
	defer mu.Unlock()
	n.logger.Info("moved leadership away before leaving", "shards", moved)
	return moved
}

// raftServer is a server of a shard's Raft configuration.
type raftServer = raft.Server

// voterID is the node id of a Raft server (its id is the decimal node id).
func voterID(s raftServer) int32 {
	id, _ := strconv.ParseInt(string(s.ID), 10, 32)
	return int32(id)
}

// voterCount is how many shards the server's node leads.
func voterCount(s raftServer, counts map[int32]int) int { return counts[voterID(s)] }
