package cluster

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// bootstrapLoop waits until BootstrapExpect nodes see each other through
// gossip and then bootstraps every shard this node is placed on, once per
// cluster (the gossip-driven pattern of Consul and Nomad): all nodes compute
// the same configurations from the same node set, and raft accepts
// identical bootstraps. A node whose shards already hold Raft state never
// bootstraps, and neither does one that sees a peer with state (the cluster
// exists). Runs on its own goroutine until done or shutdown.
func (n *Node) bootstrapLoop() {
	g := n.gossip
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	warned := false // the refusal below is logged once, not every second
	for !n.closed.Load() && !n.hasState.Load() {
		select {
		case <-g.changed:
		case <-tick.C:
		case <-n.stop:
			return
		}
		peers := g.peers()
		if i := slices.IndexFunc(peers, func(p nodeMeta) bool { return p.HasState }); i >= 0 {
			n.logger.Info("a peer holds Raft state already: this node's shards come from their leaders", "peer", peers[i].ID)
			return
		}
		if len(peers) < n.cfg.BootstrapExpect {
			continue
		}
		if len(peers) > n.cfg.BootstrapExpect || slices.ContainsFunc(peers, func(p nodeMeta) bool { return p.Expect != n.cfg.BootstrapExpect }) {
			// Nodes seeing different sets would bootstrap different
			// configurations: two leaders in one term. Refuse.
			if !warned {
				n.logger.Error("refusing to bootstrap: the nodes in gossip do not all expect this many nodes", "expect", n.cfg.BootstrapExpect, "seen", len(peers))
				warned = true
			}
			continue
		}
		slices.SortFunc(peers, func(a, b nodeMeta) int { return cmp.Compare(a.ID, b.ID) })
		if err := n.bootstrap(peers); err != nil {
			n.logger.Error("bootstrap failed", "error", err)
			return
		}
		return
	}
}

// bootstrap writes the initial configuration of every shard this node is
// placed on, then records and gossips that it holds state.
func (n *Node) bootstrap(peers []nodeMeta) error {
	ids := make([]int32, len(peers))
	addrs := make(map[int32]string, len(peers))
	for i, p := range peers {
		ids[i], addrs[p.ID] = p.ID, p.Raft
	}
	if !slices.Contains(ids, n.cfg.NodeID) {
		n.logger.Info("not among the bootstrap nodes; waiting to be placed", "nodes", ids)
		return nil
	}
	rf := min(n.cfg.ReplicationFactor, len(ids))
	var errs []error
	placed := 0
	for _, s := range n.all {
		voters := placement(s.ID, ids, rf)
		if !slices.Contains(voters, n.cfg.NodeID) {
			continue
		}
		var conf raft.Configuration
		for _, v := range voters {
			conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: serverID(v), Address: raft.ServerAddress(addrs[v])})
		}
		if err := s.Raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			errs = append(errs, err)
			continue
		}
		placed++
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	n.hasState.Store(true)
	n.gossip.announce()
	n.logger.Info("bootstrapped the cluster", "nodes", ids, "replication_factor", rf, "shards_here", placed)
	return nil
}

// replicated reports whether this node is a voter of the shard's current
// configuration.
func (s *Shard) replicated() bool {
	f := s.Raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, srv := range f.Configuration().Servers {
		if srv.ID == s.localID {
			return true
		}
	}
	return false
}

// voters returns the shard's voters other than this node.
func (s *Shard) otherVoters() []raft.Server {
	f := s.Raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []raft.Server
	for _, srv := range f.Configuration().Servers {
		if srv.ID != s.localID && srv.Suffrage == raft.Voter {
			out = append(out, srv)
		}
	}
	return out
}
