// Package assignbench compares kcoord's assignors with franz-go's on the
// same groups: the cases of franz-go's own sticky benchmarks (large,
// large_imbalance, medium) and rebalances of the large group. Both sides run
// the whole leader path of a kgo.GroupBalancer, from JoinGroup member
// metadata to SyncGroup assignments. The assignors package's Compare
// benchmark and "kcoord bench assign" use it.
package assignbench
