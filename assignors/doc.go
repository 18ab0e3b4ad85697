// Package assignors decides which member of a consumer group consumes which
// partition: Kafka's partition assignment strategies (range, roundrobin,
// sticky, cooperative-sticky), a registry for custom ones, the consumer
// protocol's wire formats, and adapters that plug every strategy into
// franz-go as a kgo.GroupBalancer. Clients use it, and the coordinator
// (package groups) runs its server assignors for consumer-protocol groups
// (KIP-848: uniform and range, server.go).
//
// Who calls what, in a classic (JoinGroup/SyncGroup) consumer group:
//
//   - Every member, when it joins, calls SubscriptionUserData on each
//     assignor it supports and sends the result inside its subscription
//     (EncodeSubscription: the consumer protocol's ConsumerMemberMetadata).
//   - The coordinator picks a strategy every member supports and elects a
//     leader. The leader decodes every member's subscription
//     (DecodeSubscription) and calls Assign with the group's topics.
//   - The leader encodes each member's Assignment (EncodeAssignment) into its
//     SyncGroup request; every member decodes its own (DecodeAssignment) and
//     calls OnAssignment.
//
// Balancer does all of the above for a franz-go client. For the built-in
// strategies the leader decodes the wire formats straight into a compact
// form that numbers topics, partitions and members, and encodes the plan
// straight into SyncGroup assignments: balancing two thousand members over
// a million partitions allocates a few large slices, not a map per member.
//
// # Sticky assignment
//
// The sticky strategies put balance first, then stickiness, then racks:
//
//  1. Balance: the load vector is the most even one the subscriptions allow
//     (no partition can move, even along a chain of members each handing
//     one on, from a member to one at least two below it). In particular
//     members with the same subscriptions end at most one partition apart.
//  2. Stickiness: among those assignments, the one that keeps the most
//     partitions with their previous owners. A partition moves only if
//     balance needs it.
//  3. Racks (KIP-881): when a member picks which of its partitions to keep,
//     and when the partitions nobody keeps are dealt, those with a replica
//     in the member's rack go first. Racks never cost balance or moves.
//
// Members with identical subscriptions form a class, topics subscribed by
// the same classes a topic class. With one class (everybody subscribes
// alike) the plan is direct: the larger shares go to the members that held
// the most, each keeps what its share allows, and the rest is dealt round
// robin. With several classes, the loads are settled between classes by
// augmenting paths over the (small) class graph, split within classes, and
// made as sticky as the balance allows by cancelling negative cycles in the
// flow's residual graph, first between classes and then between members.
// Either way, picking the partitions is linear in their number.
//
// Prior ownership follows Kafka: the eager sticky assignor reads it from
// the user data (StickyAssignorUserData, which Java's and franz-go's
// clients write too); the cooperative one from the owned partitions of the
// subscription and their generation. When members disagree, the claim of
// the highest generation stands.
//
// Registry maps strategy names (and Kafka's Java class names, as found in
// partition.assignment.strategy) to assignors; Random is an example of a
// custom assignor written against the public API alone.
//
// # Files
//
// The public API:
//
//   - assignor.go: the Assignor interface (Kafka's
//     ConsumerPartitionAssignor) and the types it speaks: Group, Member,
//     Subscription, Assignment, JoinState, RebalanceProtocol.
//   - range.go, roundrobin.go, sticky.go: the built-in client-side
//     assignors Range, RoundRobin, Sticky and CooperativeSticky, and the
//     plans behind them.
//   - random.go: Random, the example of a custom assignor.
//   - server.go: ServerAssignor (Kafka's ConsumerGroupPartitionAssignor),
//     the built-in Uniform and ServerRange, and ServerAssignorNamed. The
//     coordinator calls Target on the goroutine that writes the group's new
//     target.
//   - registry.go: Registry (safe for concurrent use), which maps strategy
//     names and Kafka's class names to assignors.
//   - protocol.go: the consumer protocol's wire formats
//     (EncodeSubscription, DecodeSubscription, EncodeAssignment,
//     DecodeAssignment) and the encoding of the sticky user data.
//   - kgo.go: Balancer, the franz-go adapter; franz-go calls it from its
//     own goroutines, and for the built-in assignors its leader path
//     decodes and encodes the compact form directly.
//   - errors.go: the sentinel errors of Registry and ServerAssignorNamed.
//
// The compact form, shared by every built-in assignor:
//
//   - input.go: input, a group by number (topics, partitions, members in
//     Kafka's order).
//   - builder.go: builder, which makes an input from a Group (buildGroup),
//     and for kgo.go and server.go straight from JoinGroup metadata or a
//     TargetGroup, reading the claims each assignor needs (claimMode).
//   - racks.go: members' and replicas' racks (KIP-881), by number.
//   - ownership.go: who owned each partition before the rebalance, the
//     highest generation's claim winning.
//   - plan.go: the planner interface, and turning a plan into Assignments
//     or straight into SyncGroup assignments.
//
// The sticky planner (# Sticky assignment above), in the order it runs:
//
//   - classes.go: member classes and topic classes.
//   - cells.go: per member and topic class, how many partitions it held
//     and how many it gets.
//   - targets.go: each member's total (the most even load vector) and the
//     split of the loads between and within classes.
//   - counts.go: settleCounts, how many of each topic class every member
//     gets.
//   - repair.go: the negative-cycle cancelling that makes the counts as
//     sticky as the balance allows.
//   - deal.go: realize, which picks the partitions: each member keeps its
//     own, rack-local first, and the rest are dealt round robin.
//   - cooperative.go: withhold, which turns the plan cooperative (KIP-429)
//     by leaving out partitions another member may still consume.
//
// # Goroutines
//
// Assignors are deterministic and safe for concurrent use; every built-in
// one plans on its caller's goroutine and blocks on nothing but the CPU.
package assignors
