// Command kcoord is a Kafka-compatible consumer-group coordinator: clients
// find their coordinator, join, sync, heartbeat, commit and fetch offsets
// through the Kafka protocol; it stores no records. This binary runs a node
// (`kcoord serve`) and holds the tools around it. Each command is a cobra
// command built by a newXxxCmd function (or an adminCLI method) in the file
// named below.
//
// # Running a node
//
//   - main.go: main, the root command and `kcoord version`; main starts
//     adaptProcs on a goroutine of its own.
//   - serve.go: `kcoord serve`: runs a server.Server until SIGINT or
//     SIGTERM, with its HTTP endpoints, the logger, and TLS reloads on
//     SIGHUP.
//   - flags.go: serve's flags and how they resolve (flag > KCOORD_
//     environment variable > config file > default), with the Kafka
//     config pairs of `-c key=value`.
//   - msduration.go: the duration flag that also takes milliseconds, as
//     Kafka's tools' --timeout does.
//   - procs.go: adaptProcs, which raises GOMAXPROCS above the CPU count
//     while the process is busy, for the write-ahead log's committer.
//   - pprof.go: Go's profiler on the HTTP mux, for serve --pprof.
//   - healthcheck.go: `kcoord healthcheck`: exit 0 when a node's /readyz
//     says ready.
//   - version.go: what `kcoord version` prints: release, commit, feature
//     levels and every format this binary reads and writes.
//   - certs.go: `kcoord certs`: a CA, node and client certificates, a
//     gossip key and a superuser password for a secure cluster.
//
// # Operating a cluster over its HTTP admin API
//
//   - cluster.go: `kcoord cluster status` and `kcoord cluster
//     remove-node`.
//   - features.go: `kcoord cluster features`, and --finalize.
//
// # Administration over the Kafka protocol (kadm)
//
// These work against kcoord and any Kafka-compatible cluster, with the
// flags and output of Kafka's shell tools.
//
//   - admincli.go: adminCLI, what every such command shares: bootstrap
//     servers, TLS, SASL (the password never from a flag) and --timeout.
//   - groups.go: `kcoord groups` (kafka-consumer-groups.sh), `groups list`
//     and `groups delete`.
//   - groups_describe.go: `kcoord groups describe`: offsets, members or
//     state.
//   - groups_offsets.go: `kcoord groups delete-offsets`.
//   - groups_reset.go: `kcoord groups reset-offsets`, with its scenarios,
//     --dry-run, --execute, --export and CSV input.
//   - topics.go: `kcoord topics` create, list, describe and delete
//     (kafka-topics.sh).
//   - users.go: `kcoord users` create, list and delete: SCRAM credentials
//     (kafka-configs.sh --entity-type users).
//   - acls.go: `kcoord acls` create, list and delete (kafka-acls.sh).
//
// # Testing and measuring
//
//   - bench.go: `kcoord bench report`, `bench commits` and `bench assign`
//     (packages bench and assignors/assignbench).
//   - benchshards.go: `kcoord bench shards`: clusters of each shard count
//     and size measured (throughput, idle CPU, failover, add, drain), as
//     the markdown section `make benchmarks` appends (package bench).
//   - benchload.go: `kcoord bench load`: three processes filled with many
//     groups, each size measured (fill rate by segment, resident memory
//     and bytes an offset, failover empty and full, restart), as the
//     "Scale" sections `make benchmarks` appends (package bench).
//   - verify.go: `kcoord verify`: the chaos workload and checkers against
//     any running Kafka-compatible cluster.
//   - chaos.go: `kcoord chaos` and `kcoord chaos upgrade`: the chaos suite
//     against a three-node cluster of this binary (needs root).
package main
