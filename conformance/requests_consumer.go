package conformance

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request builders for the consumer group protocol (KIP-848):
// ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69).
//
// From ConsumerGroupHeartbeat v1 a member makes its own member id (KIP-1082),
// so scripts name v1 members with literal ids ("m1"); a v0 join may leave
// the id to the server, and the id it answers becomes the joining member's
// symbol ("$A", see normalize.go). The consumer protocol names topics by
// id, which differs between servers: scripts name them by name (Owns), the
// request carries a placeholder id (topicRef), and the runner replaces it
// with the server's id for that topic before sending; answers are printed
// with the topics' names.

// DefaultConsumerRebalanceMs is the rebalance timeout a CJoin sends.
const DefaultConsumerRebalanceMs = 30000

// CJoin is a ConsumerGroupHeartbeat at version v joining the group (member
// epoch 0) as member ("" for a v0 member that lets the server name it):
// rebalance timeout 30 s, subscribed to t1, owning nothing (the empty list
// a join must send).
func CJoin(v int16, member string, opts ...Opt) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = v
	r.Group, r.MemberID, r.MemberEpoch = DefaultGroup, member, 0
	r.RebalanceTimeoutMillis = DefaultConsumerRebalanceMs
	r.SubscribedTopicNames = []string{"t1"}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	apply(r, opts)
	return r
}

// CBeat is a ConsumerGroupHeartbeat at version v of member at epoch that
// changes nothing: rebalance timeout -1, subscription and owned partitions
// null, as a client's keep-alive heartbeat. Epoch -1 leaves the group and
// -2 leaves it for a while (a static member, with Inst).
func CBeat(v int16, member string, epoch int32, opts ...Opt) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = v
	r.Group, r.MemberID, r.MemberEpoch = DefaultGroup, member, epoch
	r.RebalanceTimeoutMillis = -1
	apply(r, opts)
	return r
}

// CDescribe is a ConsumerGroupDescribe at version v.
func CDescribe(v int16, groups ...string) *kmsg.ConsumerGroupDescribeRequest {
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Version = v
	r.Groups = groups
	return r
}

// Subscribe sets a ConsumerGroupHeartbeat's subscribed topic names (an
// empty, non-null list without topics).
func Subscribe(topics ...string) Opt {
	return func(r kmsg.Request) {
		if h, ok := r.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
			h.SubscribedTopicNames = append([]string{}, topics...)
		}
	}
}

// NoSubscription leaves a ConsumerGroupHeartbeat's subscribed topic names
// null.
func NoSubscription() Opt {
	return func(r kmsg.Request) {
		if h, ok := r.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
			h.SubscribedTopicNames = nil
		}
	}
}

// Owns adds partitions of topic to what a ConsumerGroupHeartbeat says the
// member owns (making the list non-null). Owns(topic) alone, or with no
// partitions, names the topic with none.
func Owns(topic string, partitions ...int32) Opt {
	return func(r kmsg.Request) {
		if h, ok := r.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
			t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			t.TopicID, t.Partitions = topicRef(topic), append([]int32{}, partitions...)
			h.Topics = append(h.Topics, t)
		}
	}
}

// OwnsNothing says a ConsumerGroupHeartbeat's member owns no partitions
// (an empty, non-null list).
func OwnsNothing() Opt {
	return func(r kmsg.Request) {
		if h, ok := r.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
			h.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
	}
}

// OwnedNull leaves a ConsumerGroupHeartbeat's owned partitions null.
func OwnedNull() Opt {
	return func(r kmsg.Request) {
		if h, ok := r.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
			h.Topics = nil
		}
	}
}

// RebalanceTimeout sets a ConsumerGroupHeartbeat's rebalance timeout, in ms
// (-1: unchanged).
func RebalanceTimeout(ms int32) Opt {
	return func(r kmsg.Request) {
		if h, ok := r.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
			h.RebalanceTimeoutMillis = ms
		}
	}
}

// Assignor sets a ConsumerGroupHeartbeat's server-side assignor.
func Assignor(name string) Opt {
	return func(r kmsg.Request) {
		if h, ok := r.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
			h.ServerAssignor = kmsg.StringPtr(name)
		}
	}
}

// Rack sets a ConsumerGroupHeartbeat's rack id.
func Rack(id string) Opt {
	return func(r kmsg.Request) {
		if h, ok := r.(*kmsg.ConsumerGroupHeartbeatRequest); ok {
			h.RackID = kmsg.StringPtr(id)
		}
	}
}

// FetchAs is an OffsetFetch v9+ of the partitions given with Of, naming
// the member that fetches and its epoch (KIP-848: a member's fetch of
// committed offsets is checked against its epoch).
func FetchAs(v int16, member string, epoch int32, opts ...Opt) *kmsg.OffsetFetchRequest {
	r := Fetch(v, opts...)
	r.Groups[0].MemberID, r.Groups[0].MemberEpoch = kmsg.StringPtr(member), epoch
	return r
}

// ListTypes is a ListGroups v5 with a types filter (KIP-848).
func ListTypes(v int16, types ...string) *kmsg.ListGroupsRequest {
	r := kmsg.NewPtrListGroupsRequest()
	r.Version = v
	r.TypesFilter = types
	return r
}

// topicRef is the placeholder id a request names a topic by: the name's
// bytes, zero-padded. The runner replaces it with the server's id of the
// topic; a name the server does not have stays a placeholder, an id no
// topic has.
func topicRef(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	return id
}

// refName is the topic name a placeholder id stands for.
func refName(id [16]byte) (string, bool) {
	name := bytes.TrimRight(id[:], "\x00")
	if len(name) == 0 {
		return "", false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "", false
		}
	}
	return string(name), true
}
