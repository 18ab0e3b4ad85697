package groups

import "errors"

// Sentinel errors of the group coordinator. The api package translates each to
// its Kafka error code at the wire edge; nothing here knows the codes.
var (
	// ErrNotCoordinator means this node does not lead the group's shard (or
	// lost leadership while the request waited). Kafka: NOT_COORDINATOR.
	ErrNotCoordinator = errors.New("not the coordinator of this group")
	// ErrLoadInProgress means this node just became the shard leader and is
	// still catching its state up. Kafka: COORDINATOR_LOAD_IN_PROGRESS.
	ErrLoadInProgress = errors.New("coordinator is loading the shard")
	// ErrCoordinatorNotAvailable means the group is being deleted (Dead) or
	// a write failed in a way the client should retry elsewhere. Kafka:
	// COORDINATOR_NOT_AVAILABLE.
	ErrCoordinatorNotAvailable = errors.New("coordinator not available")
	// ErrInvalidGroupID means the group id is empty. Kafka: INVALID_GROUP_ID.
	ErrInvalidGroupID = errors.New("invalid group id")
	// ErrUnknownMemberID means the member is not in the group. Kafka:
	// UNKNOWN_MEMBER_ID.
	ErrUnknownMemberID = errors.New("unknown member id")
	// ErrMemberIDRequired asks a new member to rejoin with the member id the
	// response carries (KIP-394). Kafka: MEMBER_ID_REQUIRED.
	ErrMemberIDRequired = errors.New("member id required")
	// ErrIllegalGeneration means the request's generation is not the group's.
	// Kafka: ILLEGAL_GENERATION.
	ErrIllegalGeneration = errors.New("illegal generation")
	// ErrRebalanceInProgress means the group is rebalancing and the member
	// must rejoin. Kafka: REBALANCE_IN_PROGRESS.
	ErrRebalanceInProgress = errors.New("rebalance in progress")
	// ErrInconsistentGroupProtocol means the member's protocol type or
	// protocols do not match the group's. Kafka: INCONSISTENT_GROUP_PROTOCOL.
	ErrInconsistentGroupProtocol = errors.New("inconsistent group protocol")
	// ErrInvalidSessionTimeout means the session timeout is outside
	// group.min/max.session.timeout.ms. Kafka: INVALID_SESSION_TIMEOUT.
	ErrInvalidSessionTimeout = errors.New("invalid session timeout")
	// ErrGroupMaxSizeReached means the group already has group.max.size
	// members. Kafka: GROUP_MAX_SIZE_REACHED.
	ErrGroupMaxSizeReached = errors.New("group max size reached")
	// ErrFencedInstanceID means another member now holds the static
	// instance id. Kafka: FENCED_INSTANCE_ID.
	ErrFencedInstanceID = errors.New("fenced instance id")
	// ErrNonEmptyGroup means a group with members cannot be deleted. Kafka:
	// NON_EMPTY_GROUP.
	ErrNonEmptyGroup = errors.New("group is not empty")
	// ErrGroupIDNotFound means the group does not exist. Kafka:
	// GROUP_ID_NOT_FOUND.
	ErrGroupIDNotFound = errors.New("group id not found")
	// ErrGroupSubscribedToTopic means OffsetDelete named a topic the
	// group's members consume. Kafka: GROUP_SUBSCRIBED_TO_TOPIC.
	ErrGroupSubscribedToTopic = errors.New("group is subscribed to the topic")
	// ErrInvalidRequest means a request is malformed in a way Kafka
	// refuses before looking at any group (a consumer heartbeat without a
	// member id, a join without a rebalance timeout, ...); it wraps Kafka's
	// message. Kafka: INVALID_REQUEST.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnsupportedAssignor means a consumer-protocol member named a
	// server assignor the coordinator does not have. Kafka:
	// UNSUPPORTED_ASSIGNOR.
	ErrUnsupportedAssignor = errors.New("unsupported assignor")
	// ErrFencedMemberEpoch means a consumer-protocol member's epoch is not
	// one the coordinator accepts from it: it must give up its partitions
	// and rejoin at epoch 0. Kafka: FENCED_MEMBER_EPOCH.
	ErrFencedMemberEpoch = errors.New("fenced member epoch")
	// ErrStaleMemberEpoch means an offset commit or fetch of a
	// consumer-protocol member carries an epoch older than the member's.
	// Kafka: STALE_MEMBER_EPOCH.
	ErrStaleMemberEpoch = errors.New("stale member epoch")
	// ErrUnreleasedInstanceID means a static member joined with an
	// instance id that a live member still holds. Kafka:
	// UNRELEASED_INSTANCE_ID.
	ErrUnreleasedInstanceID = errors.New("unreleased instance id")
	// ErrInvalidRegularExpression means a SubscribedTopicRegex does not
	// compile. Kafka: INVALID_REGULAR_EXPRESSION.
	ErrInvalidRegularExpression = errors.New("invalid regular expression")
	// ErrUnsupportedVersion means a request's version cannot serve this
	// group (an OffsetCommit below v9 from a consumer-protocol member).
	// Kafka: UNSUPPORTED_VERSION.
	ErrUnsupportedVersion = errors.New("unsupported version")
	// ErrAssignmentFailed means the server-side assignor could not compute
	// a target; the group keeps the target it has. Kafka:
	// UNKNOWN_SERVER_ERROR.
	ErrAssignmentFailed = errors.New("target assignment failed")
	// ErrOffsetMetadataTooLarge means a commit's metadata string is longer
	// than offset.metadata.max.bytes. Kafka: OFFSET_METADATA_TOO_LARGE.
	ErrOffsetMetadataTooLarge = errors.New("offset metadata too large")
	// ErrInvalidPartition means a commit names a negative partition. Kafka
	// answers UNKNOWN_TOPIC_OR_PARTITION.
	ErrInvalidPartition = errors.New("invalid partition")
	// ErrInvalidTopic means a commit names an empty topic. Kafka answers
	// UNKNOWN_TOPIC_OR_PARTITION.
	ErrInvalidTopic = errors.New("invalid topic")
	// ErrTimeout means a Raft write did not commit within
	// offsets.commit.timeout.ms. Kafka: REQUEST_TIMED_OUT.
	ErrTimeout = errors.New("write timed out")
)
