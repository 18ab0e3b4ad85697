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
//     kcoord node and a three-node cluster, and the idle nodes' CPU,
//     written as the markdown of docs/benchmarks.md. WaitLeadersSpread and
//     ProcessCPU serve e2e's idle-CPU benchmark too.
//
// # Goroutines
//
// Commits and Report are called from one goroutine; Commits runs one
// goroutine per client, each committing one offset at a time, and returns
// once they have all stopped.
package bench
