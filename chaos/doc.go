// Package chaos proves, under faults, what consumer groups rely on from
// their coordinator: no acknowledged offset is lost, no read is stale, no
// partition has two owners, and groups settle once the faults heal. It is
// both kcoord's chaos suite and the engine of `kcoord verify`, which points
// the same workload and checkers at any Kafka-compatible cluster.
//
// # Pieces
//
//   - History (history.go): every operation with its call and return
//     times on one monotonic clock, and its outcome: OK, Failed (refused
//     before any write: fencing and validation errors) or Unknown (a
//     timeout, a lost connection, or an error such as NOT_COORDINATOR that
//     can come after the write was handed to replication). Also every
//     assignment members received and every partition they gave up.
//   - Workload (workload.go, members.go, client.go): franz-go consumer
//     groups, classic ones (eager range and cooperative-sticky) and
//     KIP-848 ones (the uniform and range server assignors), a static
//     member in every other group, members replaced every Churn; each
//     member commits what it owns with its member id and generation (its
//     member epoch in a KIP-848 group). Raw clients commit and
//     fetch "hot" registers with no retries (a retry could land twice
//     inside one recorded operation), and read "cold" registers committed
//     once at the start. Commit values are unique and increasing, so a
//     value names the commit that wrote it.
//   - Checkers: CheckLinearizable (linearizable.go: porcupine per
//     register; unknown commits may take effect at any time after their
//     call, or never), CheckDurable (durability.go: the final value of
//     every register was not overwritten by an older commit after a newer
//     one was acknowledged), CheckOwnership (ownership.go: one owner per
//     partition per generation; cooperative handoffs only
//     after the previous owner's revocation; in a KIP-848 group, a
//     partition handed to a member only after the member that had it gave
//     it up or lost its membership), CheckFencing (ownership.go too: no
//     commit of a past generation acknowledged once the group had moved
//     on) and CheckLiveness (liveness.go: every group Stable,
//     all partitions assigned, within a bound; a KIP-848 group's topics
//     matched by name or by id, since some servers describe them by id
//     alone; a group that never settles says why, quoting what a lone
//     member probing its server assignor was answered before the run:
//     kip848probe.go). Report (report.go) holds every CheckResult and
//     prints them, the fault table and the summary line
//     `chaos: N ops, F faults, A anomalies`.
//   - Run (run.go): the phases (an optional fault-free baseline, the fault
//     phase), then stopping the load, liveness, final reads and the checks.
//   - Cluster (cluster.go, netns.go): `kcoord serve` processes, each in a
//     network namespace of its own, linked through a router namespace whose
//     FORWARD chain holds every partition and loss rule, so the host's
//     firewall is never touched and everything vanishes with the
//     namespaces (leftovers of a killed run are removed by the next).
//   - Nemeses (nemesis.go) and Cluster.Schedule: kill -9 and restart of a
//     leader and of a follower, SIGSTOP/SIGCONT, isolation, a bridge, a
//     one-way partition, Raft packet loss (iptables statistic) and delay
//     (the nodes' --fault-injection endpoint on the Raft mux's hooks: this
//     kernel has no netem), a rolling restart and a restart of every node.
//   - Disk nemeses (disknemesis.go): each node's data dir is a FUSE file
//     system this process serves (package faultfs, over a folder beside
//     it), so a node's disk can stall, slow its fsyncs, answer EIO or
//     ENOSPC, and a power loss of every node can undo every write no fsync
//     covered, while the processes keep running. FaultFSSupported says
//     whether the machine can mount them (root and /dev/fuse).
//   - RunSuite (suite.go): all of it, for `kcoord chaos` and `make chaos`.
//   - RunUpgrade (upgrade.go): the mixed-version test behind `kcoord chaos
//     upgrade` and `make upgrade-test`: three nodes of the previous release
//     upgraded one at a time under the workload, with rollbacks before the
//     finalization, a finalization by hand, a too-old binary that must
//     refuse the finalized data dir and the new release's metadata
//     agreement; an unexpected exit and a rebalance are anomalies.
//
// # Goroutines
//
// Run, RunSuite, the checkers and Cluster's methods are called from one
// goroutine. The workload's raw clients, members and churn run in
// goroutines of their own and write only to the History, which is safe
// for concurrent use. franz-go calls the members' rebalance callbacks and
// the recording balancer from its own goroutines; they take the member's
// lock and never block on the network.
package chaos
