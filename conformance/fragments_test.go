package conformance

import "time"

// Script fragments shared by scenarios.

// Kafka source files the overrides cite.
const (
	groupCoordinator = "core/src/main/scala/kafka/coordinator/group/GroupCoordinator.scala"
	groupMetadata    = "core/src/main/scala/kafka/coordinator/group/GroupMetadata.scala"
	groupManager     = "core/src/main/scala/kafka/coordinator/group/GroupMetadataManager.scala"
	delayedJoin      = "core/src/main/scala/kafka/coordinator/group/DelayedJoin.scala"
	kafkaApis        = "core/src/main/scala/kafka/server/KafkaApis.scala"
)

// short is how long a Wait gives a request that should stay pending, or
// how long a script lets the server take in a request sent with Send
// before the next step races it.
const short = 100 * time.Millisecond

// joinNew is a new dynamic member joining at JoinGroup v4+: it is told
// MEMBER_ID_REQUIRED with its id (KIP-394) and sends the join with it,
// which stays pending.
func joinNew(m string, v int16, opts ...Opt) Step {
	return Group(
		Do(m, Join(v, "", opts...)),
		Send(m, Join(v, "$"+m, opts...)),
	)
}

// stableA forms the group with A alone: generation 1, leader A, A assigned
// "a1", Stable. opts apply to every request (InGroup, Timeouts, ...).
func stableA(opts ...Opt) Step {
	return Group(
		joinNew("A", 7, opts...),
		Await("A"),
		Do("A", Sync(5, "$A", 1, with(opts, Assign("$A", "a1"))...)),
	)
}

// stableAB forms the group with A, then B joins: generation 2, leader A,
// A assigned "a2" and B "b2", Stable. opts apply to every request. Members
// join one at a time, so no step depends on the initial rebalance delay
// (which kfake does not have).
func stableAB(opts ...Opt) Step {
	return Group(
		stableA(opts...),
		joinNew("B", 7, opts...),
		Wait("B", short),
		Do("A", Heartbeat(4, "$A", 1, opts...)),
		Do("A", Join(7, "$A", opts...)),
		Await("B"),
		Send("B", Sync(5, "$B", 2, opts...)),
		Do("A", Sync(5, "$A", 2, with(opts, Assign("$A", "a2"), Assign("$B", "b2"))...)),
		Await("B"),
	)
}

// staticAB forms the group with A (static, instance ia, the leader) and B
// (dynamic): generation 2, A ($ia) assigned "a2", B "b2", Stable. Joins are
// at version v; opts apply to every request.
func staticAB(v int16, opts ...Opt) Step {
	a := with(opts, Inst("ia"))
	return Group(
		Do("A", Join(v, "", a...)),
		Do("A", Sync(5, "$ia", 1, with(a, Assign("$ia", "a1"))...)),
		joinNew("B", v, opts...),
		Wait("B", short),
		Do("A", Heartbeat(4, "$ia", 1, a...)),
		Do("A", Join(v, "$ia", a...)),
		Await("B"),
		Send("B", Sync(5, "$B", 2, opts...)),
		Do("A", Sync(5, "$ia", 2, with(a, Assign("$ia", "a2"), Assign("$B", "b2"))...)),
		Await("B"),
	)
}

// with returns opts followed by more, without modifying opts.
func with(opts []Opt, more ...Opt) []Opt {
	return append(append([]Opt(nil), opts...), more...)
}
