package conformance

import "time"

// Admin APIs: DescribeGroups, ListGroups (KIP-518), DeleteGroups,
// OffsetFetch, OffsetDelete (KIP-496). OffsetDelete goes out on a
// connection of its own ("O"), so a server that does not serve it only
// loses that connection.
// joinV0 is the Kafka source of the answers to a JoinGroup v0 member.
const joinV0 = "JoinGroup v0's rebalance timeout is its session timeout (JoinGroupRequest.java: version 0 => " +
	"setRebalanceTimeoutMs(sessionTimeoutMs)), so the member that joined is still there for SyncGroup, " +
	"Heartbeat and LeaveGroup (Kafka 4.x GroupMetadataManager.java classicGroupSync, classicGroupHeartbeat, " +
	"classicGroupLeave); kfake no longer knows it"

var adminScenarios = []Scenario{
	{
		// Every version of every group API kcoord advertises that no
		// other scenario plays, once each, in a plain flow: so the suite
		// states each version's answer (TestScenariosPlayEveryAdvertisedGroupAPIVersion).
		Name: "every_advertised_version_once",
		Steps: []Step{
			Do("X", FindCoordinator(0, "g")),
			Do("X", FindCoordinator(1, "g")),
			Do("X", FindCoordinator(2, "g")),
			Do("X", FindCoordinator(3, "g")),
			Do("X", FindCoordinator(4, "g", "h")),
			Do("X", FindCoordinator(5, "g")),
			Do("X", FindCoordinator(6, "g")),
			// JoinGroup v0 (the session timeout is the rebalance timeout),
			// then SyncGroup v0, Heartbeat v2 and LeaveGroup v2 in its group.
			Send("A", Join(0, "", InGroup("j0"))),
			Await("A"),
			Do("A", Sync(0, "$A", 1, InGroup("j0"), Assign("$A", "a1"))).Kafka(`A SyncGroup v0: NONE assignment="a1"`, joinV0),
			Do("A", Heartbeat(2, "$A", 1, InGroup("j0"))).Kafka("A Heartbeat v2: NONE", joinV0),
			Do("A", Leave(2, "$A", InGroup("j0"))).Kafka("A LeaveGroup v2: NONE", joinV0),
			Send("B", Join(1, "", InGroup("j1"))),
			Await("B"),
			joinNew("C", 6, InGroup("j6")),
			Await("C"),
			joinNew("D", 8, InGroup("j8")),
			Await("D"),
			// Commits outside group management, then fetches, at the
			// versions nothing else plays.
			Do("X", Commit(0, "", -1, At("t1", 0, 10), InGroup("c"))),
			Do("X", Commit(1, "", -1, At("t1", 1, 11), InGroup("c"))),
			Do("X", Commit(4, "", -1, At("t1", 2, 12), InGroup("c"))),
			Do("X", Commit(7, "", -1, At("t2", 0, 13), InGroup("c"))),
			Do("X", Fetch(0, InGroup("c"), Of("t1", 0, 1, 2))),
			Do("X", Fetch(4, InGroup("c"), Of("t1", 0), Of("t2", 0))),
			Do("X", Fetch(9, InGroup("c"), Of("t1", 2), Of("t2", 0))),
			Do("X", Describe(1, "c", "j1")),
			Do("X", Describe(2, "c")),
			Do("X", Describe(3, "j6")),
			Do("X", Describe(6, "j8", "nope")),
			Do("X", List(1)),
			Do("X", List(2)),
			Do("X", DeleteGroups(1, "c", "j0")),
		},
	},
	{
		// The protocol, and members' metadata and assignments, are only
		// described when the group is Stable.
		Name:   "describe_groups_through_the_states",
		Config: Config{InitialDelay: 300 * time.Millisecond},
		Steps: []Step{
			Do("X", Describe(5, "g")),
			joinNew("A", 7),
			Sleep(short),
			Do("X", Describe(5, "g")).Kafka(
				`X DescribeGroups v5: g NONE state=PreparingRebalance proto=consumer/"" members=[$A client=A host=/127.0.0.1]`,
				"the first rebalance of an Empty group waits group.initial.rebalance.delay.ms "+
					"(GroupCoordinator.scala prepareRebalance: InitialDelayedJoin); kfake has no initial delay"),
			Await("A"),
			Do("X", Describe(5, "g")),
			Do("A", Sync(5, "$A", 1, Assign("$A", "a1"))),
			Do("X", Describe(5, "g")),
			Do("X", Describe(0, "g", "other")),
			Do("A", Leave(4, "$A")),
			Do("X", Describe(5, "g")),
			Do("X", Describe(4, "")),
		},
	},
	{
		Name: "list_groups_state_filter",
		Steps: []Step{
			stableA(),
			Do("X", Commit(8, "", -1, At("t1", 0, 1), InGroup("c"))),
			joinNew("B", 7, InGroup("p")),
			Await("B"),
			Do("X", List(4)),
			Do("X", List(4, "Stable")),
			Do("X", List(4, "Empty", "CompletingRebalance")),
			Do("X", List(4, "Dead")),
			Do("X", List(3)),
			Do("X", List(0)),
			Do("X", List(5, "Stable")),
		},
	},
	{
		Name: "delete_groups",
		Steps: []Step{
			stableA(),
			Do("X", Commit(8, "", -1, At("t1", 0, 1), InGroup("c"))),
			Do("X", DeleteGroups(2, "g", "c", "nope")),
			Do("X", DeleteGroups(2, "c")),
			Do("X", Fetch(7, InGroup("c"), Of("t1", 0))).Kafka(
				`X OffsetFetch v7: NONE [t1/0=-1 epoch=-1 meta=""]`,
				"OffsetFetch of a group the coordinator does not hold answers no offsets and no error "+
					"(GroupMetadataManager.scala getOffsets: group == null => INVALID_OFFSET, Errors.NONE); "+
					"kfake answers GROUP_ID_NOT_FOUND"),
			Do("A", Commit(8, "$A", 1, At("t1", 0, 5))),
			Do("A", Leave(4, "$A")),
			Do("X", DeleteGroups(0, "g")),
			Do("X", Describe(5, "g")),
			Do("X", List(4)),
			Do("X", Fetch(7, Of("t1", 0))).Kafka(
				`X OffsetFetch v7: NONE [t1/0=-1 epoch=-1 meta=""]`,
				"a deleted group has no offsets and no error (GroupMetadataManager.scala getOffsets); "+
					"kfake answers GROUP_ID_NOT_FOUND"),
			Do("A", Heartbeat(4, "$A", 2)).Kafka(
				"A Heartbeat v4: UNKNOWN_MEMBER_ID",
				"GroupCoordinator.scala handleHeartbeat: an unknown group is UNKNOWN_MEMBER_ID; kfake "+
					"answers GROUP_ID_NOT_FOUND"),
			Do("B", Join(7, "")),
		},
	},
	{
		Name: "offset_fetch",
		Steps: []Step{
			Do("X", Fetch(7, Of("t1", 0))).Kafka(
				`X OffsetFetch v7: NONE [t1/0=-1 epoch=-1 meta=""]`,
				"an unknown group has no offsets and no error (GroupMetadataManager.scala getOffsets); "+
					"kfake answers GROUP_ID_NOT_FOUND"),
			Do("X", Fetch(1, Of("t1", 0))).Kafka(
				`X OffsetFetch v1: [t1/0=-1 meta=""]`,
				"GroupMetadataManager.scala getOffsets answers every requested partition; kfake answers none"),
			Do("X", Commit(8, "", -1, AtMeta("t1", 0, 5, "m0"), AtMeta("t2", 1, 6, "m1"), LeaderEpoch(7))),
			Do("X", Fetch(5, Of("t1", 0, 1), Of("t2", 1))),
			Do("X", Fetch(3, Of("t1", 0))),
			Do("X", FetchAll(7)),
			Do("X", FetchAll(2)),
			Do("X", Fetch(8, Of("t1", 0), Of("t3", 2))),
			Do("X", Commit(5, "", -1, At("t1", 0, 9))),
			Do("X", Fetch(6, Of("t1", 0))),
		},
	},
	{
		// KIP-496: an Empty group's offsets can be deleted; deleting the
		// last ones removes the group.
		Name: "kip496_offset_delete_in_empty_group",
		Steps: []Step{
			Do("O", OffsetDelete(0, Of("t1", 0))),
			Do("X", Commit(8, "", -1, At("t1", 0, 1), At("t1", 1, 2), At("t2", 0, 3))),
			Do("O", OffsetDelete(0, Of("t1", 0), Of("t2", 0, 1))),
			Do("X", FetchAll(7)),
			Do("O", OffsetDelete(0, Of("t1", 1))),
			Do("X", Describe(5, "g")).Kafka(
				`X DescribeGroups v5: g NONE state=Dead proto=""/"" members=[]`,
				"an Empty group left without offsets is removed at once (GroupCoordinator.scala "+
					"handleDeleteOffsets => GroupMetadataManager.scala cleanupGroupMetadata: "+
					"if (group.is(Empty) && !group.hasOffsets) group.transitionTo(Dead)); kfake keeps it"),
			Do("X", List(4)).Kafka(
				"X ListGroups v4: NONE groups=[]",
				"the group was removed (GroupMetadataManager.scala cleanupGroupMetadata)"),
		},
	},
	{
		// A topic or partition the cluster does not have is answered
		// UNKNOWN_TOPIC_OR_PARTITION before the coordinator is asked; a
		// group error still answers alone.
		Name: "offset_delete_unknown_topics_and_partitions",
		Steps: []Step{
			Do("X", Commit(8, "", -1, At("t1", 0, 1), At("t1", 1, 2))),
			Do("O", OffsetDelete(0, Of("t1", 0, 7), Of("nope", 0, 1))).Kafka(
				"O OffsetDelete v0: NONE nope/0=UNKNOWN_TOPIC_OR_PARTITION nope/1=UNKNOWN_TOPIC_OR_PARTITION t1/0=NONE t1/7=UNKNOWN_TOPIC_OR_PARTITION",
				"partitions of unknown topics, and unknown partitions of known ones, are UNKNOWN_TOPIC_OR_PARTITION "+
					"before the coordinator sees the rest (Kafka 4.x KafkaApis.scala handleOffsetDeleteRequest: "+
					"!metadataCache.contains(topic.name), metadataCache.getPartitionInfo(...).isEmpty); kfake answers NONE"),
			Do("X", FetchAll(7)),
			Do("O", OffsetDelete(0, Of("nope", 0), InGroup("nobody"))),
		},
	},
	{
		// KIP-496: a consumer group's offsets can be deleted while it has
		// members, except for topics it subscribes to; the subscription is
		// the one of the current generation.
		Name: "kip496_offset_delete_subscribed_topics",
		Steps: []Step{
			stableA(),
			Do("A", Commit(8, "$A", 1, At("t1", 0, 1), At("t2", 0, 2), At("t3", 0, 3))),
			Do("O", OffsetDelete(0, Of("t1", 0), Of("t2", 0))),
			Do("X", FetchAll(7)),
			joinNew("B", 7, Protocols(P("range", "t3"))),
			Wait("B", short),
			Do("O", OffsetDelete(0, Of("t3", 0))).Kafka(
				"O OffsetDelete v0: NONE t3/0=NONE",
				"the subscribed topics are those of the current generation, computed when it started "+
					"(GroupMetadata.scala initNextGeneration: subscribedTopics = computeSubscribedTopics()); "+
					"kfake also counts the subscription of a member joining the next generation"),
			Do("X", FetchAll(7)).Kafka(
				`X OffsetFetch v7: NONE [t1/0=1 epoch=-1 meta=""]`,
				"t3/0 was deleted by the previous step in Kafka (kfake kept it); "+
					"GroupMetadataManager.scala getOffsets lists what is stored"),
			// A group that is not a consumer group keeps its offsets
			// while it has members.
			Do("C", Join(7, "", InGroup("k"), Type("connect"))),
			Do("C", Join(7, "$C", InGroup("k"), Type("connect"))),
			Do("C", Sync(5, "$C", 1, InGroup("k"), SyncProtocol("connect", "range"), Assign("$C", "c1"))),
			Do("C", Commit(8, "$C", 1, InGroup("k"), At("t1", 0, 4))),
			Do("O", OffsetDelete(0, InGroup("k"), Of("t1", 0))),
		},
	},
}
