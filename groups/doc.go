// Package groups is kcoord's group coordinator: the groups of one shard
// and their committed offsets, served by the shard's Raft leader. It owns
// the two kinds of group Kafka has, by Kafka's names: classic groups
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; files classic*.go) and
// consumer groups (KIP-848's ConsumerGroupHeartbeat; files consumer*.go,
// where "consumer" always means that kind), and offsets (OffsetCommit,
// OffsetFetch, OffsetDelete, retention; files offset*.go). It also says
// which shard a group lives on (PartitionFor, partition.go), bit-exact
// with Kafka's partitionFor, which the api handlers, the server and the
// tests route by.
//
// A request for one group id enters through a Coordinator method, which
// checks that the coordinator serves (hold.go) and hands the request to
// dispatch (dispatch.go): it looks the id up once and calls the method of
// the kind of group that holds it, as Kafka's GroupCoordinatorShard does.
// Durable effects go through the shard's Raft log (Log) and are answered
// once committed; reads are answered once a quorum confirmed the
// leadership they were read under. The api package turns the sentinel
// errors (errors.go) into Kafka error codes; nothing here knows the codes.
//
// Files, by role:
//
//   - anygroup.go: anyGroup, what the coordinator's loops over every group
//     (activation, listing, stats, retention) ask of either kind, and the
//     lookups' shared locking (lockFound).
//   - applyerror.go: ApplyError, the one translation of a Raft future's
//     error into this package's sentinels.
//   - broadcast.go: a channel closed and replaced on each change, for
//     waiters on the coordinator's state.
//   - classicdescribe.go: DescribeGroups and ListGroups, and the leadership
//     Check that reads call.
//   - classicgroup.go: classicGroup, a classic group's state and members.
//   - classicheartbeat.go: Heartbeat to a classic group.
//   - classicjoin.go: JoinGroup to a classic group.
//   - classicleave.go: LeaveGroup to a classic group.
//   - classicmember.go: classicMember, one member of a classic group.
//   - classicrebalance.go: a classic group's rebalance: preparing,
//     completing the join phase, electing a leader, storing the group.
//   - classicstate.go: State, a classic group's states.
//   - classicsubscription.go: the topics a classic group of Kafka consumers
//     subscribes to, from its members' metadata.
//   - classicsync.go: SyncGroup to a classic group.
//   - classictimers.go: a classic group's session, join and sync timers.
//   - config.go: Config, DefaultConfig and Validate.
//   - consumer.go: the coordinator's side of consumer groups: their lookup
//     beside the classic ones, takeovers between kinds, the topic registry
//     and the server-side assignors.
//   - consumerclassicmember.go: classic members (JoinGroup, SyncGroup,
//     Heartbeat, LeaveGroup) inside a consumer group, and the migration
//     policy.
//   - consumerdescribe.go: ConsumerGroupDescribe, and a consumer group's
//     listing.
//   - consumerdowngrade.go: the online downgrade of a consumer group to a
//     classic group.
//   - consumergroup.go: consumerGroup, a consumer group's state and
//     members.
//   - consumerheartbeat.go: ConsumerGroupHeartbeat: joining, heartbeating
//     and reconciling members.
//   - consumerleave.go: a consumer-protocol member's leave, and fencing.
//   - consumeroffsets.go: a consumer group's side of offsets: who may
//     commit and fetch, and its retention.
//   - consumerrequest.go: ConsumerHeartbeatRequest and its validation.
//   - consumertimers.go: a consumer group's session, rebalance and sync
//     timers.
//   - consumertopics.go: topicsView, the topic registry as consumer groups
//     resolve subscriptions against it.
//   - consumerupgrade.go: the online upgrade of a classic group to a
//     consumer group.
//   - consumerwrite.go: how a consumer group's state reaches Raft: its
//     chain of writes, and the reload after one failed.
//   - coordinator.go: Coordinator and Log: activation and deactivation
//     with leadership, the classic lookups and the writes to Raft.
//   - delete.go: DeleteGroups, for either kind.
//   - dispatch.go: the one dispatch of a group id to the method of its
//     kind.
//   - doc.go: this overview.
//   - dormant.go: groups that only hold offsets, which sleep in the FSM
//     while idle instead of being held in memory, and wake on a request.
//   - errors.go: the package's sentinel errors.
//   - hold.go: holding requests while the shard's leadership settles
//     (serving, OneHold) and Stop.
//   - offsetcommit.go: OffsetCommit: validation, stamping, the classic
//     group's checks and the commit write both kinds share.
//   - offsetdelete.go: OffsetDelete (KIP-496), for either kind.
//   - offsetexpiry.go: offset expiry (KIP-211) and removing Empty groups
//     left without offsets.
//   - offsetfetch.go: OffsetFetch: reading committed offsets once the
//     leadership is confirmed (OneConfirmation).
//   - offsetrecord.go: what a commit may store, and the stored record with
//     its commit and expiry times.
//   - partition.go: PartitionFor, Kafka's partitionFor (abs of Java's
//     String.hashCode of the group id, modulo the shard count), and
//     JavaStringHashCode, which decodes invalid UTF-8 as the JDK does.
//   - reconcile.go: a consumer-protocol member's reconciliation toward its
//     target assignment.
//   - requests.go: the request and answer types of the classic and offset
//     APIs, as the api package decodes them.
//   - retention.go: RunRetention, the node's offset retention sweep
//     (offsets.retention.check.interval.ms).
//   - stats.go: Stats for metrics, and Rebalance for observers.
//   - target.go: a consumer group's target assignment, from its
//     subscriptions and the server-side assignor.
//   - testing.go: MemLog and MemTopics, in-memory harnesses for tests of
//     this and other packages.
package groups
