package conformance

import (
	"fmt"
	"time"
)

// The join and sync phases: the initial rebalance delay, the rebalance
// timeout, leader election, members that do not sync, rejoins during
// CompletingRebalance, session timeouts, leaves, and commits racing
// deletes.
var rebalanceScenarios = []Scenario{
	{
		// group.initial.rebalance.delay.ms: the first rebalance of an
		// Empty group waits one delay, and one more each time a member
		// arrived during the last.
		Name:   "initial_delay_extended_while_members_arrive",
		Config: Config{InitialDelay: 300 * time.Millisecond},
		Steps: []Step{
			Send("A", Join(3, "", Timeouts(10000, 1000))),
			Sleep(200 * time.Millisecond),
			Send("B", Join(3, "", Timeouts(10000, 1000))),
			Wait("A", 250*time.Millisecond).Kafka(
				"A JoinGroup v3: pending after 250ms",
				"a member joining during the initial delay extends it (DelayedJoin.scala InitialDelayedJoin, "+
					"GroupCoordinator.scala addMemberAndRebalance: newMemberAdded); kfake has no initial delay"),
			Await("A").Kafka(
				"A JoinGroup v3: NONE gen=1 member=$A leader=$A proto=range members=[$A:t1 $B:t1]",
				"both joined within the delays (DelayedJoin.scala InitialDelayedJoin)"),
			Await("B").Kafka(
				"B JoinGroup v3: NONE gen=1 member=$B leader=$A proto=range",
				"both joined within the delays (DelayedJoin.scala InitialDelayedJoin)"),
		},
	},
	{
		// The extensions stop when the rebalance timeout is used up.
		Name:   "initial_delay_capped_by_the_rebalance_timeout",
		Config: Config{InitialDelay: 200 * time.Millisecond},
		Steps: []Step{
			Send("A", Join(3, "", Timeouts(10000, 600))),
			Sleep(100 * time.Millisecond),
			Send("B", Join(3, "", Timeouts(10000, 600))),
			Sleep(150 * time.Millisecond),
			Send("C", Join(3, "", Timeouts(10000, 600))),
			Sleep(100 * time.Millisecond),
			Send("D", Join(3, "", Timeouts(10000, 600))),
			Sleep(150 * time.Millisecond),
			Send("E", Join(3, "", Timeouts(10000, 600))),
			Wait("A", 250*time.Millisecond).Kafka(
				"A JoinGroup v3: NONE gen=1 member=$A leader=$A proto=range members=[$A:t1 $B:t1 $C:t1 $D:t1 $E:t1]",
				"each extension is min(delay, remaining) and the remaining time shrinks to zero at the "+
					"rebalance timeout, 600 ms (DelayedJoin.scala InitialDelayedJoin.onComplete); kfake has "+
					"no initial delay"),
			Do("X", Describe(5, "g")).Kafka(
				`X DescribeGroups v5: g NONE state=CompletingRebalance proto=consumer/"" members=[$A client=A host=/127.0.0.1; $B client=B host=/127.0.0.1; $C client=C host=/127.0.0.1; $D client=D host=/127.0.0.1; $E client=E host=/127.0.0.1]`,
				"the join phase completed at the rebalance timeout (DelayedJoin.scala InitialDelayedJoin)"),
		},
	},
	{
		// Only the very first rebalance (generation 0) is extended by
		// new members; an Empty group of a later generation waits one
		// delay.
		Name:   "initial_delay_not_extended_after_the_first_generation",
		Config: Config{InitialDelay: 300 * time.Millisecond},
		Steps: []Step{
			stableA(),
			Do("A", Leave(4, "$A")),
			Send("B", Join(3, "", Timeouts(10000, 1000))),
			Sleep(150 * time.Millisecond),
			Send("C", Join(3, "", Timeouts(10000, 1000))),
			Wait("B", 300*time.Millisecond).Kafka(
				"B JoinGroup v3: NONE gen=3 member=$B leader=$B proto=range members=[$B:t1 $C:t1]",
				"newMemberAdded is only set while generationId == 0 (GroupCoordinator.scala "+
					"addMemberAndRebalance: if (group.is(PreparingRebalance) && group.generationId == 0)), "+
					"so the delay is not extended; kfake has no initial delay"),
			Await("C").Kafka(
				"C JoinGroup v3: NONE gen=3 member=$C leader=$B proto=range",
				"C joined within the delay (DelayedJoin.scala InitialDelayedJoin)"),
		},
	},
	{
		Name: "rebalance_timeout_removes_members_that_did_not_rejoin",
		Steps: []Step{
			stableAB(Timeouts(10000, 500)),
			Send("B", Join(7, "$B", Timeouts(10000, 500), Protocols(P("range", "t1", "t2")))),
			Wait("B", 250*time.Millisecond),
			Await("B"),
			Do("A", Heartbeat(4, "$A", 2)),
			Do("A", Join(7, "$A", Timeouts(10000, 500))).Kafka(
				`A JoinGroup v7: UNKNOWN_MEMBER_ID gen=-1 member=$A leader="" proto=null/null`,
				"Kafka answers a JoinGroup error with the request's member id (GroupCoordinator.scala "+
					"doCurrentMemberJoinGroup); kfake answers an empty id"),
		},
	},
	{
		Name: "leader_leaves_and_a_new_leader_is_elected",
		Steps: []Step{
			stableAB(),
			Do("A", Leave(1, "$A")),
			Do("B", Heartbeat(4, "$B", 2)),
			Do("B", Join(7, "$B")),
			Do("B", Sync(5, "$B", 3, Assign("$B", "b3"))),
			Do("X", Describe(5, "g")),
		},
	},
	{
		// A member that got its JoinGroup answer but does not send
		// SyncGroup within the rebalance timeout is removed, even the
		// leader (whose assignment everyone waits for).
		Name: "leader_that_never_syncs_is_removed_after_the_rebalance_timeout",
		Steps: []Step{
			stableAB(Timeouts(5000, 400)),
			Send("B", Join(7, "$B", Timeouts(5000, 400), Protocols(P("range", "t1", "t2")))),
			Wait("B", short),
			Do("A", Join(7, "$A", Timeouts(5000, 400))),
			Await("B"),
			Send("B", Sync(5, "$B", 3)),
			Wait("B", 1500*time.Millisecond),
			Do("B", Join(7, "$B", Timeouts(5000, 400), Protocols(P("range", "t1", "t2")))),
			Do("A", Heartbeat(4, "$A", 3)),
		},
	},
	{
		// The pending-sync check goes on after the leader's SyncGroup
		// made the group Stable.
		Name: "follower_that_never_syncs_is_removed_after_the_rebalance_timeout",
		Steps: []Step{
			stableAB(Timeouts(5000, 400)),
			Send("B", Join(7, "$B", Timeouts(5000, 400), Protocols(P("range", "t1", "t2")))),
			Wait("B", short),
			Do("A", Join(7, "$A", Timeouts(5000, 400))),
			Await("B"),
			Do("A", Sync(5, "$A", 3, Assign("$A", "a3"), Assign("$B", "b3"))),
			Sleep(700 * time.Millisecond),
			Do("A", Heartbeat(4, "$A", 3)).Kafka(
				"A Heartbeat v4: REBALANCE_IN_PROGRESS",
				"members that have not synced when the rebalance timeout expires are removed in Stable too "+
					"(GroupCoordinator.scala onExpirePendingSync: case CompletingRebalance | Stable); "+
					"kfake stops the pending-sync timer when the leader syncs"),
			Do("A", Join(7, "$A", Timeouts(5000, 400))),
			Do("B", Heartbeat(4, "$B", 3)),
		},
	},
	{
		Name: "rejoin_during_completing_rebalance",
		Steps: []Step{
			stableAB(),
			Send("B", Join(7, "$B", Protocols(P("range", "t1", "t2")))),
			Wait("B", short),
			Do("A", Join(7, "$A")),
			Await("B"),
			// Same metadata: the current generation again, no rebalance.
			Do("B", Join(7, "$B", Protocols(P("range", "t1", "t2")))),
			Do("A", Join(7, "$A")),
			Do("B", Heartbeat(4, "$B", 3)),
			// New metadata: a rebalance; the waiting SyncGroup is told.
			Send("B", Sync(5, "$B", 3)),
			Wait("B", short),
			Send("A", Join(7, "$A", Protocols(P("range", "t1", "t3")))),
			Await("B"),
			Do("B", Join(7, "$B", Protocols(P("range", "t1", "t2")))),
			Await("A"),
		},
	},
	{
		Name: "stable_follower_rejoin_keeps_the_generation_leader_rejoin_rebalances",
		Steps: []Step{
			stableAB(),
			Do("B", Join(7, "$B")),
			Do("A", Heartbeat(4, "$A", 2)),
			Send("A", Join(7, "$A")),
			Wait("A", short),
			Do("B", Heartbeat(4, "$B", 2)),
			Do("B", Join(7, "$B")),
			Await("A"),
		},
	},
	{
		Name: "session_timeout_removes_a_silent_member",
		Steps: []Step{
			stableAB(Timeouts(800, 2000)),
			Sleep(300 * time.Millisecond),
			Do("A", Heartbeat(4, "$A", 2)),
			Sleep(300 * time.Millisecond),
			Do("A", Heartbeat(4, "$A", 2)),
			Sleep(400 * time.Millisecond),
			Do("A", Heartbeat(4, "$A", 2)),
			Do("A", Join(7, "$A", Timeouts(800, 2000))),
			Do("B", Heartbeat(4, "$B", 2)),
		},
	},
	{
		Name: "leave_group_versions_and_pending_members",
		Steps: []Step{
			stableAB(),
			Do("X", Leave(0, "bogus")),
			Do("X", Leave(1, "$B", InGroup("nope"))).Kafka(
				"X LeaveGroup v1: UNKNOWN_MEMBER_ID",
				"leaving a group the coordinator does not know is UNKNOWN_MEMBER_ID per member "+
					"(GroupCoordinator.scala handleLeaveGroup: case None), folded into the top level "+
					"before v3 (LeaveGroupResponse.java); kfake answers GROUP_ID_NOT_FOUND"),
			Do("X", Leave(0, "$B", InGroup(""))).Kafka(
				"X LeaveGroup v0: INVALID_GROUP_ID",
				"an empty group id is invalid for LeaveGroup (GroupCoordinator.scala isValidGroupId); "+
					"kfake answers GROUP_ID_NOT_FOUND"),
			Do("C", Join(7, "")),
			Do("C", Leave(3, "$C")),
			Do("C", Join(7, "$C")).Kafka(
				`C JoinGroup v7: UNKNOWN_MEMBER_ID gen=-1 member=$C leader="" proto=null/null`,
				"Kafka answers a JoinGroup error with the request's member id (GroupCoordinator.scala "+
					"doCurrentMemberJoinGroup); kfake answers an empty id"),
			Do("X", LeaveBatch(5, Leaving("$B", ""), Leaving("bogus", ""))),
			Do("A", Heartbeat(4, "$A", 2)),
			Do("A", Join(7, "$A")),
		},
	},
	commitsRacingDeletes(),
}

// commitsRacingDeletes races commits against DeleteGroups and OffsetDelete.
// A member's commits and the deletion of its non-empty group, or of offsets
// of a topic it does not subscribe to, do not interfere; an admin commit
// racing the deletion of its Empty group may land before the deletion
// (which takes it), after it (recreating the group), or on the group being
// deleted (COORDINATOR_NOT_AVAILABLE, GroupCoordinator.scala
// validateOffsetCommit on a Dead group), and the group must be consistent
// with the outcome afterwards.
func commitsRacingDeletes() Scenario {
	steps := []Step{
		stableA(),
		Send("A", Commit(8, "$A", 1, At("t1", 0, 10))),
		Send("X", DeleteGroups(2, "g")),
		Await("A"),
		Await("X"),
		Send("A", Commit(8, "$A", 1, At("t1", 1, 11))),
		Send("Y", Commit(8, "", -1, At("t1", 2, 12))),
		Send("O", OffsetDelete(0, Of("t2", 0))),
		Await("A"),
		Await("Y"),
		Await("O"),
		Do("X", FetchAll(7)),
	}
	for i := range 3 {
		c := fmt.Sprintf("c%d", i)
		deleted := []string{
			fmt.Sprintf(`X DescribeGroups v5: %s NONE state=Dead proto=""/"" members=[]`, c),
			"Y OffsetCommit v8: t2/1=NONE",
			`X OffsetFetch v7: NONE [t2/0=-1 epoch=-1 meta=""] [t2/1=3 epoch=-1 meta=""]`,
		}
		kept := []string{
			fmt.Sprintf(`X DescribeGroups v5: %s NONE state=Empty proto=""/"" members=[]`, c),
			"Y OffsetCommit v8: t2/1=NONE",
			`X OffsetFetch v7: NONE [t2/0=2 epoch=-1 meta=""] [t2/1=3 epoch=-1 meta=""]`,
		}
		ok, deleting, gone := "Y OffsetCommit v8: t2/0=NONE", "Y OffsetCommit v8: t2/0=COORDINATOR_NOT_AVAILABLE",
			fmt.Sprintf("X DeleteGroups v2: %s=NONE", c)
		steps = append(steps,
			Do("X", Commit(8, "", -1, InGroup(c), At("t2", 0, 1))),
			Either([][]string{
				append([]string{ok, gone}, deleted...),       // commit, then delete
				append([]string{ok, gone}, kept...),          // delete, then commit
				append([]string{deleting, gone}, deleted...), // commit during the delete
			},
				Send("Y", Commit(8, "", -1, InGroup(c), At("t2", 0, 2))),
				Send("X", DeleteGroups(2, c)),
				Await("Y"),
				Await("X"),
				Do("X", Describe(5, c)),
				Do("Y", Commit(8, "", -1, InGroup(c), At("t2", 1, 3))),
				Do("X", Fetch(7, InGroup(c), Of("t2", 0, 1))),
			),
		)
	}
	return Scenario{Name: "commits_racing_deletes", Steps: steps}
}
