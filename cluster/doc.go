// Package cluster runs a kcoord node's Raft groups: one hashicorp/raft
// instance per group shard (0..Shards-1, where a group lives on shard
// PartitionFor(groupID, Shards), bit-exact with Kafka) plus the metadata
// shard MetaShard, all sharing one TCP port.
//
// # Pieces
//
//   - Node (node.go): lifecycle. NewNode opens each shard's stores
//     (raft-boltdb file DataDir/shards/<id>/raft.db behind raft.LogCache, file
//     snapshots beside it; DataDir/meta for MetaShard), starts its Raft, and
//     bootstraps a single-voter configuration on a fresh DataDir with
//     BootstrapExpect 1. Ready/WaitReady, LeaderOf, Brokers and Shutdown.
//   - Shard (shard.go): one Raft group; Apply/ApplyAsync/Barrier wrap raft's
//     with context, FSM error translation and futures that always complete.
//   - Mux and StreamLayer (mux.go): one listener for every shard. Each
//     connection starts with a header naming its shard (and the dialer's
//     advertised address); the accept loop hands it to that shard's
//     raft.StreamLayer, used by raft.NewNetworkTransportWithConfig.
//   - Faults (faults.go): drop, delay and partition hooks in the Mux for
//     in-process cluster tests.
//   - JavaStringHashCode and PartitionFor (hash.go).
//
// # Seams for multi-node
//
// Membership (Brokers, LeaderOf's node-to-broker mapping) lives in an
// internal member table holding only this node for now; memberlist will
// fill it. BootstrapExpect > 1 returns ErrMultiNodeBootstrap. A node started
// with BootstrapExpect 0 never bootstraps: its shards wait to be added to an
// existing configuration (the in-process tests bootstrap three such nodes by
// hand with Raft.BootstrapCluster).
package cluster
