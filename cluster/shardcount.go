package cluster

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The shard count (offsets.topic.num.partitions) says where every group
// lives (groups.PartitionFor hashes a group id over it), so every node of
// a cluster must run the same one, for the cluster's whole life:
//
//   - A node that bootstraps a new cluster, alone or with BootstrapExpect
//     peers, runs Config.Shards, or DefaultShards when it is unset (0).
//     The nodes of a multi-node bootstrap must agree on it: each gossips
//     its count, and decideBootstrap refuses a view whose nodes differ.
//   - node.json records the count. A node whose data dir is initialised
//     runs the recorded count when Config.Shards is unset; a set count
//     that differs is ErrDataDirMismatch. So an upgrade in place keeps a
//     cluster's count even when a release changes DefaultShards.
//   - A fresh node started with Join learns the count from its seeds
//     before Open opens a store: Open joins gossip first (Start then keeps
//     that gossip), waits for the seeds (at most JoinTimeout; for a
//     join-only node, until a peer holding Raft state answers) and takes
//     the count the peers holding state advertise (nodeMeta.Shards). A
//     peer of a release that advertises no count ran
//     previousReleaseShards, its default. An explicit count that differs
//     from the advertised one is refused (ErrShardCountMismatch) before
//     anything is written to the data dir.
//   - A fresh node that found no peer holding state runs Config.Shards or
//     DefaultShards, and later joins no cluster whose peers advertise
//     another count (adoptFromPeers, checkSeeds): it adopts no cluster id,
//     so its Raft admits none of that cluster's traffic, and stops
//     (Node.Fatal) rather than serve groups hashed over its own count.

// DefaultShards is the shard count of a new cluster whose nodes leave
// Config.Shards unset: 16, Redpanda's default for its consumer offsets
// topic (Kafka's is 50, which release 0.1.0 used: previousReleaseShards).
// Fewer, fuller Raft groups cost less; docs/architecture.md (Shard count)
// has the trade-off. A cluster keeps the count it bootstrapped with.
const DefaultShards int32 = 16

// previousReleaseShards is the count a peer that advertises none runs:
// release 0.1.0 gossips no count, and its default was 50. (A 0.1.0
// cluster started with another offsets.topic.num.partitions must be
// joined with that count set explicitly.)
const previousReleaseShards int32 = 50

// ShardCount is the number of group shards this node runs (group shards
// are 0..ShardCount()-1): the count its data dir records, the one it
// learned from its seeds, or the configured one (DefaultShards when
// unset) for a new cluster. Fixed from Open on; any goroutine.
func (n *Node) ShardCount() int32 { return n.cfg.Shards }

// advertisedShards is the shard count a peer's meta says it runs:
// previousReleaseShards when it says none (release 0.1.0).
func advertisedShards(p nodeMeta) int32 {
	if p.Shards > 0 {
		return p.Shards
	}
	return previousReleaseShards
}

// clusterShards is the shard count of the cluster the stateful peers
// form: the one they advertise (fromRelease false), or
// previousReleaseShards when none advertises one (fromRelease true: every
// one runs release 0.1.0). ok is false without stateful peers. Peers that
// advertise different counts are an error: they are not one cluster as
// far as groups are concerned.
func clusterShards(stateful []nodeMeta) (count int32, fromRelease, ok bool, err error) {
	if len(stateful) == 0 {
		return 0, false, false, nil
	}
	var counts []int32
	for _, p := range stateful {
		if p.Shards > 0 {
			counts = append(counts, p.Shards)
		}
	}
	slices.Sort(counts)
	counts = slices.Compact(counts)
	switch len(counts) {
	case 0:
		return previousReleaseShards, true, true, nil
	case 1:
		return counts[0], false, true, nil
	}
	var b strings.Builder
	for _, p := range stateful {
		if p.Shards > 0 {
			fmt.Fprintf(&b, " node %d: %d;", p.ID, p.Shards)
		}
	}
	return 0, false, true, fmt.Errorf("%w: the peers holding Raft state advertise different shard counts (%s); give --join seeds of one cluster",
		ErrShardCountMismatch, strings.TrimSuffix(strings.TrimSpace(b.String()), ";"))
}

// recordedShards is the shard count of an initialised data dir, checked
// with the node id against the configuration. Called by Open.
func recordedShards(cfg *Config, id identity) (int32, error) {
	switch {
	case id.NodeID != cfg.NodeID:
		return 0, fmt.Errorf("%w: %s belongs to node id %d, but this node is configured as node id %d",
			ErrDataDirMismatch, cfg.DataDir, id.NodeID, cfg.NodeID)
	case cfg.Shards != 0 && id.Shards != cfg.Shards:
		return 0, fmt.Errorf("%w: %s records %d shards (offsets.topic.num.partitions, fixed when the cluster bootstrapped), but this node is configured with %d; "+
			"leave offsets.topic.num.partitions unset to run the recorded count",
			ErrDataDirMismatch, cfg.DataDir, id.Shards, cfg.Shards)
	}
	return id.Shards, nil
}

// joiningShards decides, in Open, the shard count of a fresh node started
// with Join, from what its seeds gossip: it starts gossip, waits for the
// seeds (recording in seedsAnswered whether any answered, for Start's
// prepare) and returns the count to open the shards with. Nothing of the
// data dir has been written yet: an error leaves it as it was.
func (n *Node) joiningShards() (int32, error) {
	cfg := &n.cfg
	if err := n.startGossip(n.initialMeta(), n.gossipKeys); err != nil {
		return 0, err
	}
	// A join-only node will never bootstrap: only a peer holding state can
	// tell it the count, so it waits for one. A node that may bootstrap
	// waits, as Start always did, for the first peer.
	ready := func([]nodeMeta) bool { return true }
	if cfg.BootstrapExpect == 0 {
		ready = func(others []nodeMeta) bool { return len(statefulPeers(others)) > 0 }
	}
	n.seedsAnswered = n.waitForSeeds(ready)
	stateful := statefulPeers(n.gossip.others())
	if ids := clusterIDsOf(stateful); len(ids) > 1 {
		return 0, fmt.Errorf("%w: peers holding state advertise cluster ids %s; give --join seeds of one cluster",
			ErrAmbiguousJoin, strings.Join(ids, ", "))
	}
	count, fromRelease, found, err := clusterShards(stateful)
	switch {
	case err != nil:
		return 0, err
	case !found:
		own := cmp.Or(cfg.Shards, DefaultShards)
		if cfg.BootstrapExpect == 0 {
			n.logger.Warn("no seed holding Raft state answered: opening the shards with the configured or default count; this node will not join a cluster that advertises another",
				"shards", own, "configured", cfg.Shards != 0, "seeds", cfg.Join, "waited", cfg.JoinTimeout)
		}
		return own, nil
	case cfg.Shards == 0:
		if fromRelease {
			if top, ok := n.leaders.topGroupShard(); ok && top+1 != previousReleaseShards {
				return 0, fmt.Errorf("%w: the seeds (nodes %v) run a release that does not advertise its shard count, and the leaders they gossip name group shards 0 to %d, so their cluster does not run %d shards, that release's default; "+
					"set offsets.topic.num.partitions to the cluster's count. Nothing was written to %s",
					ErrShardCountMismatch, nodeIDs(stateful), top, previousReleaseShards, cfg.DataDir)
			}
		}
		n.logger.Info("adopting the shard count of the seeds' cluster", "shards", count, "peers", nodeIDs(stateful),
			"from_release_default", fromRelease)
		return count, nil
	case cfg.Shards == count:
		return count, nil
	case fromRelease:
		// The peers run a release that does not say: the explicit
		// setting is all there is to go by.
		n.logger.Warn("the seeds' cluster does not advertise its shard count (a release before 0.2.0): using the configured one, which must be the cluster's",
			"shards", cfg.Shards, "peers", nodeIDs(stateful))
		return cfg.Shards, nil
	}
	return 0, fmt.Errorf("%w: offsets.topic.num.partitions=%d, but the cluster of the seeds (nodes %v) runs %d shards; "+
		"leave offsets.topic.num.partitions unset on a joining node to adopt the cluster's count. Nothing was written to %s",
		ErrShardCountMismatch, cfg.Shards, nodeIDs(stateful), count, cfg.DataDir)
}

// shardsMismatch is ErrShardCountMismatch when the stateful peers run
// another shard count than this node opened (a fresh node that found no
// peer holding state before Open, and opened the configured or default
// count), or advertise different counts; nil when they agree, say
// nothing (no stateful peer), or run a release that advertises no count
// while this node's count was set explicitly (it is then all there is to
// go by). Start's prepare and the cluster loop call it before the node
// adopts the peers' cluster id.
func (n *Node) shardsMismatch(stateful []nodeMeta) error {
	count, fromRelease, found, err := clusterShards(stateful)
	if err != nil || !found || count == n.cfg.Shards || fromRelease && n.shardsSet {
		return err
	}
	return fmt.Errorf("%w: this node opened %d shards (no peer holding Raft state answered when it started), but the cluster of its peers (nodes %v) runs %d; "+
		"stop it, empty its data dir and start it again with offsets.topic.num.partitions unset",
		ErrShardCountMismatch, n.cfg.Shards, nodeIDs(stateful), count)
}

// bootstrapShardsProblem is what decideBootstrap says when the members of
// an agreed view advertise different shard counts; "" when they agree.
func bootstrapShardsProblem(members []nodeMeta) string {
	first := members[0]
	for _, p := range members[1:] {
		if advertisedShards(p) != advertisedShards(first) {
			return fmt.Sprintf("refusing to bootstrap: node %d runs %d shards, node %d %d; give every node of the first bootstrap the same offsets.topic.num.partitions, or leave it unset on all of them (%d for a new cluster)",
				first.ID, advertisedShards(first), p.ID, advertisedShards(p), DefaultShards)
		}
	}
	return ""
}
