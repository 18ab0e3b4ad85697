package conformance

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transcript lines of the consumer group protocol (KIP-848).
//
// A ConsumerGroupHeartbeat answer is printed with its error code; the
// error message only for INVALID_REQUEST, whose message names the rule
// the request broke (Kafka's are fixed strings, GroupMetadataManager.java
// throwIfConsumerGroupHeartbeatRequestIsInvalid; other errors' messages
// embed ids and epochs, and kfake gives none); the member id as a symbol
// or literal; the member epoch; the heartbeat interval of a successful
// answer (an error answer's is not compared: Kafka's is 0,
// GroupCoordinatorService.java consumerGroupHeartbeat answers an error
// with its code and message alone, kfake fills in its configured
// interval, and clients ignore it); and the assignment when the answer
// carries one, by topic name and partition, sorted. A ConsumerGroupDescribe
// answer is printed per group, sorted: its error code, or its state,
// group epoch, assignment epoch, assignor and members sorted by id, each
// with its epoch, type (v1), client, host, subscription, assignment and
// target by topic name.
//
// Two more kfake departures are normalised, for kfake only:
//
//  4. ConsumerGroupHeartbeat v0 member ids. Kafka names a member that joins
//     without an id Uuid.randomUuid().toString(), 22 URL-safe base64
//     characters (GroupMetadataManager.java consumerGroupHeartbeat); kfake
//     names it as a classic member, "<client id>-<32 hex digits>", which
//     normalisation 1 binds to "$<client id>". A bare Uuid in the answer to
//     member A is bound to "$A", so both read the same.
//  5. ConsumerGroupDescribe topic names. Kafka names every topic of an
//     assignment besides its id (ConsumerGroupMember.java
//     topicPartitionsFromMap: setTopicName); kfake sends the id alone. A
//     name that is given is compared with the topic the id stands for; an
//     empty one is accepted from kfake.

// kafkaUuid is Kafka's Uuid.toString: 16 bytes in URL-safe base64 without
// padding.
var kafkaUuid = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// consumerHeartbeat prints a ConsumerGroupHeartbeat answer to member.
func (s *symbols) consumerHeartbeat(head, member string, r *kmsg.ConsumerGroupHeartbeatResponse) string {
	line := head + " " + errName(r.ErrorCode)
	if r.ErrorCode == kerr.InvalidRequest.Code {
		msg := "null"
		if r.ErrorMessage != nil {
			msg = strconv.Quote(*r.ErrorMessage)
		}
		line += " msg=" + msg
	}
	if r.MemberID != nil {
		line += " member=" + s.nameFor(*r.MemberID, member)
	}
	if r.ErrorCode == 0 || r.MemberEpoch != 0 {
		line += fmt.Sprintf(" epoch=%d", r.MemberEpoch)
	}
	if r.ErrorCode == 0 {
		line += fmt.Sprintf(" interval=%d", r.HeartbeatIntervalMillis)
	}
	if r.Assignment != nil {
		parts := map[string][]int32{}
		for _, t := range r.Assignment.Topics {
			name := s.topicName(t.TopicID)
			parts[name] = append(parts[name], t.Partitions...)
		}
		line += " assignment=" + partitionsLine(parts)
	}
	return line
}

// consumerDescribe prints a ConsumerGroupDescribe answer.
func (s *symbols) consumerDescribe(head string, r *kmsg.ConsumerGroupDescribeResponse) string {
	v := r.GetVersion()
	var gs []string
	for _, g := range r.Groups {
		d := quoteEmpty(g.Group) + " " + errName(g.ErrorCode)
		if g.ErrorCode != 0 {
			gs = append(gs, d)
			continue
		}
		d += fmt.Sprintf(" state=%s epoch=%d assignment-epoch=%d assignor=%s", g.State, g.Epoch, g.AssignmentEpoch, quoteEmpty(g.AssignorName))
		var ms []string
		for _, m := range g.Members {
			md := s.name(m.MemberID) + instance(m.InstanceID)
			if m.RackID != nil {
				md += " rack=" + *m.RackID
			}
			md += fmt.Sprintf(" epoch=%d", m.MemberEpoch)
			if v >= 1 {
				md += " type=" + memberType(m.MemberType)
			}
			md += " client=" + m.ClientID + " host=" + s.host(m.ClientHost)
			topics := slices.Clone(m.SubscribedTopics)
			slices.Sort(topics)
			md += " topics=[" + strings.Join(topics, ",") + "]"
			if m.SubscribedTopicRegex != nil {
				md += " regex=" + strconv.Quote(*m.SubscribedTopicRegex)
			}
			md += " assigned=" + s.described(m.Assignment) + " target=" + s.described(m.TargetAssignment)
			ms = append(ms, md)
		}
		sort.Strings(ms)
		gs = append(gs, d+" members=["+strings.Join(ms, "; ")+"]")
	}
	sort.Strings(gs)
	return head + " " + strings.Join(gs, " | ")
}

// described prints a ConsumerGroupDescribe assignment by topic name.
func (s *symbols) described(a kmsg.Assignment) string {
	parts := map[string][]int32{}
	for _, tp := range a.TopicPartitions {
		name := s.topicName(tp.TopicID)
		if tp.Topic != name && !(s.kfake && tp.Topic == "") { // normalisation 5
			name += "(named " + strconv.Quote(tp.Topic) + ")"
		}
		parts[name] = append(parts[name], tp.Partitions...)
	}
	return partitionsLine(parts)
}

// topicName is the name of the server's topic id, or the id in hex for
// one the server did not list.
func (s *symbols) topicName(id [16]byte) string {
	if name, ok := s.topicNames[id]; ok {
		return name
	}
	if name, ok := refName(id); ok {
		return name + "?" // a placeholder the runner could not resolve
	}
	return "id:" + hex.EncodeToString(id[:])
}

// partitionsLine prints partitions by topic, both sorted:
// "[t1:0,1 t2:2]".
func partitionsLine(parts map[string][]int32) string {
	topics := make([]string, 0, len(parts))
	for t := range parts {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	out := make([]string, 0, len(topics))
	for _, t := range topics {
		ps := slices.Clone(parts[t])
		slices.Sort(ps)
		strs := make([]string, len(ps))
		for i, p := range ps {
			strs[i] = strconv.Itoa(int(p))
		}
		out = append(out, t+":"+strings.Join(strs, ","))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// memberType prints ConsumerGroupDescribe v1's member type (KIP-1099).
func memberType(t int8) string {
	switch t {
	case 0:
		return "classic"
	case 1:
		return "consumer"
	}
	return strconv.Itoa(int(t))
}
