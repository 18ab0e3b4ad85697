// Package bench holds the load generators `kcoord bench` runs against any
// Kafka-compatible server, and the benchmarks and docs/benchmarks.md are
// built on.
//
// # Files
//
//   - commits.go: Commits, the OffsetCommit benchmark behind `kcoord bench
//     commits` (CommitsConfig in, CommitsResult out: throughput and latency
//     quantiles); CommitOffset, one admin commit (generation -1, no
//     member), which the benchmarks of package e2e use too.
//   - report.go: Report, behind `kcoord bench report`: the disk's
//     fdatasync p50, Commits against franz-go's kfake, one in-process
//     kcoord node and a three-node cluster, and the idle nodes' CPU, then
//     the three processes' figures (procsreport.go), written as the
//     markdown of docs/benchmarks.md. WaitLeadersSpread and ProcessCPU
//     serve e2e's idle-CPU benchmark too.
//   - procsreport.go: Report's part on three `kcoord serve` processes:
//     Commits, idle CPU, failover, the fill, resident memory and a
//     restart after SIGKILL, and their sections of the markdown.
//   - procs.go: Procs, the launcher of N `kcoord serve` processes on
//     127.0.0.1 (StartProcs): data directories and log files under a
//     directory, Kill, Restart, Stop, readiness (/readyz) and the status
//     API (Status, WaitLeadersSpread, GroupShards).
//   - procsports.go: FreeLoopbackAddr, the free loopback ports of the
//     launcher (and of e2e's process tests), from below the kernel's
//     ephemeral range, each handed out once.
//   - procsstat.go: a process's CPU time (ProcCPU, /proc/<pid>/stat) and
//     resident memory (ResidentMB, VmRSS), and the idle CPU of Procs.
//   - procsfailover.go: ProcsFailover, leader failover on Procs: the node
//     leading the most shards killed, each of its shards timed until a
//     commit to one of its groups succeeds through a fresh client.
//   - fill.go: Fill, many groups of many partitions committed through
//     concurrent committers, one OffsetCommit per group.
//   - load.go: Load, behind `kcoord bench load` (issue 36: a large
//     state): three processes filled in timed segments, resident memory
//     and bytes an offset, data directories, failover empty and full, a
//     restart after SIGKILL, a node added under load; WriteLoad, its
//     "Scale" section.
//   - loadaddnode.go: Load's last phase: a fourth process added
//     (Procs.AddNode) while the probe commits, timed until placement
//     settles, the commits split by whether their shard changed leader
//     (leaderTimeline).
//   - commitprobe.go: commitProbe, a few clients committing to existing
//     groups, each commit's start and latency kept so that a phase's
//     p99 can be read apart (ProbeWindow).
//   - shards.go: Shards, behind `kcoord bench shards` (issue 35: how
//     many Raft groups a cluster should run): ShardsConfig in, a
//     ShardsResult per (nodes, shards) configuration out, and
//     WriteShards, the section "How many Raft groups" that `make
//     benchmarks` appends to docs/benchmarks.md.
//   - shardscluster.go: shardsCluster, one configuration's in-process
//     nodes (production Raft timings, replication factor 3): start,
//     leadership spread, kill, restart, placement settled.
//   - shardsfailover.go: the failover step: the node leading the most
//     shards killed, a commit to each shard it led timed until its new
//     leader acknowledges it.
//   - shardsplacement.go: the add and drain steps: a fresh node timed
//     until placement gave it its share, a remove-node timed until the
//     cluster's status reports the node drained.
//
// # Goroutines
//
// Commits, Fill, Load, ProcsFailover, Report and Shards are called from one
// goroutine; Commits runs one goroutine per client, each committing one
// offset at a time, Fill one per committer, each committing one group at
// a time, and ProcsFailover and Shards' failover step one per shard they
// time; each returns once they have all stopped. A Procs is driven from
// one goroutine; each node's process has a goroutine that waits for its
// exit, and Stop (or an error of StartProcs) kills every process and
// waits until each is gone. Shards' nodes are killed before it returns,
// on error too. Nothing in the package blocks while it holds a lock but
// the port picker, whose lock covers its own binds.
package bench
