package conformance

// Member and generation checks of Heartbeat, SyncGroup and OffsetCommit;
// commits outside group management; offset.metadata.max.bytes; commits of
// unknown topics and partitions.
// noSyncProtocol is the Kafka source of a SyncGroup v5+ answered before
// the coordinator sees it.
const noSyncProtocol = "a SyncGroup v5+ without its protocol type or name is answered INCONSISTENT_GROUP_PROTOCOL " +
	"before the coordinator sees it (Kafka 4.x KafkaApis.scala handleSyncGroupRequest: " +
	"!syncGroupRequest.areMandatoryProtocolTypeAndNamePresent()); kfake syncs it"

// commitNoGroupV9 is the Kafka source of OffsetCommit v9's answer to a
// generation for a group that does not exist.
const commitNoGroupV9 = "from OffsetCommit v9, a generation for a group that does not exist is GROUP_ID_NOT_FOUND, " +
	"ILLEGAL_GENERATION before (Kafka 4.x OffsetMetadataManager.java validateOffsetCommit: " +
	"context.header.apiVersion() >= 9 => throw GroupIdNotFoundException); kfake answers ILLEGAL_GENERATION"

// emptyGroupInvalid is the Kafka source of INVALID_GROUP_ID for the empty
// group id in the membership APIs.
const emptyGroupInvalid = "the membership APIs refuse the empty group id (Kafka 4.x GroupCoordinatorService.java " +
	"joinGroup, syncGroup, heartbeat, leaveGroup: !isGroupIdNotEmpty => INVALID_GROUP_ID); kfake answers GROUP_ID_NOT_FOUND"

var errorScenarios = []Scenario{
	{
		Name: "heartbeat_errors",
		Steps: []Step{
			stableAB(),
			Do("A", Heartbeat(4, "$A", 2)),
			Do("A", Heartbeat(4, "$A", 1)),
			Do("A", Heartbeat(4, "A-bogus", 2)),
			Do("A", Heartbeat(4, "$A", 2, InGroup("nope"))).Kafka(
				"A Heartbeat v4: UNKNOWN_MEMBER_ID",
				"a heartbeat for a group the coordinator does not know is UNKNOWN_MEMBER_ID "+
					"(GroupCoordinator.scala handleHeartbeat: case None => Errors.UNKNOWN_MEMBER_ID); "+
					"kfake answers GROUP_ID_NOT_FOUND"),
			Do("A", Heartbeat(0, "$A", 2, InGroup(""))).Kafka(
				"A Heartbeat v0: INVALID_GROUP_ID",
				"an empty group id is invalid outside OffsetCommit, OffsetFetch, DescribeGroups and "+
					"DeleteGroups (GroupCoordinator.scala isValidGroupId); kfake answers GROUP_ID_NOT_FOUND"),
			Send("B", Join(7, "$B", Protocols(P("range", "t1", "t2")))),
			Wait("B", short),
			Do("A", Heartbeat(4, "$A", 2)),
			Do("A", Heartbeat(4, "$A", 1)),
			Do("A", Join(7, "$A")),
			Await("B"),
			Do("B", Heartbeat(4, "$B", 3)),
			Do("B", Heartbeat(1, "$B", 2)),
		},
	},
	{
		// The empty group id, API by API, as Kafka 4.x's
		// GroupCoordinatorService takes it: OffsetCommit, OffsetFetch,
		// DescribeGroups and DeleteGroups accept "" ("for backwards
		// compatibility"); the membership APIs and OffsetDelete answer
		// INVALID_GROUP_ID (isGroupIdNotEmpty).
		Name: "empty_group_id_api_by_api",
		Steps: []Step{
			Do("X", Join(7, "", InGroup(""))),
			Do("X", Sync(5, "x", 1, InGroup(""))).Kafka(
				`X SyncGroup v5: INVALID_GROUP_ID proto=null/null assignment=""`, emptyGroupInvalid),
			Do("X", Heartbeat(4, "x", 1, InGroup(""))).Kafka("X Heartbeat v4: INVALID_GROUP_ID", emptyGroupInvalid),
			Do("X", Leave(4, "x", InGroup(""))).Kafka("X LeaveGroup v4: INVALID_GROUP_ID members=[]", emptyGroupInvalid),
			Do("X", Commit(8, "", -1, At("t1", 0, 5), InGroup(""))),
			Do("X", Fetch(7, InGroup(""), Of("t1", 0))),
			Do("X", Describe(5, "")),
			Do("O", OffsetDelete(0, InGroup(""), Of("t1", 0))),
			Do("X", DeleteGroups(2, "")),
			Do("X", Fetch(7, InGroup(""), Of("t1", 0))).Kafka(
				`X OffsetFetch v7: NONE [t1/0=-1 epoch=-1 meta=""]`,
				"a group that does not exist has no offsets and no error (Kafka 4.x OffsetMetadataManager.java "+
					"fetchOffsets: GroupIdNotFoundException => failAllPartitions, INVALID_OFFSET); kfake answers GROUP_ID_NOT_FOUND"),
		},
	},
	{
		// A commit with a generation to a group that does not exist:
		// ILLEGAL_GENERATION up to v8, GROUP_ID_NOT_FOUND from v9 (Kafka
		// 4.x); with generation -1 it creates the group.
		Name: "offset_commit_with_a_generation_to_no_group",
		Steps: []Step{
			Do("X", Commit(8, "x", 3, At("t1", 0, 1), InGroup("ghost"))),
			Do("X", Commit(9, "x", 3, At("t1", 0, 1), InGroup("ghost"))).Kafka(
				"X OffsetCommit v9: t1/0=GROUP_ID_NOT_FOUND", commitNoGroupV9),
			Do("X", Commit(9, "", 0, At("t1", 0, 1), InGroup("ghost"))).Kafka(
				"X OffsetCommit v9: t1/0=GROUP_ID_NOT_FOUND", commitNoGroupV9),
			Do("X", Commit(9, "", -1, At("t1", 0, 1), InGroup("ghost"))),
			Do("X", Commit(9, "x", 3, At("t1", 0, 2), InGroup("ghost"))).Kafka(
				"X OffsetCommit v9: t1/0=UNKNOWN_MEMBER_ID",
				"the group now exists, Empty: a commit naming a generation must come from a member "+
					"(Kafka 4.x ClassicGroup.java validateOffsetCommit => validateMember); kfake answers ILLEGAL_GENERATION"),
		},
	},
	{
		// KIP-559 made SyncGroup v5's protocol type and name mandatory:
		// Kafka answers a v5 without either before the coordinator sees it,
		// and v4 names neither.
		Name: "sync_group_v5_without_protocol_type_or_name",
		Steps: []Step{
			stableA(),
			Do("A", Sync(5, "$A", 1, NoSyncProtocol(true, false))).Kafka(
				`A SyncGroup v5: INCONSISTENT_GROUP_PROTOCOL proto=null/null assignment=""`, noSyncProtocol),
			Do("A", Sync(5, "$A", 1, NoSyncProtocol(false, true))).Kafka(
				`A SyncGroup v5: INCONSISTENT_GROUP_PROTOCOL proto=null/null assignment=""`, noSyncProtocol),
			Do("A", Sync(5, "$A", 1, NoSyncProtocol(true, true))).Kafka(
				`A SyncGroup v5: INCONSISTENT_GROUP_PROTOCOL proto=null/null assignment=""`, noSyncProtocol),
			Do("A", Sync(5, "$A", 1)),
			Do("A", Sync(4, "$A", 1)),
		},
	},
	{
		Name: "sync_group_errors",
		Steps: []Step{
			stableA(),
			Do("A", Sync(5, "A-bogus", 1)),
			Do("A", Sync(5, "$A", 2)),
			Do("A", Sync(5, "$A", 1)),
			Do("A", Sync(5, "$A", 1, InGroup("nope"))).Kafka(
				`A SyncGroup v5: UNKNOWN_MEMBER_ID proto=null/null assignment=""`,
				"a SyncGroup for a group the coordinator does not know is UNKNOWN_MEMBER_ID "+
					"(GroupCoordinator.scala handleSyncGroup: case None => UNKNOWN_MEMBER_ID); kfake "+
					"answers GROUP_ID_NOT_FOUND"),
			Do("A", Sync(2, "$A", 1, InGroup(""))).Kafka(
				`A SyncGroup v2: INVALID_GROUP_ID assignment=""`,
				"an empty group id is invalid for SyncGroup (GroupCoordinator.scala isValidGroupId); "+
					"kfake answers GROUP_ID_NOT_FOUND"),
			joinNew("B", 7),
			Wait("B", short),
			Do("A", Sync(5, "$A", 1)),
			Do("A", Join(7, "$A")),
			Await("B"),
			Do("B", Sync(1, "$B", 1)),
			Send("B", Sync(1, "$B", 2)),
			Wait("B", short),
			Do("A", Sync(1, "$A", 2, Assign("$A", "a2"), Assign("$B", "b2"))),
			Await("B"),
		},
	},
	{
		Name: "offset_commit_member_and_generation_checks",
		Steps: []Step{
			stableAB(),
			Do("A", Commit(8, "$A", 2, At("t1", 0, 10))),
			Do("A", Commit(8, "$A", 1, At("t1", 0, 11))),
			Do("A", Commit(8, "A-bogus", 2, At("t1", 0, 12))),
			Do("X", Commit(8, "", -1, At("t1", 0, 13))),
			Do("X", Commit(8, "$A", -1, At("t1", 0, 14))),
			Send("B", Join(7, "$B", Protocols(P("range", "t1", "t2")))),
			Wait("B", short),
			// PreparingRebalance takes commits of the generation ending.
			Do("A", Commit(8, "$A", 2, At("t1", 1, 20))),
			Do("A", Commit(8, "$A", 3, At("t1", 1, 21))),
			Do("A", Join(7, "$A")),
			Await("B"),
			// CompletingRebalance: the member and generation are checked
			// first, then the state.
			Do("A", Commit(8, "$A", 3, At("t1", 0, 30))),
			Do("A", Commit(8, "$A", 2, At("t1", 0, 31))),
			Do("A", Commit(8, "A-bogus", 3, At("t1", 0, 32))),
			Do("B", Commit(2, "$B", 3, At("t1", 0, 33))),
			Do("X", Fetch(7, Of("t1", 0, 1))),
		},
	},
	{
		// Generation -1 commits offsets outside group management: only an
		// Empty (or unknown) group takes them.
		Name: "offset_commit_generation_minus_one",
		Steps: []Step{
			Do("X", Commit(2, "", -1, At("t1", 0, 5))),
			Do("X", Fetch(1, Of("t1", 0))),
			Do("X", Commit(8, "", 3, At("t1", 0, 6), InGroup("g2"))),
			Do("X", Commit(8, "", 3, At("t1", 0, 6))).Kafka(
				"X OffsetCommit v8: t1/0=UNKNOWN_MEMBER_ID",
				"a commit with a generation to an existing Empty group is checked as a member's "+
					"(GroupCoordinator.scala validateOffsetCommit: validateCurrentMember => UNKNOWN_MEMBER_ID); "+
					"kfake answers ILLEGAL_GENERATION"),
			Do("X", Describe(5, "g", "g2")),
			stableA(),
			Do("X", Commit(8, "", -1, At("t1", 0, 7))),
			Do("X", Commit(6, "$A", -1, At("t1", 0, 7))),
			Do("A", Leave(4, "$A")),
			Do("X", Commit(8, "", -1, At("t1", 0, 8))),
			Do("X", Commit(3, "", -1, At("t1", 1, 9))),
			Do("X", Fetch(8, Of("t1", 0, 1))),
		},
	},
	{
		Name:   "offset_metadata_max_bytes",
		Config: Config{MetadataMaxBytes: 10},
		Steps: []Step{
			Do("X", Commit(8, "", -1, AtMeta("t1", 0, 1, "0123456789"), AtMeta("t1", 1, 2, "0123456789A"))).Kafka(
				"X OffsetCommit v8: t1/0=NONE t1/1=OFFSET_METADATA_TOO_LARGE",
				"each partition's metadata is checked against offset.metadata.max.bytes "+
					"(GroupMetadataManager.scala storeOffsets, validateOffsetMetadataLength); kfake does "+
					"not enforce it"),
			Do("X", Fetch(7, Of("t1", 0, 1))).Kafka(
				`X OffsetFetch v7: NONE [t1/0=1 epoch=-1 meta="0123456789"] [t1/1=-1 epoch=-1 meta=""]`,
				"the partition with too much metadata was not stored (GroupMetadataManager.scala storeOffsets)"),
			Do("X", Commit(8, "", -1, AtMeta("t1", 2, 3, "0123456789AB"))).Kafka(
				"X OffsetCommit v8: t1/2=OFFSET_METADATA_TOO_LARGE",
				"GroupMetadataManager.scala storeOffsets: every partition too large"),
			// Kafka measures String.length(), in UTF-16 code units: ten
			// two-byte characters fit in ten.
			Do("X", Commit(8, "", -1, AtMeta("t2", 0, 4, "éééééééééé"))),
			stableA(InGroup("m")),
			Do("A", Commit(8, "$A", 1, InGroup("m"), AtMeta("t1", 0, 5, "01234567890"))).Kafka(
				"A OffsetCommit v8: t1/0=OFFSET_METADATA_TOO_LARGE",
				"members' commits are checked too (GroupMetadataManager.scala storeOffsets); kfake does "+
					"not enforce offset.metadata.max.bytes"),
			Do("X", Fetch(8, InGroup("m"), Of("t1", 0))).Kafka(
				`X OffsetFetch v8: m NONE [t1/0=-1 epoch=-1 meta=""]`,
				"the commit with too much metadata was not stored (GroupMetadataManager.scala storeOffsets); "+
					"kfake stored it"),
		},
	},
	{
		// Kafka checks an OffsetCommit's topics and partitions against
		// its metadata before the coordinator sees the request
		// (KafkaApis.scala handleOffsetCommitRequest: authorization, then
		// metadataCache.contains and getPartitionInfo, then
		// groupCoordinator.commitOffsets with the partitions left). A
		// commit of unknown partitions only never reaches the group: no
		// group is created and no member is checked.
		Name: "offset_commit_unknown_topics_and_partitions",
		Steps: []Step{
			// Every partition unknown: a topic that does not exist, and
			// partitions out of a topic's range.
			Do("X", Commit(8, "", -1, At("nope", 0, 1), At("nope", 1, 1))),
			Do("X", Commit(8, "", -1, At("t1", 3, 1), At("t1", -1, 1))),
			Do("X", Describe(5, "g")).Kafka(
				`X DescribeGroups v5: g NONE state=Dead proto=""/"" members=[]`,
				"a commit of unknown partitions only is answered by "+kafkaApis+" handleOffsetCommitRequest "+
					"(authorizedTopicsRequest.isEmpty) and never creates the group; kfake creates it before "+
					"checking the topics"),
			Do("X", List(4)).Kafka(
				"X ListGroups v4: NONE groups=[]",
				"no group was created ("+kafkaApis+" handleOffsetCommitRequest)"),
			// Nor is a member checked, nor the group id.
			Do("X", Commit(8, "A-bogus", 5, At("nope", 0, 1))).Kafka(
				"X OffsetCommit v8: nope/0=UNKNOWN_TOPIC_OR_PARTITION",
				"the topics are checked before the coordinator sees the member ("+kafkaApis+
					" handleOffsetCommitRequest); kfake checks the member and generation first"),
			Do("X", Commit(8, "", -1, InGroup(""), At("nope", 0, 1))),
			Do("X", List(4)).Kafka(
				"X ListGroups v4: NONE groups=[]",
				"the commit to group \"\" never reached the coordinator ("+kafkaApis+
					" handleOffsetCommitRequest); kfake created the group"),
			// Some unknown: the others are committed.
			Do("X", Commit(8, "", -1, At("t1", 0, 5), At("t1", 3, 6), At("nope", 0, 7), At("t2", 2, 8))),
			Do("X", FetchAll(7)),
			Do("X", List(4)).Kafka(
				`X ListGroups v4: NONE groups=[g("",Empty)]`,
				"only g was created, by the commit with known partitions ("+kafkaApis+" handleOffsetCommitRequest)"),
			// The coordinator answers the known partitions, the unknown
			// ones keep UNKNOWN_TOPIC_OR_PARTITION (responseBuilder.merge).
			Do("X", Commit(8, "A-bogus", 5, At("nope", 0, 1), At("t1", 0, 9))).Kafka(
				"X OffsetCommit v8: nope/0=UNKNOWN_TOPIC_OR_PARTITION t1/0=UNKNOWN_MEMBER_ID",
				"the unknown partition is answered by "+kafkaApis+" handleOffsetCommitRequest, the known one by "+
					"the coordinator, which checks a commit with a generation to an Empty group as a member's "+
					"(GroupCoordinator.scala validateOffsetCommit: validateCurrentMember => UNKNOWN_MEMBER_ID); "+
					"kfake answers ILLEGAL_GENERATION for both"),
			Do("X", Fetch(8, Of("t1", 0, 3), Of("nope", 0))),
		},
	},
}
