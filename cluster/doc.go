// Package cluster runs a kcoord node: one hashicorp/raft instance per group
// shard (0..Shards-1; which shard a group lives on is the group
// coordinator's to say, groups.PartitionFor, bit-exact with Kafka) plus
// the metadata shard MetaShard, all
// sharing one TCP port; memberlist gossip that finds the other nodes; and
// the rules that keep a data dir in one cluster for life.
//
// # Pieces
//
//   - Node (node.go): lifecycle, in two steps. Open opens every shard's
//     stores (by default one node-wide write-ahead log with group commit
//     across shards, DataDir/wal, package nodestore, which imports the
//     bolt file DataDir/raft.db of earlier versions; or raft-boltdb per
//     shard, see Config.LogStore; a data dir keeps the kind it was
//     created with; file snapshots in DataDir/shards/<id> and
//     DataDir/meta), binds the Raft port and makes every Shard, none
//     running: a caller builds its group coordinators on Node.Shard
//     then (a fresh node with Join joins gossip in Open, to learn its
//     cluster's shard count first). Start joins gossip, decides what the
//     node is to its cluster, then starts every shard's Raft. NewNode is both at once.
//     Ready/WaitReady, LeaderOf, Brokers, ClusterID, AdoptClusterID,
//     Leave, TransferLeadership and Shutdown.
//   - Identity (identity.go): DataDir/node.json records the node id, shard
//     count, log store kind and cluster id (version 2; version 1, without a
//     cluster id, still loads), and, for a multi-node bootstrap, the node's
//     proposal and the view and digest of the agreement it acted on.
//   - Shard count (shardcount.go): offsets.topic.num.partitions, fixed
//     when the cluster bootstraps (DefaultShards when unset), recorded in
//     node.json and kept across restarts and upgrades, gossiped, and
//     adopted by a fresh node that joins: ShardCount,
//     ErrShardCountMismatch.
//   - Gossip (gossip.go): memberlist. Each node's meta carries its id,
//     addresses, whether it holds state, its BootstrapExpect, its shard
//     count, its cluster
//     id, its bootstrap proposal and view (once it bootstrapped, with the
//     agreement's digest, across restarts), and the voters of its shard
//     configurations. Broadcasts and push/pull carry the leader table
//     (leaders.go: who leads each shard as of which term; the higher term
//     wins). Peers whose cluster id differs are refused.
//   - Gossip encryption (gossipkey.go): with Config.GossipKeyFile,
//     memberlist's AES-GCM on every packet and stream, plaintext neither
//     sent nor accepted. The file holds base64 keys, one a line: the first
//     encrypts, every one decrypts; it is re-read every second, and a key
//     is rotated by adding it second on every node, moving it first on
//     every node, then dropping the old one. memberlist's own log is
//     routed so that gossip refused for its encryption is a warning on the
//     refusing node, naming the sender (rate-limited per host and cause).
//   - Bootstrap (bootstrap.go, placement.go): with BootstrapExpect N > 1,
//     nodes bootstrap once exactly N nodes advertise the same view, each
//     writing the configuration of the shards rendezvous placement gives it,
//     under the cluster id proposed by the lowest node id. BootstrapExpect 1
//     bootstraps alone; 0 never bootstraps (a node added with Join).
//   - Membership (membership.go): before Raft starts on an empty data dir,
//     the node checks its seeds' views: ErrEmptyDataDirVoter for a wiped
//     voter, adoption of the seeds' cluster id otherwise. Later it adopts
//     the id of the stateful peers, or mints one for a cluster bootstrapped
//     before ids existed. A node without Raft state that the peers list as
//     a voter takes its seat only if the proposal its node.json recorded
//     reproduces the agreement that placed it (it crashed during the first
//     bootstrap, before its shards took their configuration).
//   - Shard (shard.go): one Raft group; Apply/ApplyAsync/Barrier wrap raft's
//     with context and FSM error translation; Leadership, Leads and
//     ConfirmLeadership (leadership.go, readindex.go). Its futures
//     (futures.go) always complete, even when raft drops one at shutdown,
//     and one goroutine per busy shard answers them in log order.
//   - Raft network (package cluster/raftnet): the one Raft port every
//     shard shares, its stream header and cluster-id check, mutual TLS,
//     the beat and append hubs, each shard's raft.Transport, the record of
//     proven-dead peers and the fault hooks. Open listens with
//     raftnet.ListenMuxTLS, starts raftnet.Hubs and gives each shard a
//     raftnet.Transport; the admin stream (admin.go) is the port's
//     raftnet.AdminStream. Routing leaves peers whose death
//     raftnet.PeerDeaths proved out at once, and gossip spreads each
//     death this node proves (peerDied, gossip.go).
//   - Admin calls (admin.go, inspect.go): node-to-node calls on the admin
//     stream, one JSON request per connection: forwarded metadata changes
//     and node removals, read-index questions, replica reports for
//     cluster status (status.go: ClusterStatus, NodeStatus, ShardStatus),
//     and inspections that the Inspector answers.
//   - Settling (settling.go): while a shard's leadership is being decided
//     as this replica sees it, LeaderOf names this node and the group
//     coordinator holds requests (groups.Coordinator, groups/hold.go);
//     RoutingChanges wakes the held requests. AwaitLeaderOf
//     (awaitleader.go) is LeaderOf waiting for a leader this node does not
//     know yet (FindCoordinator's hold).
//   - Metadata changes (metaforward.go, metaconfirm.go, nudge.go):
//     ApplyMetadataChange applies a topic, SCRAM or ACL change on the
//     metadata leader (forwarded over the admin stream from other nodes)
//     and answers once this node's replica applied it; a change that
//     revokes something, once every live replica confirmed it. The leader
//     then appends a barrier so followers learn the commit at once.
//   - Metadata read barrier (metasync.go): SyncMetadataSince brings this
//     node's replica up to the leader's read index before a miss is
//     answered (rounds coalesced per node); MetadataFresh says whether the
//     replica heard from the leader recently enough to allow requests.
//   - Disk fence (diskfence.go): a watch reads the node store's Busy and
//     Failed (atomics, however stuck the store is) and, when a write has
//     been in flight for MaxSyncDuration (kcoord.log.max.sync.ms) or one
//     failed, fences the node without touching the disk: Leads, Settling
//     and Ready answer false, pending futures fail, each shard it led is
//     handed to its most caught-up (then least loaded) voter with a
//     TimeoutNow sent through the shard's transport (Raft's main loop may
//     be parked in the write), the
//     mux closes every connection and refuses new ones, election timers
//     park, and gossip says "disk": other nodes leave it out of Brokers and
//     LeaderOf. A stall that ends unfences it once the disk has answered
//     for a hold; a failure is for good (until restart). DiskHealth says
//     which; DiskFaults are the store's fault hooks for tests.
//   - Feature levels (features.go, formats.go): each node gossips its
//     release and the kcoord.version levels it supports; the metadata
//     leader finalizes the highest every node supports (by itself, or by
//     hand with ManualFeatureFinalize: FinalizeFeature), as
//     fsm.FeatureLevelSet; Shard.ApplyAsync refuses a command type above
//     the finalized level; shard leaders stamp the level into their
//     shards; node.json records it (version 4), and a binary too old for
//     it refuses the data dir (and a running one stops: Fatal). Formats
//     lists every format the node reads and writes, for `kcoord version`.
//   - Leadership balance (balance.go): a node leading more than its share
//     of group shards hands the excess to voters that lead fewer.
//   - Placement (placer.go, plan.go, movestep.go): the metadata group
//     holds each shard's desired voters; its leader plans them (plan.go,
//     pure functions) and each shard's leader steps towards them, one
//     configuration change at a time, promoting a replica once it caught
//     up (movestep.go). A node whose disk is much slower than its peers'
//     hands its leaderships away (slowdisk.go).
//   - Leader change log (leaderchangelog.go): this node's leadership
//     changes, one info line per burst (shardlist.go writes the shard ids
//     as ranges).
//   - Heartbeat pace (pace.go): a leader's Raft heartbeats at
//     LeaderHeartbeatTimeout's pace, followers at HeartbeatTimeout's.
//   - Raft stats (raftstats.go): every shard's term, indexes and
//     followers' lag, for metrics.
//   - Apply levels (applylevels.go): the command types each node gossips
//     it applies; a metadata change a replica cannot apply is refused
//     (ErrReplicaTooOld).
//   - Config (config.go): Config, its defaults and Validate; errors.go
//     holds the package's sentinel errors; monoclock.go a monotonic time
//     that fits an atomic integer.
//   - doc.go: this overview.
//
// # Goroutines
//
// Open and Start run on the caller's goroutine. With gossip, each node then runs a
// cluster loop (meta refresh, bootstrap, cluster id adoption), a balance
// loop and a join loop (until a seed answers); every node a feature loop
// (features.go); with the node store, a disk
// watch loop (diskfence.go); each shard runs a leadership
// goroutine that calls Config.OnLeadership and a leader-observer goroutine;
// the Raft network runs its own (see package raftnet); with a
// gossip key file, a key watch loop re-reads it; memberlist calls the
// gossip delegates, and writes its log, on its own goroutines. Node methods
// are safe for concurrent use.
package cluster
