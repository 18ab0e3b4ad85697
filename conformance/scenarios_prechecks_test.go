package conformance

// The checks Kafka makes before its group coordinator sees a request: in
// KafkaApis (Kafka 4.x core/src/main/scala/kafka/server/KafkaApis.scala)
// and GroupCoordinatorService.java, and in the request classes. Where a
// scenario of another file covers a check, it is named here:
//
//   - SyncGroup v5+ without a protocol type or name: INCONSISTENT_GROUP_PROTOCOL,
//     before authorization (sync_group_v5_without_protocol_type_or_name);
//   - the empty group id, API by API (empty_group_id_api_by_api,
//     heartbeat_errors, sync_group_errors, kip848_invalid_requests,
//     kip848_consumer_group_describe, and find_coordinator_key_types here);
//   - JoinGroup's session timeout bounds, INVALID_SESSION_TIMEOUT
//     (invalid_session_timeout);
//   - JoinGroup v0's rebalance timeout, its session timeout
//     (every_advertised_version_once);
//   - ConsumerGroupHeartbeat's request validation (kip848_invalid_requests);
//   - OffsetCommit's and OffsetDelete's unknown topics and partitions
//     (offset_commit_unknown_topics_and_partitions,
//     offset_delete_unknown_topics_and_partitions);
//   - FindCoordinator's key types, DeleteGroups' repeated names, and
//     OffsetFetch's groups one by one: here.
//
// Authorization comes first, or second, in an order each API fixes; the
// suite runs without an authorizer, so the api package's acl_test.go
// checks those orders.

// distinctDeletes is the Kafka source of DeleteGroups' answer to a group
// named more than once.
const distinctDeletes = "KafkaApis deletes the distinct names of a DeleteGroups, so a group named twice is deleted " +
	"and answered once (Kafka 4.x KafkaApis.scala handleDeleteGroupsRequest: groupsNames.asScala.distinct); " +
	"kfake answers every name"

var precheckScenarios = []Scenario{
	{
		// FindCoordinator checks a key by its type before it looks a
		// coordinator up (Kafka 4.x KafkaApis.scala getCoordinator). A
		// group key is authorized and answered, the empty id too. A share
		// key is INVALID_REQUEST before v6 (apiVersion < 6), and from v6
		// without a share coordinator, or when it is not a share-partition
		// key ("group:topicId:partition", SharePartitionKey.validate). Any
		// type Kafka does not define fails the whole request:
		// CoordinatorType.forId throws InvalidRequestException,
		// INVALID_REQUEST for every key.
		Name: "find_coordinator_key_types",
		Steps: []Step{
			Do("X", FindCoordinator(3, "")),
			Do("X", FindCoordinator(6, "", "g")),
			Do("X", FindCoordinatorOfType(1, 3, "g")),
			Do("X", FindCoordinatorOfType(4, 3, "g", "h")),
			Do("X", FindCoordinatorOfType(6, -1, "g")),
			Do("X", FindCoordinatorOfType(3, 2, "g")),
			Do("X", FindCoordinatorOfType(5, 2, "g:AAAAAAAAAAAAAAAAAAAAAQ:0")),
			Do("X", FindCoordinatorOfType(6, 2, "g", "h")),
		},
	},
	{
		// A group named twice in one DeleteGroups is deleted once and
		// answered once, and an unknown one refused once.
		Name: "delete_groups_names_each_group_once",
		Steps: []Step{
			Do("X", Commit(8, "", -1, At("t1", 0, 1), InGroup("c"))),
			Do("X", DeleteGroups(2, "c", "c", "nope", "nope")).Kafka(
				"X DeleteGroups v2: c=NONE nope=GROUP_ID_NOT_FOUND", distinctDeletes),
			Do("X", Commit(8, "", -1, At("t1", 0, 2), InGroup("c"))),
			Do("X", DeleteGroups(0, "c", "c")).Kafka("X DeleteGroups v0: c=NONE", distinctDeletes),
			Do("X", List(4)),
		},
	},
	{
		// An OffsetFetch v8+ names several groups (KIP-709), and Kafka
		// takes each on its own (Kafka 4.x KafkaApis.scala
		// handleOffsetFetchRequest): authorized, then to the coordinator
		// for every committed partition when its topics are null
		// (fetchAllOffsets), else for the partitions it names
		// (fetchOffsets). The empty group id is fetched like any other
		// (GroupCoordinatorService.java fetchOffsets, fetchAllOffsets).
		Name: "offset_fetch_many_groups",
		Steps: []Step{
			Do("X", Commit(8, "", -1, At("t1", 0, 5), At("t2", 1, 6))),
			Do("X", Commit(8, "", -1, At("t3", 2, 7), InGroup("c"))),
			Do("X", Commit(8, "", -1, At("t1", 1, 8), InGroup(""))),
			Do("X", FetchBatch(8,
				Fetch(8, Of("t1", 0, 1)),
				FetchAll(8, InGroup("c")),
				FetchAll(8, InGroup("")),
				Fetch(8, InGroup("nope"), Of("t1", 0)),
				FetchAll(8, InGroup("none")),
			)).Kafka(
				`X OffsetFetch v8:  NONE [t1/1=8 epoch=-1 meta=""]; c NONE [t3/2=7 epoch=-1 meta=""]; `+
					`g NONE [t1/0=5 epoch=-1 meta=""] [t1/1=-1 epoch=-1 meta=""]; none NONE; nope NONE [t1/0=-1 epoch=-1 meta=""]`,
				"a group that does not exist has no offsets and no error, whether its partitions are named or not "+
					"(Kafka 4.x OffsetMetadataManager.java fetchOffsets: GroupIdNotFoundException => failAllPartitions; "+
					"fetchAllOffsets: GroupIdNotFoundException => no topics); kfake answers GROUP_ID_NOT_FOUND"),
			Do("X", FetchBatch(9,
				FetchAll(9),
				Fetch(9, InGroup("c"), Of("t3", 2), Of("t1", 0)),
				Fetch(9, InGroup(""), Of("t1", 1)),
			)),
		},
	},
}
