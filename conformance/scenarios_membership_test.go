package conformance

import "time"

// Joining: KIP-394 (MEMBER_ID_REQUIRED), KIP-559 (protocol type and name
// in SyncGroup), protocol checks and the protocol vote.
var membershipScenarios = []Scenario{
	{
		Name: "kip394_member_id_required",
		Steps: []Step{
			Do("A", Join(4, "")),
			Do("A", Join(4, "$A")),
			Do("A", Sync(3, "$A", 1, Assign("$A", "a1"))),
			Do("A", Heartbeat(3, "$A", 1)),
			// Before v4 a new member joins at once, without the round trip.
			Send("B", Join(3, "")),
			Wait("B", short),
			Do("A", Heartbeat(3, "$A", 1)),
			Do("A", Join(4, "$A")),
			Await("B"),
			// A made-up member id is not a pending member.
			Do("C", Join(4, "C-bogus")).Kafka(
				`C JoinGroup v4: UNKNOWN_MEMBER_ID gen=-1 member="C-bogus" leader="" proto=""`,
				"Kafka answers a JoinGroup error with the request's member id (GroupCoordinator.scala "+
					"doCurrentMemberJoinGroup: JoinGroupResult(memberId, error)); kfake answers an empty id"),
		},
	},
	{
		// A member id handed out with MEMBER_ID_REQUIRED is a pending
		// member: the join phase waits for it until it expires after
		// its session timeout; then the id is unknown.
		Name: "kip394_pending_member_holds_join_until_it_expires",
		Steps: []Step{
			stableA(),
			Do("B", Join(5, "", Timeouts(500, 2000))),
			Send("A", Join(7, "$A")),
			Wait("A", 200*time.Millisecond).Kafka(
				"A JoinGroup v7: pending after 200ms",
				"kfake ignores pending members when deciding that everyone joined; Kafka's "+
					"GroupMetadata.scala hasAllMembersJoined requires pendingMembers to be empty, and the "+
					"pending member leaves on its session timeout (GroupCoordinator.scala onExpireHeartbeat)"),
			Await("A").Kafka(
				"A JoinGroup v7: NONE gen=2 member=$A leader=$A proto=consumer/range members=[$A:t1]",
				"the join completes once the pending member expired (GroupCoordinator.scala "+
					"removePendingMemberAndUpdateGroup)"),
			Do("B", Join(5, "$B", Timeouts(500, 2000))).Kafka(
				`B JoinGroup v5: UNKNOWN_MEMBER_ID gen=-1 member=$B leader="" proto=""`,
				"Kafka answers a JoinGroup error with the request's member id (GroupCoordinator.scala "+
					"doCurrentMemberJoinGroup: JoinGroupResult(memberId, error)); kfake answers an empty id"),
		},
	},
	{
		Name: "kip559_sync_checks_protocol_type_and_name",
		Steps: []Step{
			joinNew("A", 7),
			Await("A"),
			Do("A", Sync(5, "$A", 1, SyncProtocol("consumer", "roundrobin"))),
			Do("A", Sync(5, "$A", 1, SyncProtocol("connect", "range"))),
			Do("A", Sync(5, "$A", 1, SyncProtocol("consumer", "range"), Assign("$A", "a1"))),
			Do("A", Sync(4, "$A", 1)),
			Do("A", Sync(5, "$A", 1)),
		},
	},
	{
		Name: "inconsistent_group_protocol_type",
		Steps: []Step{
			stableA(),
			Do("B", Join(7, "", Type("connect"))),
			Do("B", Join(7, "", Type(""))),
			Do("A", Join(7, "$A", Type("connect"))).Kafka(
				`A JoinGroup v7: INCONSISTENT_GROUP_PROTOCOL gen=-1 member=$A leader="" proto=null/null`,
				"Kafka answers a known member's JoinGroup error with its member id (GroupCoordinator.scala "+
					"doCurrentMemberJoinGroup); kfake answers an empty id"),
			Do("C", Join(7, "", InGroup("g2"), Type(""))),
			Do("C", Join(7, "", InGroup("g2"), Protocols())),
			// An Empty group keeps its protocol type (DescribeGroups and
			// ListGroups show it) but takes a member of any type.
			Do("A", Leave(4, "$A")),
			Do("X", Describe(5, "g")),
			Do("X", List(4)).Kafka(
				`X ListGroups v4: NONE groups=[g(consumer,Empty) g2("",Empty)]`,
				"a JoinGroup without a member id creates the group before its protocols are checked "+
					"(GroupCoordinator.scala handleJoinGroup: groupManager.getOrMaybeCreateGroup(groupId, "+
					"isUnknownMember)), and the Empty group stays until the next expiry run removes it "+
					"(GroupMetadataManager.scala cleanupGroupMetadata); kfake drops it at once"),
			Do("C", Join(7, "", Type("connect"))).Kafka(
				`C JoinGroup v7: MEMBER_ID_REQUIRED gen=-1 member=$C leader="" proto=null/null`,
				"an Empty group supports any non-empty protocol type (GroupMetadata.scala "+
					"supportsProtocols: if (is(Empty)) memberProtocolType.nonEmpty && memberProtocols.nonEmpty); "+
					"kfake keeps the first type forever"),
		},
	},
	{
		Name: "inconsistent_group_protocols_and_vote",
		Steps: []Step{
			stableA(),
			Do("B", Join(7, "", Protocols(P("roundrobin", "t1")))),
			joinNew("C", 7, Protocols(P("roundrobin", "t1"), P("range", "t1"))),
			Wait("C", short),
			Do("A", Heartbeat(4, "$A", 1)),
			// A now prefers roundrobin as C does: roundrobin wins the vote.
			Do("A", Join(7, "$A", Protocols(P("roundrobin", "t1"), P("range", "t1")))),
			Await("C"),
			Do("B", Join(7, "", Protocols(P("range", "t1")))),
			Send("C", Sync(5, "$C", 2, SyncProtocol("consumer", "roundrobin"))),
			Do("A", Sync(5, "$A", 2, SyncProtocol("consumer", "roundrobin"), Assign("$A", "a2"), Assign("$C", "c2"))),
			Await("C"),
			Do("X", Describe(5, "g")),
		},
	},
	{
		Name:   "invalid_session_timeout",
		Config: Config{MinSession: 300 * time.Millisecond, MaxSession: 5 * time.Second},
		Steps: []Step{
			Do("A", Join(7, "", Timeouts(299, 1000))),
			Do("A", Join(7, "", Timeouts(5001, 1000))),
			Do("A", Join(2, "", Timeouts(299, 1000))),
			Do("A", Join(7, "", Timeouts(5000, 1000))),
			Do("A", Join(7, "$A", Timeouts(5001, 1000))).Kafka(
				`A JoinGroup v7: INVALID_SESSION_TIMEOUT gen=-1 member=$A leader="" proto=null/null`,
				"Kafka answers with the request's member id (GroupCoordinator.scala handleJoinGroup: "+
					"JoinGroupResult(memberId, Errors.INVALID_SESSION_TIMEOUT)); kfake answers an empty id"),
			Do("A", Join(7, "$A", Timeouts(300, 1000))),
		},
	},
	{
		Name:   "group_max_size",
		Config: Config{MaxSize: 2},
		Steps: []Step{
			stableAB(),
			Do("C", Join(7, "")),
			Do("C", Join(3, "")),
			Do("C", Join(5, "", Inst("ic"))),
			Do("B", Leave(4, "$B")),
			Do("A", Heartbeat(4, "$A", 2)),
			Do("A", Join(7, "$A")),
			Do("C", Join(7, "")),
		},
	},
	{
		// KIP-389: a Stable group counts its members, a rebalancing one
		// the members that rejoined; pending member ids do not count, and
		// a member rejoining past the limit is removed.
		Name:   "group_max_size_counts_joined_members",
		Config: Config{MaxSize: 2},
		Steps: []Step{
			stableA(),
			Do("B", Join(7, "")),
			Do("C", Join(7, "")).Kafka(
				`C JoinGroup v7: MEMBER_ID_REQUIRED gen=-1 member=$C leader="" proto=null/null`,
				"Kafka counts members, not pending ids, against group.max.size (GroupCoordinator.scala "+
					"acceptJoiningMember: group.size < groupMaxSize in Stable); kfake counts pending ids too"),
			Send("B", Join(7, "$B")),
			Wait("B", short),
			Send("C", Join(7, "$C")),
			Wait("C", short).Kafka(
				"C JoinGroup v7: pending after 100ms",
				"during PreparingRebalance Kafka admits members while fewer than group.max.size have "+
					"rejoined (GroupCoordinator.scala acceptJoiningMember: group.numAwaiting < groupMaxSize)"),
			Do("A", Join(7, "$A")).Kafka(
				`A JoinGroup v7: GROUP_MAX_SIZE_REACHED gen=-1 member="" leader="" proto=null/null`,
				"the last member to rejoin past the limit is removed (GroupCoordinator.scala handleJoinGroup: "+
					"group.remove(memberId) and GROUP_MAX_SIZE_REACHED with UNKNOWN_MEMBER_ID)"),
			Do("X", Describe(5, "g")).Kafka(
				`X DescribeGroups v5: g NONE state=CompletingRebalance proto=consumer/"" members=[$B client=B host=/127.0.0.1; $C client=C host=/127.0.0.1]`,
				"with A removed, B and C have all joined and the join phase completes (GroupMetadata.scala "+
					"hasAllMembersJoined)"),
		},
	},
}
