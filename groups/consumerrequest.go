package groups

import (
	"fmt"
	"slices"
	"strings"
)

// Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
const (
	// joinMemberEpoch (0) joins the group, or rejoins it after a fence.
	joinMemberEpoch int32 = 0
	// leaveMemberEpoch (-1) leaves the group for good.
	leaveMemberEpoch int32 = -1
	// leaveStaticMemberEpoch (-2) is a static member leaving for a while:
	// it keeps its assignment until its session times out or it returns.
	leaveStaticMemberEpoch int32 = -2
)

// consumerGeneratedMemberIDVersion is the ConsumerGroupHeartbeat version
// from which a member generates its own member id and sends it on its
// first heartbeat too (v1, Kafka 4.0).
const consumerGeneratedMemberIDVersion int16 = 1

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat (KIP-848) as the
// coordinator reads it; the api package fills it from the kmsg request.
// A nil slice or pointer is the wire's null (unchanged since the member's
// last heartbeat); an empty, non-nil one is an empty value.
type ConsumerHeartbeatRequest struct {
	// Version is the request's version (v1 members send their own id).
	Version     int16
	GroupID     string
	MemberID    string
	MemberEpoch int32
	InstanceID  *string
	RackID      *string
	// RebalanceTimeoutMs is -1 when unchanged.
	RebalanceTimeoutMs   int32
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	ServerAssignor       *string
	// Owned are the partitions the member owns, by topic id; nil when the
	// member did not say (it sends them when they changed, and on a join).
	Owned      []TopicIDPartitions
	ClientID   string
	ClientHost string
	// Principal is who the member's connection authenticated as
	// ("User:alice"): its regex matches the topics that principal may
	// describe (Config.AuthorizeTopic).
	Principal string
}

// TopicIDPartitions are partitions of one topic, named by its id as the
// consumer protocol names topics.
type TopicIDPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// validateConsumerHeartbeat is Kafka 4.x's
// throwIfConsumerGroupHeartbeatRequestIsInvalid: the checks that need no
// group state, in Kafka's order and with its messages. It returns
// ErrInvalidRequest or ErrUnsupportedAssignor (naming assignors, the ones
// the coordinator has), each wrapping Kafka's message.
func validateConsumerHeartbeat(req *ConsumerHeartbeatRequest, assignors []string) error {
	invalid := func(msg string) error { return fmt.Errorf("%w: %s", ErrInvalidRequest, msg) }
	if (req.Version >= consumerGeneratedMemberIDVersion || req.MemberEpoch > 0 || req.MemberEpoch == leaveMemberEpoch) &&
		strings.TrimSpace(req.MemberID) == "" {
		return invalid("MemberId can't be empty.")
	}
	if strings.TrimSpace(req.GroupID) == "" {
		return invalid("GroupId can't be empty.")
	}
	if req.InstanceID != nil && strings.TrimSpace(*req.InstanceID) == "" {
		return invalid("InstanceId can't be empty.")
	}
	if req.RackID != nil && strings.TrimSpace(*req.RackID) == "" {
		return invalid("RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == joinMemberEpoch:
		if req.RebalanceTimeoutMs == -1 {
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Owned == nil || len(req.Owned) != 0 {
			return invalid("TopicPartitions must be empty when (re-)joining.")
		}
		// An empty list of names or an empty regex is a member that
		// subscribes to nothing yet, but is part of the group.
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case req.MemberEpoch == leaveStaticMemberEpoch:
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	case req.MemberEpoch < leaveStaticMemberEpoch:
		return invalid("MemberEpoch is invalid.")
	}
	if req.ServerAssignor != nil && !slices.Contains(assignors, *req.ServerAssignor) {
		return fmt.Errorf("%w: ServerAssignor %s is not supported. Supported assignors: %s.",
			ErrUnsupportedAssignor, *req.ServerAssignor, strings.Join(assignors, ", "))
	}
	return nil
}

// checkMemberEpoch is Kafka's throwIfMemberEpochIsInvalid, for a heartbeat
// of a known member at received (> 0): an epoch ahead of the member's is
// fenced (it came from another coordinator's state); one behind is
// accepted only if it is the member's previous epoch and the member owns
// nothing outside what it is assigned now, which is a member whose answer
// with the new epoch was lost. Anything else is ErrFencedMemberEpoch: the
// member gives up its partitions and rejoins.
func checkMemberEpoch(m *reconciled, received int32, owned []TopicIDPartitions) error {
	switch {
	case received > m.epoch:
		return fmt.Errorf("%w: the member epoch %d is ahead of the coordinator's %d; the member must abandon all its partitions and rejoin",
			ErrFencedMemberEpoch, received, m.epoch)
	case received < m.epoch && (received != m.previousEpoch || !ownsOnlyAssigned(owned, m.assigned)):
		return fmt.Errorf("%w: the member epoch %d is behind the coordinator's %d; the member must abandon all its partitions and rejoin",
			ErrFencedMemberEpoch, received, m.epoch)
	}
	return nil
}

// ownsOnlyAssigned reports whether every topic and partition in owned is
// in assigned, as the heartbeat lists them: a topic the member is not
// assigned disqualifies it even with no partitions listed (Kafka's
// isSubset), and a heartbeat that did not say what it owns (nil) does not
// qualify, as in Kafka.
func ownsOnlyAssigned(owned []TopicIDPartitions, assigned topicPartitions) bool {
	if owned == nil {
		return false
	}
	for _, o := range owned {
		if _, ok := assigned[o.TopicID]; !ok {
			return false
		}
		for _, p := range o.Partitions {
			if !assigned.contains(o.TopicID, p) {
				return false
			}
		}
	}
	return true
}
