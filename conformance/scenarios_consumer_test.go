package conformance

// The consumer group protocol (KIP-848): ConsumerGroupHeartbeat and
// ConsumerGroupDescribe, and what the classic APIs (OffsetCommit,
// OffsetFetch, DescribeGroups, ListGroups) answer about a consumer group.
// Members of v1 name themselves ("m1"); the default assignor is uniform,
// the first of Kafka's group.consumer.assignors.

// Kafka 4.x sources the consumer group overrides cite.
const (
	gmm = "GroupMetadataManager.java"
)

// assignorDefault is the Kafka source of a ConsumerGroupDescribe's
// assignor name.
const assignorDefault = "a group is described with the assignor most of its members name, else the default, the first " +
	"of group.consumer.assignors, uniform (Kafka 4.x ConsumerGroup.java asDescribedGroup: " +
	"preferredServerAssignor(...).orElse(defaultAssignor), " + gmm + " consumerGroupDescribe); " +
	"kfake reports the assignor the last member to join named, \"\" for none"

// leaveInterval is the Kafka source of the answer to a leave (epoch -1 or
// -2).
const leaveInterval = "the answer to a leave carries the member id and epoch alone, heartbeat interval 0 (Kafka 4.x " +
	gmm + " consumerGroupLeave, consumerGroupStaticMemberGroupLeave); kfake fills in its interval"

// listedConsumer is the Kafka source of a consumer group's ListGroups
// entry.
const listedConsumer = "a consumer group is listed with protocol type consumer (Kafka 4.x ModernGroup.java " +
	"asListedGroup: protocolType(); ConsumerGroup.java protocolType() is ConsumerProtocol.PROTOCOL_TYPE); kfake lists \"\""

// invalidHeartbeat is the Kafka source of INVALID_REQUEST answers, checked
// before the group is looked up.
func invalidHeartbeat(rule string) string {
	return "Kafka checks a ConsumerGroupHeartbeat before it looks the group up (Kafka 4.x " + gmm +
		" throwIfConsumerGroupHeartbeatRequestIsInvalid: " + rule + "); kfake does not"
}

// unsupportedAssignor is the Kafka source of UNSUPPORTED_ASSIGNOR for a
// heartbeat that is not a join or a full request.
const unsupportedAssignor = "every heartbeat's server assignor is checked, not only a join's or a full request's " +
	"(Kafka 4.x " + gmm + " throwIfConsumerGroupHeartbeatRequestIsInvalid: consumerGroupAssignors.containsKey); " +
	"kfake reads the assignor of full requests only"

// subscriptionRead is the Kafka source of a heartbeat's subscription
// change outside a full request.
const subscriptionRead = "Kafka updates the subscribed topic names of any heartbeat that sends them (Kafka 4.x " + gmm +
	" consumerGroupHeartbeat: maybeUpdateSubscribedTopicNames(Optional.ofNullable(subscribedTopicNames)), " +
	"hasMemberSubscriptionChanged bumps the group epoch); kfake reads them only from a full request"

var consumerScenarios = []Scenario{
	{
		// A member joins alone: the group's first epoch, every partition
		// of t1 at once; a keep-alive heartbeat carries no assignment, one
		// that says what the member owns does not either (it is not a
		// full request: no rebalance timeout, no subscription).
		Name: "kip848_one_member_joins",
		Steps: []Step{
			Do("A", CJoin(1, "m1")),
			Do("A", CBeat(1, "m1", 1)),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 0, 1, 2))),
			Do("A", CBeat(1, "m1", 1, RebalanceTimeout(DefaultConsumerRebalanceMs), Subscribe("t1"), Owns("t1", 0, 1, 2))),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Stable epoch=1 assignment-epoch=1 assignor=uniform members=["m1" epoch=1 type=consumer client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1,2] target=[t1:0,1,2]]`,
				assignorDefault),
			Do("X", CDescribe(0, "g")).Kafka(
				`X ConsumerGroupDescribe v0: g NONE state=Stable epoch=1 assignment-epoch=1 assignor=uniform members=["m1" epoch=1 client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1,2] target=[t1:0,1,2]]`,
				assignorDefault),
		},
	},
	{
		// A second member joins: the group's epoch 2 gives it one of m1's
		// partitions, which it gets only once m1 has revoked it. m1 stays
		// at epoch 1 until it says it no longer owns the partition; m2 is
		// at epoch 2 with nothing until then. A heartbeat at the previous
		// epoch is accepted only from a member that owns nothing beyond
		// its assignment (its answer with the new epoch was lost).
		Name: "kip848_second_member_revocation",
		Steps: []Step{
			Do("A", CJoin(1, "m1")),
			Do("B", CJoin(1, "m2")),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Reconciling epoch=2 assignment-epoch=2 assignor=uniform members=["m1" epoch=1 type=consumer client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1,2] target=[t1:0,1]; "m2" epoch=2 type=consumer client=B host=/127.0.0.1 topics=[t1] assigned=[] target=[t1:2]]`,
				assignorDefault),
			Do("B", CBeat(1, "m2", 2, OwnsNothing())),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 0, 1, 2))),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Reconciling epoch=2 assignment-epoch=2 assignor=uniform members=["m1" epoch=1 type=consumer client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1] target=[t1:0,1]; "m2" epoch=2 type=consumer client=B host=/127.0.0.1 topics=[t1] assigned=[] target=[t1:2]]`,
				assignorDefault),
			Do("B", CBeat(1, "m2", 2, OwnsNothing())),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 0, 1))),
			Do("B", CBeat(1, "m2", 2, OwnsNothing())),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Stable epoch=2 assignment-epoch=2 assignor=uniform members=["m1" epoch=2 type=consumer client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1] target=[t1:0,1]; "m2" epoch=2 type=consumer client=B host=/127.0.0.1 topics=[t1] assigned=[t1:2] target=[t1:2]]`,
				assignorDefault),
			Do("A", CBeat(1, "m1", 1)),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 0, 1, 2))),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 1))),
			Do("A", CBeat(1, "m1", 2, Owns("t1", 0, 1))),
		},
	},
	{
		// The previous epoch is accepted from a member that says what it
		// owns and owns nothing it is not assigned now (Kafka's isSubset:
		// a topic it is not assigned is not a subset, even without
		// partitions).
		Name: "kip848_previous_epoch_heartbeat",
		Steps: []Step{
			Do("A", CJoin(1, "m1")),
			Do("A", CBeat(1, "m1", 1, RebalanceTimeout(DefaultConsumerRebalanceMs), Subscribe("t1", "t2"), Owns("t1", 0, 1, 2))),
			Do("A", CBeat(1, "m1", 1)),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 0), Owns("t3", 0))),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 0), Owns("t3"))),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 0), Owns("t2"))),
			Do("A", CBeat(1, "m1", 2)),
		},
	},
	{
		// A member changes its subscription: a new group epoch and
		// target. Kafka reads the subscribed topic names of any
		// heartbeat that sends them, not only of a full request; a member
		// that does not say what it owns still owns what it must revoke.
		Name: "kip848_subscription_change",
		Steps: []Step{
			Do("A", CJoin(1, "m1")),
			Do("A", CBeat(1, "m1", 1, RebalanceTimeout(DefaultConsumerRebalanceMs), Subscribe("t1", "t2"), Owns("t1", 0, 1, 2))),
			Do("A", CBeat(1, "m1", 2, Subscribe("t2"))).Kafka(
				`A ConsumerGroupHeartbeat v1: NONE member="m1" epoch=2 interval=5000 assignment=[t2:0,1,2]`,
				subscriptionRead+": the group moves to epoch 3, whose target revokes t1; a member that does "+
					"not say what it owns must revoke first (CurrentAssignmentBuilder.java ownsRevokedPartitions: "+
					"ownedTopicPartitions == null), so it stays at epoch 2 with t2 alone assigned"),
			Do("A", CBeat(1, "m1", 2, Owns("t1", 0, 1, 2), Owns("t2", 0, 1, 2))),
			Do("A", CBeat(1, "m1", 2, Owns("t2", 0, 1, 2))).Kafka(
				`A ConsumerGroupHeartbeat v1: NONE member="m1" epoch=3 interval=5000`,
				"the member no longer owns t1, so it reaches the target's epoch 3, its assignment unchanged "+
					"(CurrentAssignmentBuilder.java computeNextAssignment; "+gmm+" consumerGroupHeartbeat: "+
					"hasAssignedPartitionsChanged)"),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Stable epoch=3 assignment-epoch=3 assignor=uniform members=["m1" epoch=3 type=consumer client=A host=/127.0.0.1 topics=[t2] assigned=[t2:0,1,2] target=[t2:0,1,2]]`,
				subscriptionRead+"; and "+assignorDefault),
		},
	},
	{
		Name: "kip848_heartbeat_errors",
		Steps: []Step{
			Do("A", CJoin(1, "m1")),
			Do("A", CBeat(1, "nope", 1)),
			Do("A", CBeat(1, "m1", 2)),
			Do("A", CBeat(1, "m1", 1)),
			Do("A", CBeat(1, "nope", -1)),
			Do("A", CBeat(1, "m1", 1, Assignor("nope"))).Kafka(
				"A ConsumerGroupHeartbeat v1: UNSUPPORTED_ASSIGNOR", unsupportedAssignor),
			Do("A", CBeat(1, "m1", 1, InGroup("ghost"))).Kafka(
				"A ConsumerGroupHeartbeat v1: GROUP_ID_NOT_FOUND",
				"a heartbeat at an epoch other than 0 does not create the group: GROUP_ID_NOT_FOUND "+
					"(Kafka 4.x "+gmm+" getOrMaybeCreateConsumerGroup: \"Consumer group ghost not found.\"); "+
					"kfake creates it and answers UNKNOWN_MEMBER_ID"),
			Do("A", CBeat(1, "m1", -1, InGroup("ghost2"))).Kafka(
				"A ConsumerGroupHeartbeat v1: GROUP_ID_NOT_FOUND",
				"a leave from a group that does not exist is GROUP_ID_NOT_FOUND (Kafka 4.x "+gmm+
					" consumerGroupLeave: consumerGroup(groupId)); kfake creates the group and answers UNKNOWN_MEMBER_ID"),
		},
	},
	{
		// A member leaves (-1): the group epoch moves on at once, the
		// target only at the next heartbeat (the group is Assigning until
		// then), which gives the rest of the group its partitions.
		Name: "kip848_leave",
		Steps: []Step{
			Do("A", CJoin(1, "m1")),
			Do("B", CJoin(1, "m2")),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 0, 1, 2))),
			Do("A", CBeat(1, "m1", 1, Owns("t1", 0, 1))),
			Do("B", CBeat(1, "m2", 2, OwnsNothing())),
			Do("B", CBeat(1, "m2", -1)).Kafka(
				`B ConsumerGroupHeartbeat v1: NONE member="m2" epoch=-1 interval=0`, leaveInterval),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Assigning epoch=3 assignment-epoch=2 assignor=uniform members=["m1" epoch=2 type=consumer client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1] target=[t1:0,1]]`,
				"a leave bumps the group epoch and leaves the target to the next heartbeat, so the group "+
					"is Assigning (Kafka 4.x "+gmm+" consumerGroupFenceMembers; ConsumerGroup.java "+
					"maybeUpdateGroupState: groupEpoch > targetAssignmentEpoch => ASSIGNING); kfake "+
					"computes the target at the leave"),
			Do("A", CBeat(1, "m1", 2)),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Stable epoch=3 assignment-epoch=3 assignor=uniform members=["m1" epoch=3 type=consumer client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1,2] target=[t1:0,1,2]]`,
				assignorDefault),
			Do("B", CBeat(1, "m2", 2)),
			Do("A", CBeat(1, "m1", -1)).Kafka(
				`A ConsumerGroupHeartbeat v1: NONE member="m1" epoch=-1 interval=0`, leaveInterval),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Empty epoch=4 assignment-epoch=3 assignor=uniform members=[]`,
				assignorDefault),
		},
	},
	{
		// A static member leaves for a while (-2): it keeps its
		// partitions, held for it at epoch -2 (the group is Reconciling),
		// and its instance id stays taken; it returns with a new member
		// id and gets them back at the group's epoch, without a
		// rebalance.
		Name: "kip848_static_member_leaves_and_returns",
		Steps: []Step{
			Do("A", CJoin(1, "a1", Inst("ia"))),
			Do("B", CJoin(1, "b1")),
			Do("A", CBeat(1, "a1", 1, Inst("ia"), Owns("t1", 0, 1, 2))),
			Do("A", CBeat(1, "a1", 1, Inst("ia"), Owns("t1", 0, 1))),
			Do("B", CBeat(1, "b1", 2, OwnsNothing())),
			Do("A2", CJoin(1, "a2", Inst("ia"))),
			Do("A", CBeat(1, "a1", -2, Inst("ia"))).Kafka(
				`A ConsumerGroupHeartbeat v1: NONE member="a1" epoch=-2 interval=0`, leaveInterval),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Reconciling epoch=2 assignment-epoch=2 assignor=uniform members=["a1"(ia) epoch=-2 type=consumer client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1] target=[t1:0,1]; "b1" epoch=2 type=consumer client=B host=/127.0.0.1 topics=[t1] assigned=[t1:2] target=[t1:2]]`,
				"a member at epoch -2 is not reconciled to the target epoch, so the group is Reconciling "+
					"(Kafka 4.x ConsumerGroup.java maybeUpdateGroupState, ModernGroupMember.java isReconciledTo); "+
					"kfake leaves members at -2 out and answers Stable; and "+assignorDefault),
			Do("B", CBeat(1, "b1", 2)),
			Do("A2", CJoin(1, "a2", Inst("ia"))),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Stable epoch=2 assignment-epoch=2 assignor=uniform members=["a2"(ia) epoch=2 type=consumer client=A2 host=/127.0.0.1 topics=[t1] assigned=[t1:0,1] target=[t1:0,1]; "b1" epoch=2 type=consumer client=B host=/127.0.0.1 topics=[t1] assigned=[t1:2] target=[t1:2]]`,
				assignorDefault),
			Do("A", CBeat(1, "a1", 2)),
			Do("A2", CBeat(1, "a2", 2, Inst("ia"))),
			Do("A2", CBeat(1, "a2", -1, Inst("ia"))).Kafka(
				`A2 ConsumerGroupHeartbeat v1: NONE member="a2" epoch=-1 interval=0`, leaveInterval),
			Do("A3", CJoin(1, "a3", Inst("ia"), Subscribe("t2"))),
		},
	},
	{
		// A replaced static member's old incarnation that heartbeats with
		// its instance id is fenced: Kafka looks a static member up by
		// its instance id, which now names another member id.
		Name: "kip848_replaced_static_member_heartbeats",
		Steps: []Step{
			Do("A", CJoin(1, "a1", Inst("ia"))),
			Do("A", CBeat(1, "a1", -2, Inst("ia"))).Kafka(
				`A ConsumerGroupHeartbeat v1: NONE member="a1" epoch=-2 interval=0`, leaveInterval),
			Do("A2", CJoin(1, "a2", Inst("ia"))),
			Do("A", CBeat(1, "a1", 1, Inst("ia"))),
			Do("A", CBeat(1, "a1", -1, Inst("ia"))).Kafka(
				"A ConsumerGroupHeartbeat v1: FENCED_INSTANCE_ID",
				"a static member's leave is checked against its instance id's member (Kafka 4.x "+gmm+
					" consumerGroupLeave: throwIfInstanceIdIsFenced); kfake looks the member id up and answers UNKNOWN_MEMBER_ID"),
			Do("A", CBeat(1, "a1", 1, Inst("ib"))),
			Do("A2", CBeat(1, "a2", 1, Inst("ia"))),
		},
	},
	{
		// Requests Kafka refuses before looking the group up, with the
		// message naming the rule; none creates the group.
		Name: "kip848_invalid_requests",
		Steps: []Step{
			Do("A", CJoin(1, "m1", Owns("t1", 0))),
			Do("A", CJoin(1, "m1", OwnedNull())),
			Do("A", CJoin(1, "m1", Assignor("nope"))),
			Do("A", CJoin(1, "m1", InGroup(""))).Kafka(
				`A ConsumerGroupHeartbeat v1: INVALID_REQUEST msg="GroupId can't be empty."`,
				"Kafka checks the group id of a ConsumerGroupHeartbeat as a request field (Kafka 4.x "+gmm+
					" throwIfConsumerGroupHeartbeatRequestIsInvalid: throwIfEmptyString(groupId)); kfake answers INVALID_GROUP_ID"),
			Do("A", CJoin(1, "")).Kafka(
				`A ConsumerGroupHeartbeat v1: INVALID_REQUEST msg="MemberId can't be empty."`,
				invalidHeartbeat("from v1 the member id is the client's, never empty (KIP-1082)")),
			Do("A", CBeat(0, "", 1)).Kafka(
				`A ConsumerGroupHeartbeat v0: INVALID_REQUEST msg="MemberId can't be empty."`,
				invalidHeartbeat("at v0 only a join may leave the member id empty")),
			Do("A", CBeat(1, "m1", -2)).Kafka(
				`A ConsumerGroupHeartbeat v1: INVALID_REQUEST msg="InstanceId can't be null."`,
				invalidHeartbeat("epoch -2 is a static member's")),
			Do("A", CBeat(1, "m1", -3)).Kafka(
				`A ConsumerGroupHeartbeat v1: INVALID_REQUEST msg="MemberEpoch is invalid."`,
				invalidHeartbeat("no epoch below -2")),
			Do("A", CJoin(1, "m1", Inst(""))).Kafka(
				`A ConsumerGroupHeartbeat v1: INVALID_REQUEST msg="InstanceId can't be empty."`,
				invalidHeartbeat("an instance id is null or not empty")),
			Do("A", CJoin(1, "m1", Rack(" "))).Kafka(
				`A ConsumerGroupHeartbeat v1: INVALID_REQUEST msg="RackId can't be empty."`,
				invalidHeartbeat("a rack id is null or not blank")),
			Do("A", CJoin(1, "m1", NoSubscription())).Kafka(
				`A ConsumerGroupHeartbeat v1: INVALID_REQUEST msg="Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."`,
				invalidHeartbeat("a join subscribes")),
			Do("A", CJoin(1, "m1", RebalanceTimeout(-1))).Kafka(
				`A ConsumerGroupHeartbeat v1: INVALID_REQUEST msg="RebalanceTimeoutMs must be provided in first request."`,
				invalidHeartbeat("a join names its rebalance timeout")),
			Do("X", CDescribe(1, "g")).Kafka(
				"X ConsumerGroupDescribe v1: g GROUP_ID_NOT_FOUND",
				"no request above created the group (Kafka 4.x "+gmm+" consumerGroupDescribe); kfake "+
					"created it with the requests it accepted"),
		},
	},
	{
		// The server-side assignor is the one most members name: m1's
		// range, which m2 (naming none) is assigned by too.
		Name: "kip848_server_assignor",
		Steps: []Step{
			Do("A", CJoin(1, "m1", Assignor("range"))),
			Do("X", CDescribe(1, "g")),
			Do("B", CJoin(1, "m2", Subscribe("t2"))),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Reconciling epoch=2 assignment-epoch=2 assignor=range members=["m1" epoch=1 type=consumer client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1,2] target=[t1:0,1,2]; "m2" epoch=2 type=consumer client=B host=/127.0.0.1 topics=[t2] assigned=[t2:0,1,2] target=[t2:0,1,2]]`,
				assignorDefault),
			Do("A", CBeat(1, "m1", 1)),
			Do("B", CBeat(1, "m2", 2, Assignor("nope"))).Kafka(
				"B ConsumerGroupHeartbeat v1: UNSUPPORTED_ASSIGNOR", unsupportedAssignor),
		},
	},
	{
		// ConsumerGroupDescribe of a consumer group, an unknown group, a
		// classic group and the empty id; DescribeGroups (the classic
		// API) of a consumer group.
		Name: "kip848_consumer_group_describe",
		Steps: []Step{
			joinNew("C", 7, InGroup("c")),
			Await("C"),
			Do("C", Sync(5, "$C", 1, InGroup("c"), Assign("$C", "c1"))),
			Do("A", CJoin(1, "m1", Subscribe("t1", "t2"))),
			Do("X", CDescribe(1, "g", "nope", "c")).Kafka(
				`X ConsumerGroupDescribe v1: c GROUP_ID_NOT_FOUND | g NONE state=Stable epoch=1 assignment-epoch=1 assignor=uniform members=["m1" epoch=1 type=consumer client=A host=/127.0.0.1 topics=[t1,t2] assigned=[t1:0,1,2 t2:0,1,2] target=[t1:0,1,2 t2:0,1,2]] | nope GROUP_ID_NOT_FOUND`,
				assignorDefault),
			Do("X", CDescribe(0, "g", "")).Kafka(
				`X ConsumerGroupDescribe v0: "" INVALID_GROUP_ID | g NONE state=Stable epoch=1 assignment-epoch=1 assignor=uniform members=["m1" epoch=1 client=A host=/127.0.0.1 topics=[t1,t2] assigned=[t1:0,1,2 t2:0,1,2] target=[t1:0,1,2 t2:0,1,2]]`,
				"the empty group id is INVALID_GROUP_ID (Kafka 4.x GroupCoordinatorService.java "+
					"consumerGroupDescribe: !isGroupIdNotEmpty), kfake answers GROUP_ID_NOT_FOUND; and "+assignorDefault),
			Do("X", Describe(5, "g")).Kafka(
				`X DescribeGroups v5: g NONE state=Dead proto=""/"" members=[]`,
				"DescribeGroups describes classic groups only: any other is Dead, without an error before "+
					"v6 (Kafka 4.x "+gmm+" describeGroups: classicGroup() throws GroupIdNotFoundException); "+
					"kfake describes the consumer group"),
			Do("X", Describe(6, "g")).Kafka(
				`X DescribeGroups v6: g GROUP_ID_NOT_FOUND state=Dead proto=""/"" members=[]`,
				"from DescribeGroups v6 a group that is not a classic group is GROUP_ID_NOT_FOUND, Dead "+
					"(Kafka 4.x "+gmm+" describeGroups, KIP-1043); kfake describes the consumer group"),
		},
	},
	{
		// At v0 a member may join without an id: the server names it
		// (its symbol is the joining member's, "$A").
		Name: "kip848_v0_member_named_by_the_server",
		Steps: []Step{
			Do("A", CJoin(0, "")),
			Do("A", CBeat(0, "$A", 1)),
			Do("X", CDescribe(1, "g")).Kafka(
				`X ConsumerGroupDescribe v1: g NONE state=Stable epoch=1 assignment-epoch=1 assignor=uniform members=[$A epoch=1 type=consumer client=A host=/127.0.0.1 topics=[t1] assigned=[t1:0,1,2] target=[t1:0,1,2]]`,
				assignorDefault),
			Do("B", CJoin(0, "")),
			Do("A", CBeat(0, "$A", 1, Owns("t1", 0, 1, 2))),
			Do("A", CBeat(0, "$A", -1)).Kafka(
				`A ConsumerGroupHeartbeat v0: NONE member=$A epoch=-1 interval=0`, leaveInterval),
			Do("B", CBeat(0, "$B", 2)),
		},
	},
	{
		// OffsetCommit and OffsetFetch v9 from a member name its epoch:
		// any other is STALE_MEMBER_EPOCH; before v9 a consumer-protocol
		// member cannot commit; a commit outside group management only
		// goes to a group without members.
		Name: "kip848_offset_commit_and_fetch_with_member_epoch",
		Steps: []Step{
			Do("A", CJoin(1, "m1")),
			Do("A", Commit(9, "m1", 1, At("t1", 0, 10))),
			Do("A", Commit(9, "m1", 0, At("t1", 0, 11))),
			Do("A", Commit(9, "m1", 2, At("t1", 0, 12))),
			Do("A", Commit(8, "m1", 1, At("t1", 0, 13))),
			Do("A", Commit(9, "nope", 1, At("t1", 0, 14))),
			Do("A", Commit(9, "", -1, At("t1", 0, 15))),
			Do("A", FetchAs(9, "m1", 1, Of("t1", 0))),
			Do("A", FetchAs(9, "m1", 3, Of("t1", 0))),
			Do("A", FetchAs(9, "nope", 1, Of("t1", 0))),
			Do("X", Fetch(9, Of("t1", 0))),
			Do("A", CBeat(1, "m1", -1)).Kafka(
				`A ConsumerGroupHeartbeat v1: NONE member="m1" epoch=-1 interval=0`, leaveInterval),
			Do("A", Commit(9, "m1", 1, At("t1", 0, 16))),
			Do("X", Commit(9, "", -1, At("t1", 0, 17))),
			Do("X", Fetch(9, Of("t1", 0))),
		},
	},
	{
		// ListGroups v5 types a consumer group "consumer"; its states
		// filter is case-insensitive and knows the consumer group states.
		Name: "kip848_list_groups_type",
		Steps: []Step{
			stableA(InGroup("c")),
			Do("A", CJoin(1, "m1")),
			Do("X", List(5)).Kafka(
				"X ListGroups v5: NONE groups=[c(consumer,Stable,classic) g(consumer,Stable,consumer)]", listedConsumer),
			Do("X", List(5, "Stable")).Kafka(
				"X ListGroups v5: NONE groups=[c(consumer,Stable,classic) g(consumer,Stable,consumer)]", listedConsumer),
			Do("X", List(5, "Reconciling", "Assigning")),
			Do("X", ListTypes(5, "consumer")).Kafka(
				"X ListGroups v5: NONE groups=[g(consumer,Stable,consumer)]", listedConsumer),
			Do("X", ListTypes(5, "classic")),
			Do("X", List(4)).Kafka(
				"X ListGroups v4: NONE groups=[c(consumer,Stable) g(consumer,Stable)]", listedConsumer),
			Do("B", CJoin(1, "m2")),
			Do("X", List(5, "reconciling")).Kafka(
				"X ListGroups v5: NONE groups=[g(consumer,Reconciling,consumer)]", listedConsumer),
		},
	},
}
