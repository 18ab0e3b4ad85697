package groups

import (
	"errors"
	"strings"
	"testing"
)

func strp(s string) *string { return &s }

// join is a valid v1 first heartbeat.
func join(member string, topics ...string) ConsumerHeartbeatRequest {
	return ConsumerHeartbeatRequest{Version: 1, GroupID: "g", MemberID: member, MemberEpoch: 0,
		RebalanceTimeoutMs: 30000, SubscribedTopicNames: append([]string{}, topics...), Owned: []TopicIDPartitions{}}
}

var serverAssignors = []string{"uniform", "range"}

// TestConsumerHeartbeatValidation: each request Kafka 4.x refuses before
// it looks at the group, with Kafka's error and message, and the requests
// it lets through.
func TestConsumerHeartbeatValidation(t *testing.T) {
	with := func(mutate func(*ConsumerHeartbeatRequest)) ConsumerHeartbeatRequest {
		r := join("m1", "t")
		mutate(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  ConsumerHeartbeatRequest
		want error
		msg  string
	}{
		{"a v1 join without a member id", with(func(r *ConsumerHeartbeatRequest) { r.MemberID = "" }), ErrInvalidRequest, "MemberId can't be empty."},
		{"a blank member id on a heartbeat", with(func(r *ConsumerHeartbeatRequest) { r.Version, r.MemberID, r.MemberEpoch = 0, " ", 3 }), ErrInvalidRequest, "MemberId can't be empty."},
		{"a leave without a member id", with(func(r *ConsumerHeartbeatRequest) { r.Version, r.MemberID, r.MemberEpoch = 0, "", -1 }), ErrInvalidRequest, "MemberId can't be empty."},
		{"a blank group id", with(func(r *ConsumerHeartbeatRequest) { r.GroupID = "  " }), ErrInvalidRequest, "GroupId can't be empty."},
		{"an empty instance id", with(func(r *ConsumerHeartbeatRequest) { r.InstanceID = strp("") }), ErrInvalidRequest, "InstanceId can't be empty."},
		{"an empty rack id", with(func(r *ConsumerHeartbeatRequest) { r.RackID = strp(" ") }), ErrInvalidRequest, "RackId can't be empty."},
		{"a join without a rebalance timeout", with(func(r *ConsumerHeartbeatRequest) { r.RebalanceTimeoutMs = -1 }), ErrInvalidRequest, "RebalanceTimeoutMs must be provided in first request."},
		{"a join that owns partitions", with(func(r *ConsumerHeartbeatRequest) {
			r.Owned = []TopicIDPartitions{{TopicID: topicA, Partitions: []int32{0}}}
		}), ErrInvalidRequest, "TopicPartitions must be empty when (re-)joining."},
		{"a join that does not say what it owns", with(func(r *ConsumerHeartbeatRequest) { r.Owned = nil }), ErrInvalidRequest, "TopicPartitions must be empty when (re-)joining."},
		{"a join without names or a regex", with(func(r *ConsumerHeartbeatRequest) { r.SubscribedTopicNames = nil }), ErrInvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."},
		{"a static leave without an instance id", with(func(r *ConsumerHeartbeatRequest) { r.MemberEpoch = -2 }), ErrInvalidRequest, "InstanceId can't be null."},
		{"an epoch below -2", with(func(r *ConsumerHeartbeatRequest) { r.MemberEpoch = -3 }), ErrInvalidRequest, "MemberEpoch is invalid."},
		{"an assignor the coordinator does not have", with(func(r *ConsumerHeartbeatRequest) { r.ServerAssignor = strp("sticky") }), ErrUnsupportedAssignor, "ServerAssignor sticky is not supported. Supported assignors: uniform, range."},

		{"a v1 join", join("m1", "t"), nil, ""},
		{"a v0 join, whose member id the coordinator makes", with(func(r *ConsumerHeartbeatRequest) { r.Version, r.MemberID = 0, "" }), nil, ""},
		{"a join subscribing to nothing yet", join("m1"), nil, ""},
		{"a join by regex alone", with(func(r *ConsumerHeartbeatRequest) {
			r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, strp("orders-.*")
		}), nil, ""},
		{"a heartbeat that changes nothing", ConsumerHeartbeatRequest{Version: 1, GroupID: "g", MemberID: "m1", MemberEpoch: 5, RebalanceTimeoutMs: -1}, nil, ""},
		{"a static leave", with(func(r *ConsumerHeartbeatRequest) { r.MemberEpoch, r.InstanceID = -2, strp("i-1") }), nil, ""},
		{"a named assignor", with(func(r *ConsumerHeartbeatRequest) { r.ServerAssignor = strp("range") }), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateConsumerHeartbeat(&tc.req, serverAssignors)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.HasSuffix(err.Error(), ": "+tc.msg) {
				t.Fatalf("got %v, want %v with %q", err, tc.want, tc.msg)
			}
		})
	}
}

// TestMemberEpochCheck: a heartbeat at the member's epoch passes; one
// ahead is fenced; one at the previous epoch passes only when the member
// owns nothing beyond what it is assigned now (its answer with the new
// epoch was lost), as Kafka's throwIfMemberEpochIsInvalid.
func TestMemberEpochCheck(t *testing.T) {
	m := reconciled{state: reconcileStable, epoch: 5, previousEpoch: 4, assigned: tps(topicA, []int32{0, 1})}
	for _, tc := range []struct {
		name     string
		received int32
		owned    []TopicIDPartitions
		fenced   bool
	}{
		{"the member's epoch", 5, owns(topicA, 0, 7), false},
		{"an epoch ahead", 6, owns(topicA, 0), true},
		{"the previous epoch, owning part of the assignment", 4, owns(topicA, 1), false},
		{"the previous epoch, owning nothing", 4, []TopicIDPartitions{}, false},
		{"the previous epoch, owning a partition no longer assigned", 4, owns(topicA, 1, 2), true},
		{"the previous epoch, naming a topic it is not assigned, with no partitions", 4, owns(topicB), true},
		{"the previous epoch, not saying what it owns", 4, nil, true},
		{"an older epoch", 3, owns(topicA, 0), true},
	} {
		err := checkMemberEpoch(&m, tc.received, tc.owned)
		if fenced := errors.Is(err, ErrFencedMemberEpoch); fenced != tc.fenced || (!tc.fenced && err != nil) {
			t.Errorf("%s: %v, fenced want %v", tc.name, err, tc.fenced)
		}
	}
}

// owns is a heartbeat's owned partitions of one topic.
func owns(t topicID, parts ...int32) []TopicIDPartitions {
	return []TopicIDPartitions{{TopicID: t, Partitions: parts}}
}
