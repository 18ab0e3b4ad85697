package conformance

import "time"

// staticFollower forms the group with B (dynamic, the leader) and A
// (static, instance ia): generation 2, B assigned "b2", A ($ia) "a2".
func staticFollower() Step {
	return Group(
		joinNew("B", 7),
		Await("B"),
		Do("B", Sync(5, "$B", 1, Assign("$B", "b1"))),
		Send("A", Join(7, "", Inst("ia"))),
		Wait("A", short),
		Do("B", Heartbeat(4, "$B", 1)),
		Do("B", Join(7, "$B")),
		Await("A"),
		Send("A", Sync(5, "$ia", 2, Inst("ia"))),
		Do("B", Sync(5, "$B", 2, Assign("$B", "b2"), Assign("$ia", "a2"))),
		Await("A"),
	)
}

// Static membership: KIP-345 and KIP-814.
// leavePairing is the Kafka source of a LeaveGroup entry whose member id
// and instance id belong to different members.
const leavePairing = "an entry naming a member id is checked with ClassicGroup.validateMember: an instance id mapped " +
	"to another member id is FENCED_INSTANCE_ID and removes nobody (Kafka 4.x GroupMetadataManager.java " +
	"classicGroupLeaveToClassicGroup, ClassicGroup.java validateMember); kfake looks the member up by instance " +
	"id alone"

var staticScenarios = []Scenario{
	{
		// A LeaveGroup entry naming both a member id and an instance id
		// removes the member only if the instance is that member's
		// (ClassicGroup.validateMember); a wrong pairing keeps everyone.
		Name: "leave_group_pairs_a_member_id_with_another_instance",
		Steps: []Step{
			staticAB(7),
			Do("X", LeaveBatch(4, Leaving("$B", "nope"))),
			Do("X", LeaveBatch(4, Leaving("$B", "ia"))).Kafka(
				"X LeaveGroup v4: NONE members=[$B(ia)=FENCED_INSTANCE_ID]", leavePairing),
			Do("X", LeaveBatch(4, Leaving("bogus", "ia"))).Kafka(
				`X LeaveGroup v4: NONE members=["bogus"(ia)=FENCED_INSTANCE_ID]`, leavePairing),
			Do("X", Describe(5, "g")).Kafka(
				`X DescribeGroups v5: g NONE state=Stable proto=consumer/range members=[$B client=B host=/127.0.0.1 meta=t1 assignment="b2"; $ia(ia) client=A host=/127.0.0.1 meta=t1 assignment="a2"]`,
				"no LeaveGroup above removed anyone, so the group is still Stable with both members "+
					"(Kafka 4.x GroupMetadataManager.java classicGroupLeaveToClassicGroup); kfake removed A"),
		},
	},
	{
		Name: "kip345_static_member_joins_without_member_id_round_trip",
		Steps: []Step{
			Do("A", Join(5, "", Inst("ia"))),
			Do("A", Sync(5, "$ia", 1, Inst("ia"), Assign("$ia", "a1"))),
			Do("A", Heartbeat(3, "$ia", 1, Inst("ia"))),
			Do("A", Heartbeat(3, "$ia", 1, Inst("ib"))),
			Do("A", Heartbeat(3, "$ia", 1)),
			Send("B", Join(5, "", Inst("ib"))),
			Wait("B", short),
			Do("A", Heartbeat(3, "$ia", 1, Inst("ia"))),
			Do("A", Join(5, "$ia", Inst("ia"))),
			Await("B"),
		},
	},
	{
		// A static member that restarts (no member id, same instance id)
		// gets a new id and its old assignment, and the group does not
		// rebalance.
		Name: "kip345_static_member_replaced_without_rebalance",
		Steps: []Step{
			staticFollower(),
			Do("A2", Join(7, "", Inst("ia"))),
			Do("B", Heartbeat(4, "$B", 2)),
			Do("A2", Sync(5, "$ia2", 2, Inst("ia"))),
			Do("A2", Heartbeat(4, "$ia2", 2, Inst("ia"))),
			Do("X", Describe(5, "g")).Kafka(
				`X DescribeGroups v5: g NONE state=Stable proto=consumer/range members=[$B client=B host=/127.0.0.1 meta=t1 assignment="b2"; $ia2(ia) client=A host=/127.0.0.1 meta=t1 assignment="a2"]`,
				"Kafka replaces only the member id of a returning static member and keeps its MemberMetadata, "+
					"whose clientId and clientHost are immutable (GroupMetadata.scala replaceStaticMember, "+
					"MemberMetadata.scala); kfake reports the new connection's client id"),
		},
	},
	{
		Name: "kip345_replaced_static_member_is_fenced",
		Steps: []Step{
			staticFollower(),
			Do("A2", Join(7, "", Inst("ia"))),
			Do("A", Heartbeat(4, "$ia", 2, Inst("ia"))),
			Do("A", Heartbeat(4, "$ia", 2)),
			Do("A", Sync(5, "$ia", 2, Inst("ia"))),
			Do("A", Commit(8, "$ia", 2, Inst("ia"), At("t1", 0, 1))),
			Do("A", Join(7, "$ia", Inst("ia"))).Kafka(
				`A JoinGroup v7: FENCED_INSTANCE_ID gen=-1 member=$ia leader="" proto=null/null`,
				"Kafka answers a known member's JoinGroup error with its member id (GroupCoordinator.scala "+
					"doCurrentMemberJoinGroup); kfake answers an empty id"),
			Do("A", LeaveBatch(4, Leaving("$ia", "ia"))).Kafka(
				"A LeaveGroup v4: NONE members=[$ia(ia)=FENCED_INSTANCE_ID]",
				"a LeaveGroup naming a member id is checked against the instance's current id "+
					"(GroupCoordinator.scala handleLeaveGroup: validateCurrentMember); kfake looks the "+
					"member up by instance id alone and removes the new member"),
			Do("B", Heartbeat(4, "$B", 2)).Kafka(
				"B Heartbeat v4: NONE",
				"the fenced LeaveGroup removed nobody (GroupCoordinator.scala handleLeaveGroup)"),
			Do("A2", Heartbeat(4, "$ia2", 2, Inst("ia"))).Kafka(
				"A2 Heartbeat v4: NONE",
				"the fenced LeaveGroup removed nobody (GroupCoordinator.scala handleLeaveGroup)"),
		},
	},
	{
		Name: "kip814_static_leader_returns_and_skips_assignment",
		Steps: []Step{
			staticAB(9),
			Do("A2", Join(9, "", Inst("ia"))),
			Do("A2", Sync(5, "$ia2", 2, Inst("ia"))),
			Do("B", Heartbeat(4, "$B", 2)),
			Do("B", Join(9, "$B")),
		},
	},
	{
		// Before JoinGroup v9 a returning static leader is given the old
		// leader id, so it does not run an assignment.
		Name: "kip345_static_leader_returns_before_v9",
		Steps: []Step{
			staticAB(5),
			Do("A2", Join(5, "", Inst("ia"))).Kafka(
				"A2 JoinGroup v5: NONE gen=2 member=$ia2 leader=$ia proto=range",
				"before JoinGroup v9 the answer carries the previous leader id and no members "+
					"(GroupCoordinator.scala updateStaticMemberAndRebalance: leaderId = currentLeader, "+
					"members = List.empty); kfake answers the new id as leader, with the members"),
			Do("A2", Sync(5, "$ia2", 2, Inst("ia"))),
			Do("B", Heartbeat(4, "$B", 2)),
		},
	},
	{
		// A static member rejoining while its old incarnation waits in
		// JoinGroup fences the old one and takes its place in the
		// rebalance.
		Name: "kip345_static_member_rejoins_during_rebalance",
		Steps: []Step{
			staticFollower(),
			Send("A", Join(7, "$ia", Inst("ia"), Protocols(P("range", "t1", "t2")))),
			Wait("A", short),
			Send("A2", Join(7, "", Inst("ia"), Protocols(P("range", "t1", "t2")))),
			Await("A").Kafka(
				`A JoinGroup v7: FENCED_INSTANCE_ID gen=-1 member=$ia leader="" proto=null/null`,
				"the fenced join is answered with the old member id (GroupMetadata.scala "+
					"replaceStaticMember: JoinGroupResult(oldMemberId, Errors.FENCED_INSTANCE_ID)); kfake "+
					"answers an empty id"),
			Do("B", Heartbeat(4, "$B", 2)),
			Do("B", Join(7, "$B")),
			Await("A2"),
		},
	},
	{
		Name: "kip345_leave_group_batch_by_instance_id",
		Steps: []Step{
			joinNew("C", 7),
			Await("C"),
			Do("C", Sync(5, "$C", 1, Assign("$C", "c1"))),
			Send("A", Join(5, "", Inst("ia"))),
			Send("B", Join(5, "", Inst("ib"))),
			Wait("A", short),
			Wait("B", short),
			Do("C", Heartbeat(4, "$C", 1)),
			Do("C", Join(7, "$C")),
			Await("A"),
			Await("B"),
			Send("A", Sync(5, "$ia", 2, Inst("ia"))),
			Send("B", Sync(5, "$ib", 2, Inst("ib"))),
			Do("C", Sync(5, "$C", 2, Assign("$C", "c2"), Assign("$ia", "a2"), Assign("$ib", "b2"))),
			Await("A"),
			Await("B"),
			Do("X", LeaveBatch(3, Leaving("", "ia"), Leaving("", "ib"), Leaving("", "ic"))).Kafka(
				`X LeaveGroup v3: NONE members=[""(ia)=NONE ""(ib)=NONE ""(ic)=UNKNOWN_MEMBER_ID]`,
				"each member's answer echoes the request's identity, an empty member id for a leave "+
					"by instance id (GroupCoordinator.scala handleLeaveGroup: memberLeaveError(leavingMember, ...)); "+
					"kfake answers the resolved member id"),
			Do("C", Heartbeat(4, "$C", 2)),
			Do("C", Join(7, "$C")),
			Do("A", Heartbeat(4, "$ia", 2, Inst("ia"))),
		},
	},
	{
		// The rebalance timeout removes dynamic members that did not
		// rejoin, never static ones; a leader that did not rejoin is
		// replaced by one that did.
		Name: "kip345_static_member_survives_rebalance_timeout",
		Steps: []Step{
			staticAB(5, Timeouts(10000, 500)),
			Send("B", Join(5, "$B", Timeouts(10000, 500), Protocols(P("range", "t1", "t2")))),
			Wait("B", 250*time.Millisecond),
			Await("B").Kafka(
				"B JoinGroup v5: NONE gen=3 member=$B leader=$B proto=range members=[$B:t1,t2 $ia(ia):t1]",
				"only dynamic members that did not rejoin are removed (GroupCoordinator.scala onCompleteJoin: "+
					"notYetRejoinedMembers.filterNot(_._2.isStaticMember)) and a joined member becomes leader "+
					"(GroupMetadata.scala maybeElectNewJoinedLeader); kfake removes static members too"),
			Do("A", Heartbeat(4, "$ia", 2, Inst("ia"))).Kafka(
				"A Heartbeat v4: ILLEGAL_GENERATION",
				"A is still a member, of an older generation (GroupCoordinator.scala validateHeartbeat)"),
			Do("A", Join(5, "$ia", Inst("ia"), Timeouts(10000, 500))).Kafka(
				"A JoinGroup v5: NONE gen=3 member=$ia leader=$B proto=range",
				"a member rejoining with the same metadata during CompletingRebalance gets the current "+
					"generation (GroupCoordinator.scala doCurrentMemberJoinGroup)"),
			Send("A", Sync(5, "$ia", 3, Inst("ia"))),
			Do("B", Sync(5, "$B", 3, Assign("$B", "b3"), Assign("$ia", "a3"))),
			Await("A").Kafka(
				`A SyncGroup v5: NONE proto=consumer/range assignment="a3"`,
				"A is a member of generation 3 (GroupCoordinator.scala doSyncGroup)"),
		},
	},
}
