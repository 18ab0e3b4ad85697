// Package assignbench compares kcoord's assignors with franz-go's on the
// same groups: the cases of franz-go's own sticky benchmarks (large,
// large_imbalance, medium) and rebalances of the large group. Both sides run
// the whole leader path of a kgo.GroupBalancer, from JoinGroup member
// metadata to SyncGroup assignments. The assignors package's
// BenchmarkCompare and "kcoord bench assign" use it.
//
// # Files
//
//   - cases.go: Case (one group as its leader receives it), CaseNames and
//     Cases, which builds them: fresh groups, and the large group after
//     members left or joined, owning what the last balance gave them.
//   - compare.go: the Contenders (kcoord's cooperative-sticky assignor and
//     franz-go's), Balance (one leader balance), Measure (the Quality of
//     a plan, rebalancing until every partition is assigned) and Run
//     (quality, time and allocations per balance, as a Result).
//   - table.go: WriteTable, the table "kcoord bench assign" prints: how
//     many times faster kcoord is than each other contender.
//
// Everything runs on its caller's goroutine.
package assignbench
