package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/groups"
)

// inspectQuery is what the status API asks a node (cluster.Inspector):
// "groups" (the groups of every shard it coordinates), "group" (one
// group's detail, from the node that coordinates it) or "timeline" (its
// recent events). Group is bytes so that a group id that is not UTF-8
// crosses JSON intact.
type inspectQuery struct {
	Kind  string `json:"kind"`
	Group []byte `json:"group,omitempty"`
}

const (
	inspectGroups   = "groups"
	inspectGroup    = "group"
	inspectTimeline = "timeline"
)

// ErrNotCoordinatorHere is an inspection of a group whose shard this node
// does not lead (any more): ask the leader the caller knows now.
var ErrNotCoordinatorHere = errors.New("this node does not coordinate the group's shard")

// GroupSummary is one group as the status page lists it.
type GroupSummary struct {
	Group string `json:"group"`
	// GroupBase64 is the group id's bytes when they are not valid UTF-8
	// (Group then holds them with U+FFFD in place of the invalid bytes).
	GroupBase64  []byte `json:"group_base64,omitempty"`
	Shard        int32  `json:"shard"`
	Coordinator  int32  `json:"coordinator"` // the node that answered
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	// Protocol is the assignor the members chose; "" unless Stable.
	Protocol   string `json:"protocol,omitempty"`
	Members    int    `json:"members"`
	Generation int32  `json:"generation"`
	// StateSince is when the group entered State; LastRebalance when it
	// last became Stable (absent when its coordinator has not seen that).
	StateSince    time.Time  `json:"state_since"`
	LastRebalance *time.Time `json:"last_rebalance,omitempty"`
}

// GroupsReport is a node's answer to "groups": the groups of the shards it
// coordinates, and which those shards are, each at the Raft term it
// confirmed its leadership in.
type GroupsReport struct {
	Shards []ReportedShard `json:"shards"`
	Groups []GroupSummary  `json:"groups"`
}

// ReportedShard is a shard a GroupsReport lists the groups of. When two
// nodes report one shard (its leadership moved between the two calls),
// the higher term's report is the current one.
type ReportedShard struct {
	Shard int32  `json:"shard"`
	Term  uint64 `json:"term"`
}

// GroupDetail is one group's page: its summary, members with their
// assignments, and committed offsets.
type GroupDetail struct {
	GroupSummary
	// Exists is false for a group with neither members nor offsets.
	Exists bool   `json:"exists"`
	Leader string `json:"leader,omitempty"` // the leader's member id
	// MemberList is the members (GroupSummary.Members counts them).
	MemberList []MemberDetail `json:"member_list"`
	Offsets    []OffsetDetail `json:"offsets"`
}

// MemberDetail is one member of a group. For a consumer group (protocol
// type "consumer") Subscription and Assignment are decoded from the
// member's metadata and assignment; AssignmentBytes is the assignment's
// length otherwise.
type MemberDetail struct {
	MemberID           string            `json:"member_id"`
	InstanceID         string            `json:"instance_id,omitempty"`
	ClientID           string            `json:"client_id"`
	ClientHost         string            `json:"client_host"`
	SessionTimeoutMs   int64             `json:"session_timeout_ms"`
	RebalanceTimeoutMs int64             `json:"rebalance_timeout_ms"`
	Subscription       []string          `json:"subscription,omitempty"`
	Assignment         []TopicAssignment `json:"assignment,omitempty"`
	AssignmentBytes    int               `json:"assignment_bytes"`
}

// TopicAssignment is one topic's partitions in a member's assignment.
type TopicAssignment struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// OffsetDetail is one committed offset.
type OffsetDetail struct {
	Topic       string    `json:"topic"`
	Partition   int32     `json:"partition"`
	Offset      int64     `json:"offset"`
	LeaderEpoch int32     `json:"leader_epoch"`
	Metadata    string    `json:"metadata,omitempty"`
	CommittedAt time.Time `json:"committed_at"`
}

// exactID returns a group id for JSON: the id, and its bytes when JSON
// cannot carry it as a string.
func exactID(id string) (string, []byte) {
	if utf8.ValidString(id) {
		return id, nil
	}
	return strings.ToValidUTF8(id, "\uFFFD"), []byte(id)
}

// fromExactID is exactID's inverse: the exact id from what JSON carried.
func fromExactID(id string, exact []byte) string {
	if exact != nil {
		return string(exact)
	}
	return id
}

// ID is the group's exact id.
func (g GroupSummary) ID() string { return fromExactID(g.Group, g.GroupBase64) }

// ErrNodeStarting is an inspection of a node whose shards are not started
// yet.
var ErrNodeStarting = errors.New("the node is starting")

// inspect is this node's cluster.Inspector. It runs on an admin
// connection's goroutine (or the HTTP handler's, for this node) and blocks
// on leadership confirmations, within ctx. It takes no server lock: the
// coordinators and states it reads are fixed before the cluster node
// starts, and it answers ErrNodeStarting until the node has started.
func (s *Server) inspect(ctx context.Context, query []byte) ([]byte, error) {
	node := s.raftNode.Load()
	if node == nil {
		return nil, ErrNodeStarting
	}
	var q inspectQuery
	if err := json.Unmarshal(query, &q); err != nil {
		return nil, fmt.Errorf("inspection query: %w", err)
	}
	var report any
	var err error
	switch q.Kind {
	case inspectGroups:
		report = s.localGroups(ctx, node)
	case inspectGroup:
		report, err = s.localGroup(ctx, node, string(q.Group))
	case inspectTimeline:
		report = s.events.recent()
	default:
		return nil, fmt.Errorf("unknown inspection %q", q.Kind)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(report)
}

// localGroups lists the groups of every shard whose coordinator here is
// active and confirms its leadership within ctx (groups.Coordinator.List),
// the shards at once. A shard whose confirmation fails is left out: its
// next leader lists it.
func (s *Server) localGroups(ctx context.Context, node *cluster.Node) GroupsReport {
	type listed struct {
		term   uint64
		groups []groups.GroupListing
		err    error
	}
	lists := make([]listed, len(s.coords))
	var wg sync.WaitGroup
	for shard, c := range s.coords {
		if !c.Active() {
			lists[shard].err = groups.ErrNotCoordinator
			continue
		}
		wg.Go(func() {
			// The term before the confirmation: the confirmed leadership is
			// of this term or a later one.
			lists[shard].term = node.Shard(int32(shard)).Raft.CurrentTerm()
			lists[shard].groups, lists[shard].err = c.List(ctx)
		})
	}
	wg.Wait()
	r := GroupsReport{Shards: []ReportedShard{}, Groups: []GroupSummary{}}
	for shard, l := range lists {
		if l.err != nil {
			continue
		}
		r.Shards = append(r.Shards, ReportedShard{Shard: int32(shard), Term: l.term})
		for _, gl := range l.groups {
			g := GroupSummary{Shard: int32(shard), Coordinator: s.cfg.NodeID, State: gl.State, ProtocolType: gl.ProtocolType,
				Protocol: gl.Protocol, Members: gl.Members, Generation: gl.Generation, StateSince: gl.StateSince,
				LastRebalance: timeOrNil(gl.LastRebalance)}
			g.Group, g.GroupBase64 = exactID(gl.GroupID)
			r.Groups = append(r.Groups, g)
		}
	}
	return r
}

// localGroup describes one group of a shard this node coordinates: its
// members (confirmed by a quorum, as DescribeGroups is) and then its
// committed offsets from the shard's state.
func (s *Server) localGroup(ctx context.Context, node *cluster.Node, id string) (GroupDetail, error) {
	shard := s.ShardFor(id)
	d, err := s.coords[shard].Describe(ctx, id)
	if errors.Is(err, groups.ErrNotCoordinator) || errors.Is(err, groups.ErrLoadInProgress) {
		return GroupDetail{}, fmt.Errorf("%w: %w", ErrNotCoordinatorHere, err)
	}
	if err != nil {
		return GroupDetail{}, err
	}
	state := s.states[shard]
	out := GroupDetail{
		GroupSummary: GroupSummary{Shard: shard, Coordinator: s.cfg.NodeID, State: d.State, ProtocolType: d.ProtocolType,
			Protocol: d.Protocol, Members: len(d.Members), Generation: d.Generation, StateSince: d.StateSince,
			LastRebalance: timeOrNil(d.LastRebalance)},
		Leader: d.Leader, MemberList: []MemberDetail{}, Offsets: []OffsetDetail{},
	}
	out.Group, out.GroupBase64 = exactID(id)
	for _, m := range d.Members {
		out.MemberList = append(out.MemberList, memberDetail(d.ProtocolType, m))
	}
	for tp, o := range state.Offsets(id) {
		out.Offsets = append(out.Offsets, OffsetDetail{Topic: tp.Topic, Partition: tp.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommittedAt: time.UnixMilli(o.CommitTimestamp)})
	}
	slices.SortFunc(out.Offsets, func(a, b OffsetDetail) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	out.Exists = d.Exists || len(out.Offsets) > 0
	return out, nil
}

// memberDetail decodes a member's subscription and assignment when the
// group is a consumer group (KIP-429's ConsumerProtocol, any version).
func memberDetail(protocolType string, m groups.MemberDescription) MemberDetail {
	md := MemberDetail{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
		SessionTimeoutMs: m.SessionTimeout.Milliseconds(), RebalanceTimeoutMs: m.RebalanceTimeout.Milliseconds(),
		AssignmentBytes: len(m.Assignment)}
	if protocolType != "consumer" {
		return md
	}
	var meta kmsg.ConsumerMemberMetadata
	if len(m.Metadata) > 0 && meta.ReadFrom(m.Metadata) == nil {
		md.Subscription = meta.Topics
	}
	var a kmsg.ConsumerMemberAssignment
	if len(m.Assignment) > 0 && a.ReadFrom(m.Assignment) == nil {
		for _, t := range a.Topics {
			md.Assignment = append(md.Assignment, TopicAssignment{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	return md
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// rebalanceEvent is the timeline's entry for a completed rebalance.
func rebalanceEvent(node int32, r groups.Rebalance) Event {
	e := Event{At: r.At, Node: node, Kind: eventRebalance, Shard: r.Shard, Generation: r.Generation,
		Members: r.Members, Protocol: r.Protocol, TookMs: float64(r.Took.Microseconds()) / 1000}
	e.Group, e.GroupBase64 = exactID(r.Group)
	return e
}

// leadershipEvent is the timeline's entry for a leadership change of
// shard; node is nil while the cluster node is being created (no term yet).
func leadershipEvent(self, shard int32, leader bool, node *cluster.Node) Event {
	e := Event{At: time.Now(), Node: self, Kind: eventLeaderLost, Shard: shard}
	if leader {
		e.Kind = eventLeaderGained
		if node != nil {
			if sh := node.Shard(shard); sh != nil {
				e.Term = sh.Raft.CurrentTerm()
			}
		}
	}
	return e
}
