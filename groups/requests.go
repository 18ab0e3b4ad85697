package groups

import (
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// JoinRequest is a JoinGroup for one member, decoded by the api package.
type JoinRequest struct {
	GroupID    string
	MemberID   string // empty for a member joining for the first time
	InstanceID string // group.instance.id; empty for a dynamic member
	ClientID   string
	ClientHost string
	// ProtocolType is the embedded protocol ("consumer" for consumers).
	ProtocolType string
	Protocols    []fsm.Protocol
	// SessionTimeoutMs and RebalanceTimeoutMs are in milliseconds.
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	// RequireKnownMemberID is set from JoinGroup v4: a new dynamic member
	// first gets MEMBER_ID_REQUIRED with its id (KIP-394).
	RequireKnownMemberID bool
	// SupportsSkipAssignment is set from JoinGroup v9: a returning static
	// leader can be told to skip the assignment (KIP-814).
	SupportsSkipAssignment bool
}

// JoinResult is the answer to a JoinGroup. On Err, MemberID may still be set
// (MEMBER_ID_REQUIRED carries the id to rejoin with).
type JoinResult struct {
	Err          error
	MemberID     string
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	// SkipAssignment tells a returning static leader not to assign (KIP-814).
	SkipAssignment bool
	// Members is filled for the leader only: every member with its metadata
	// for the chosen protocol.
	Members []JoinMember
}

// JoinMember is one member as the leader sees it in its JoinGroup answer.
type JoinMember struct {
	MemberID   string
	InstanceID string
	Metadata   []byte
}

// SyncRequest is a SyncGroup.
type SyncRequest struct {
	GroupID    string
	MemberID   string
	InstanceID string
	Generation int32
	// ProtocolType and Protocol are checked when set (SyncGroup v5, KIP-559).
	ProtocolType string
	Protocol     string
	// Assignments is the leader's assignment per member id; nil for others.
	Assignments map[string][]byte
}

// SyncResult is the answer to a SyncGroup.
type SyncResult struct {
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// HeartbeatRequest is a Heartbeat.
type HeartbeatRequest struct {
	GroupID    string
	MemberID   string
	InstanceID string
	Generation int32
}

// LeaveMember names one member leaving: by member id, or by instance id when
// the member id is empty (KIP-345 batch leave).
type LeaveMember struct {
	MemberID   string
	InstanceID string
}

// LeaveResult is the answer to one LeaveMember.
type LeaveResult struct {
	MemberID   string
	InstanceID string
	Err        error
}

// GroupDescription is DescribeGroups' view of one group.
type GroupDescription struct {
	GroupID string
	// Exists is false for a group this coordinator does not know (reported
	// Dead).
	Exists bool
	// ConsumerProtocol is set, with Exists false, for the id of a
	// consumer-protocol group, which DescribeGroups does not describe
	// (Kafka 4.x: "Group X is not a classic group.").
	ConsumerProtocol bool
	State            string
	ProtocolType     string
	// Protocol and member metadata/assignments are only given when the group
	// is Stable, as Kafka does.
	Protocol string
	Members  []MemberDescription
	// Generation, Leader (the leader's member id), StateSince and
	// LastRebalance are the status page's; DescribeGroups has no field for
	// them. StateSince is when the group entered State; LastRebalance when
	// it last became Stable (zero when this coordinator does not know).
	Generation    int32
	Leader        string
	StateSince    time.Time
	LastRebalance time.Time
}

// MemberDescription is one member in a GroupDescription.
type MemberDescription struct {
	MemberID   string
	InstanceID string
	ClientID   string
	ClientHost string
	Metadata   []byte
	Assignment []byte
	// SessionTimeout and RebalanceTimeout are the member's (the status
	// page's; DescribeGroups has no field for them).
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
}

// GroupListing is ListGroups' view of one group.
type GroupListing struct {
	GroupID string
	// Type is GroupTypeClassic or GroupTypeConsumer.
	Type         string
	ProtocolType string
	State        string
	// Protocol, Members, Generation, StateSince and LastRebalance are the
	// status page's, as in GroupDescription; ListGroups answers none of
	// them. Protocol is set only while the group is Stable.
	Protocol      string
	Members       int
	Generation    int32
	StateSince    time.Time
	LastRebalance time.Time
}

// CommitRequest is an OffsetCommit for one group as the client sent it,
// less the partitions the api refused (authorization, the topic registry).
// The coordinator validates, stamps and stores the partitions (Commit).
type CommitRequest struct {
	// Version is the OffsetCommit version (a consumer-protocol member
	// needs v9).
	Version    int16
	GroupID    string
	MemberID   string
	InstanceID string
	// Generation is -1 for commits outside group management (admin tools,
	// simple consumers).
	Generation int32
	// RetentionMs is OffsetCommit v2–v4's RetentionTimeMillis, an explicit
	// expiry; nil (other versions) or -1 keeps the offsets as long as the
	// group (KIP-211).
	RetentionMs *int64
	Partitions  []CommitPartition
}

// CommitPartition is one partition of an OffsetCommit as the client sent it.
type CommitPartition struct {
	Topic     string
	Partition int32
	Offset    int64
	// LeaderEpoch is -1 when unknown (OffsetCommit below v6).
	LeaderEpoch int32
	Metadata    *string
	// Timestamp is OffsetCommit v1's per-partition commit time, Unix ms;
	// nil (other versions) or -1 when not given.
	Timestamp *int64
}
