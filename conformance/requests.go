package conformance

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request builders for scripts. Every builder pins the version, uses group
// DefaultGroup unless InGroup says otherwise, and takes member ids as
// symbols ("$A") or literal strings. Options (Opt) adjust a request; each
// applies to the request kinds it makes sense for and is ignored by others.

// DefaultGroup is the group scripts talk about unless InGroup says otherwise.
const DefaultGroup = "g"

// Defaults of a JoinGroup.
const (
	DefaultSessionMs   = 10000
	DefaultRebalanceMs = 2000
)

// Opt adjusts a request.
type Opt func(kmsg.Request)

func apply(r kmsg.Request, opts []Opt) {
	for _, o := range opts {
		o(r)
	}
}

// Protocol is one protocol a member supports, with the consumer protocol's
// subscription as metadata.
type Protocol struct {
	Name   string
	Topics []string
}

// P is a protocol named name subscribing to topics.
func P(name string, topics ...string) Protocol { return Protocol{Name: name, Topics: topics} }

// subscription encodes a consumer protocol subscription (version 0, the
// prefix of every version, as Kafka's GroupMetadata parses it).
func subscription(topics []string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	return m.AppendTo(nil)
}

// Join is a JoinGroup at version v for member ("" for a new member): type
// "consumer", protocol range over t1, session 10 s, rebalance 2 s.
func Join(v int16, member string, opts ...Opt) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = v
	r.Group, r.MemberID = DefaultGroup, member
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = DefaultSessionMs, DefaultRebalanceMs
	r.ProtocolType = "consumer"
	apply(r, []Opt{Protocols(P("range", "t1"))})
	apply(r, opts)
	return r
}

// Sync is a SyncGroup at version v for member in generation gen; the leader
// adds Assign options. From v5 it names the protocol type and name that
// Join proposes by default, "consumer" and "range", as every client names
// its group's (KIP-559 made them mandatory); a group that chose another
// needs SyncProtocol, and NoSyncProtocol names none.
func Sync(v int16, member string, gen int32, opts ...Opt) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = v
	r.Group, r.MemberID, r.Generation = DefaultGroup, member, gen
	if v >= 5 {
		r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	}
	apply(r, opts)
	return r
}

// Heartbeat is a Heartbeat at version v.
func Heartbeat(v int16, member string, gen int32, opts ...Opt) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = v
	r.Group, r.MemberID, r.Generation = DefaultGroup, member, gen
	apply(r, opts)
	return r
}

// Leave is a LeaveGroup of one member at version v (0–2 carry one member
// id; from v3 it is a batch of one).
func Leave(v int16, member string, opts ...Opt) *kmsg.LeaveGroupRequest {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = v
	r.Group = DefaultGroup
	if v < 3 {
		r.MemberID = member
	} else {
		apply(r, []Opt{Leaving(member, "")})
	}
	apply(r, opts)
	return r
}

// LeaveBatch is a LeaveGroup v3+ of the members given with Leaving.
func LeaveBatch(v int16, opts ...Opt) *kmsg.LeaveGroupRequest {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = v
	r.Group = DefaultGroup
	apply(r, opts)
	return r
}

// Leaving adds a member to a LeaveGroup v3+ batch, by member id or, with
// an empty member, by instance id (KIP-345).
func Leaving(member, instance string) Opt {
	return func(r kmsg.Request) {
		if l, ok := r.(*kmsg.LeaveGroupRequest); ok {
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = member
			if instance != "" {
				m.InstanceID = kmsg.StringPtr(instance)
			}
			l.Members = append(l.Members, m)
		}
	}
}

// Commit is an OffsetCommit at version v for member in generation gen
// (-1 and "" for an admin commit); add partitions with At.
func Commit(v int16, member string, gen int32, opts ...Opt) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = v
	r.Group, r.MemberID, r.Generation = DefaultGroup, member, gen
	apply(r, opts)
	return r
}

// At adds a partition's offset to an OffsetCommit, with empty metadata.
func At(topic string, partition int32, offset int64) Opt {
	return AtMeta(topic, partition, offset, "")
}

// AtMeta adds a partition's offset with metadata to an OffsetCommit.
func AtMeta(topic string, partition int32, offset int64, metadata string) Opt {
	return func(r kmsg.Request) {
		c, ok := r.(*kmsg.OffsetCommitRequest)
		if !ok {
			return
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.Metadata = partition, offset, kmsg.StringPtr(metadata)
		for i := range c.Topics {
			if c.Topics[i].Topic == topic {
				c.Topics[i].Partitions = append(c.Topics[i].Partitions, p)
				return
			}
		}
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic, t.Partitions = topic, []kmsg.OffsetCommitRequestTopicPartition{p}
		c.Topics = append(c.Topics, t)
	}
}

// LeaderEpoch sets the leader epoch of every partition of an OffsetCommit
// (v6+).
func LeaderEpoch(epoch int32) Opt {
	return func(r kmsg.Request) {
		if c, ok := r.(*kmsg.OffsetCommitRequest); ok {
			for i := range c.Topics {
				for j := range c.Topics[i].Partitions {
					c.Topics[i].Partitions[j].LeaderEpoch = epoch
				}
			}
		}
	}
}

// FindCoordinator is a FindCoordinator at version v for the groups keys:
// the first alone up to v3, all of them in one batch from v4 (KIP-699).
func FindCoordinator(v int16, keys ...string) *kmsg.FindCoordinatorRequest {
	r := kmsg.NewPtrFindCoordinatorRequest()
	r.Version = v
	if v < 4 {
		r.CoordinatorKey = keys[0]
	} else {
		r.CoordinatorKeys = keys
	}
	return r
}

// FindCoordinatorOfType is FindCoordinator for keys of another key type
// than groups (v1+): 1 transaction, 2 share partition (v6, KIP-932), or
// one Kafka does not define.
func FindCoordinatorOfType(v int16, keyType int8, keys ...string) *kmsg.FindCoordinatorRequest {
	r := FindCoordinator(v, keys...)
	r.CoordinatorType = keyType
	return r
}

// Fetch is an OffsetFetch at version v of the partitions given with Of (v8+
// puts them in a one-group batch).
func Fetch(v int16, opts ...Opt) *kmsg.OffsetFetchRequest {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = v
	r.Group = DefaultGroup
	r.Topics = []kmsg.OffsetFetchRequestTopic{}
	apply(r, opts)
	return toBatch(r)
}

// FetchAll is an OffsetFetch v2+ of every committed partition (null topics).
func FetchAll(v int16, opts ...Opt) *kmsg.OffsetFetchRequest {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = v
	r.Group = DefaultGroup
	apply(r, opts)
	return toBatch(r)
}

// FetchBatch is an OffsetFetch v8+ (KIP-709) of several groups: the
// groups of fetches, each a v8+ Fetch or FetchAll, in order.
func FetchBatch(v int16, fetches ...*kmsg.OffsetFetchRequest) *kmsg.OffsetFetchRequest {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = v
	for _, f := range fetches {
		r.Groups = append(r.Groups, f.Groups...)
	}
	return r
}

// toBatch moves an OffsetFetch's group into v8's groups array.
func toBatch(r *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchRequest {
	if r.Version < 8 {
		return r
	}
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = r.Group
	if r.Topics != nil {
		g.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for _, t := range r.Topics {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = t.Topic, t.Partitions
			g.Topics = append(g.Topics, gt)
		}
	}
	r.Groups = []kmsg.OffsetFetchRequestGroup{g}
	r.Group, r.Topics = "", nil
	return r
}

// Of adds a topic's partitions to an OffsetFetch or an OffsetDelete.
func Of(topic string, partitions ...int32) Opt {
	return func(r kmsg.Request) {
		switch r := r.(type) {
		case *kmsg.OffsetFetchRequest:
			t := kmsg.NewOffsetFetchRequestTopic()
			t.Topic, t.Partitions = topic, partitions
			r.Topics = append(r.Topics, t)
		case *kmsg.OffsetDeleteRequest:
			t := kmsg.NewOffsetDeleteRequestTopic()
			t.Topic = topic
			for _, p := range partitions {
				tp := kmsg.NewOffsetDeleteRequestTopicPartition()
				tp.Partition = p
				t.Partitions = append(t.Partitions, tp)
			}
			r.Topics = append(r.Topics, t)
		}
	}
}

// Describe is a DescribeGroups at version v.
func Describe(v int16, groups ...string) *kmsg.DescribeGroupsRequest {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = v
	r.Groups = groups
	return r
}

// List is a ListGroups at version v with a states filter (v4+, KIP-518).
func List(v int16, states ...string) *kmsg.ListGroupsRequest {
	r := kmsg.NewPtrListGroupsRequest()
	r.Version = v
	r.StatesFilter = states
	return r
}

// DeleteGroups is a DeleteGroups at version v.
func DeleteGroups(v int16, groups ...string) *kmsg.DeleteGroupsRequest {
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Version = v
	r.Groups = groups
	return r
}

// OffsetDelete is an OffsetDelete (KIP-496) of the partitions given with Of.
func OffsetDelete(v int16, opts ...Opt) *kmsg.OffsetDeleteRequest {
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Version = v
	r.Group = DefaultGroup
	apply(r, opts)
	return r
}

// InGroup sets the group of a request.
func InGroup(group string) Opt {
	return func(r kmsg.Request) {
		switch r := r.(type) {
		case *kmsg.JoinGroupRequest:
			r.Group = group
		case *kmsg.SyncGroupRequest:
			r.Group = group
		case *kmsg.HeartbeatRequest:
			r.Group = group
		case *kmsg.LeaveGroupRequest:
			r.Group = group
		case *kmsg.OffsetCommitRequest:
			r.Group = group
		case *kmsg.OffsetFetchRequest:
			r.Group = group
		case *kmsg.OffsetDeleteRequest:
			r.Group = group
		case *kmsg.ConsumerGroupHeartbeatRequest:
			r.Group = group
		}
	}
}

// Inst sets the group.instance.id (KIP-345) of a JoinGroup, SyncGroup,
// Heartbeat, OffsetCommit or ConsumerGroupHeartbeat.
func Inst(instance string) Opt {
	return func(r kmsg.Request) {
		p := kmsg.StringPtr(instance)
		switch r := r.(type) {
		case *kmsg.JoinGroupRequest:
			r.InstanceID = p
		case *kmsg.SyncGroupRequest:
			r.InstanceID = p
		case *kmsg.HeartbeatRequest:
			r.InstanceID = p
		case *kmsg.OffsetCommitRequest:
			r.InstanceID = p
		case *kmsg.ConsumerGroupHeartbeatRequest:
			r.InstanceID = p
		}
	}
}

// Timeouts sets a JoinGroup's session and rebalance timeouts, in ms.
func Timeouts(sessionMs, rebalanceMs int32) Opt {
	return func(r kmsg.Request) {
		if j, ok := r.(*kmsg.JoinGroupRequest); ok {
			j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = sessionMs, rebalanceMs
		}
	}
}

// Type sets a JoinGroup's protocol type.
func Type(protocolType string) Opt {
	return func(r kmsg.Request) {
		if j, ok := r.(*kmsg.JoinGroupRequest); ok {
			j.ProtocolType = protocolType
		}
	}
}

// Protocols sets a JoinGroup's protocols, in preference order.
func Protocols(ps ...Protocol) Opt {
	return func(r kmsg.Request) {
		if j, ok := r.(*kmsg.JoinGroupRequest); ok {
			j.Protocols = nil
			for _, p := range ps {
				jp := kmsg.NewJoinGroupRequestProtocol()
				jp.Name, jp.Metadata = p.Name, subscription(p.Topics)
				j.Protocols = append(j.Protocols, jp)
			}
		}
	}
}

// Assign adds member's assignment to the leader's SyncGroup. Assignments
// are opaque to the coordinator; scripts use readable strings.
func Assign(member, assignment string) Opt {
	return func(r kmsg.Request) {
		if s, ok := r.(*kmsg.SyncGroupRequest); ok {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = member, []byte(assignment)
			s.GroupAssignment = append(s.GroupAssignment, a)
		}
	}
}

// NoSyncProtocol leaves a SyncGroup v5's protocol type and name null,
// which KIP-559 does not allow.
func NoSyncProtocol(nullType, nullName bool) Opt {
	return func(r kmsg.Request) {
		if s, ok := r.(*kmsg.SyncGroupRequest); ok {
			if nullType {
				s.ProtocolType = nil
			}
			if nullName {
				s.Protocol = nil
			}
		}
	}
}

// SyncProtocol sets a SyncGroup v5's protocol type and name (KIP-559).
func SyncProtocol(protocolType, name string) Opt {
	return func(r kmsg.Request) {
		if s, ok := r.(*kmsg.SyncGroupRequest); ok {
			s.ProtocolType, s.Protocol = kmsg.StringPtr(protocolType), kmsg.StringPtr(name)
		}
	}
}
