package conformance

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transcript lines: every answer becomes one line of the fields that
// matter, with member ids as symbols and throttles dropped. Collections
// whose order Kafka does not specify (members, partitions, groups) are
// sorted; LeaveGroup's members keep the request's order, as Kafka answers.
//
// kfake departs from Kafka in three ways that would touch almost every
// line; for kfake only (never for kcoord) they are normalised here:
//
//  1. Member ids. Kafka's are clientId (or group.instance.id) + "-" +
//     UUID.randomUUID() (core/src/main/scala/kafka/coordinator/group/
//     GroupMetadata.scala, generateMemberId); kfake's suffix is 32 hex
//     digits without dashes (kfake groups.go, generateMemberID).
//  2. Client hosts. Kafka reports InetAddress.toString, "/127.0.0.1"
//     (MemberMetadata.clientHost from RequestContext.clientAddress, via
//     core/src/main/scala/kafka/server/KafkaApis.scala); kfake reports the
//     remote address with its port.
//  3. Offset metadata. Kafka never answers a null metadata: a commit with
//     null metadata stores OffsetAndMetadata.NoMetadata ("") and a
//     partition without an offset is answered with ""
//     (core/src/main/scala/kafka/coordinator/group/
//     GroupMetadataManager.scala, getOffsets); kfake answers null.
//
// The consumer group protocol (KIP-848) adds two, in normalize_consumer.go:
// the ids of ConsumerGroupHeartbeat v0 members the server names, and the
// topic names of ConsumerGroupDescribe assignments.

var (
	kafkaMemberID = regexp.MustCompile(`^(.*)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	kfakeMemberID = regexp.MustCompile(`^(.*)-[0-9a-f]{32}$`)
)

// symbols binds member ids to symbols and back, for one run, and names
// the server's topics by id (for the consumer group protocol).
type symbols struct {
	kfake  bool
	byID   map[string]string
	bySym  map[string]string
	prefix map[string]int
	// topicIDs and topicNames map the server's topics between names and
	// ids; nil until a request of the consumer group protocol loads them
	// (runner.loadTopics).
	topicIDs   map[string][16]byte
	topicNames map[[16]byte]string
}

func newSymbols(kfake bool) *symbols {
	return &symbols{kfake: kfake, byID: map[string]string{}, bySym: map[string]string{}, prefix: map[string]int{}}
}

// name returns id's symbol, binding a new one for an id not seen before:
// "$" + its prefix (the client or instance id), then "$<prefix>2", ...
// Anything that is not a member id of the server's form is printed quoted.
func (s *symbols) name(id string) string { return s.nameFor(id, "") }

// nameFor is name for an id that owner (the member answered) may have been
// given: an id of the form Kafka gives a ConsumerGroupHeartbeat v0 member
// (a bare Uuid, see normalize_consumer.go) is bound to "$" + owner.
func (s *symbols) nameFor(id, owner string) string {
	if sym, ok := s.byID[id]; ok {
		return sym
	}
	var prefix string
	if m := kafkaMemberID.FindStringSubmatch(id); m != nil {
		prefix = m[1]
	} else if m := kfakeMemberID.FindStringSubmatch(id); m != nil && s.kfake {
		prefix = m[1]
	} else if owner != "" && kafkaUuid.MatchString(id) {
		prefix = owner
	} else {
		return strconv.Quote(id)
	}
	s.prefix[prefix]++
	sym := "$" + prefix
	if n := s.prefix[prefix]; n > 1 {
		sym += strconv.Itoa(n)
	}
	s.byID[id], s.bySym[sym] = sym, id
	return sym
}

// resolve returns the id a symbol is bound to; anything else (a literal id
// or a symbol not bound yet) is sent as it is.
func (s *symbols) resolve(ref string) string {
	if id, ok := s.bySym[ref]; ok {
		return id
	}
	return ref
}

// bind replaces the symbols of a request's member ids with the ids.
func (s *symbols) bind(r kmsg.Request) {
	switch r := r.(type) {
	case *kmsg.JoinGroupRequest:
		r.MemberID = s.resolve(r.MemberID)
	case *kmsg.SyncGroupRequest:
		r.MemberID = s.resolve(r.MemberID)
		for i := range r.GroupAssignment {
			r.GroupAssignment[i].MemberID = s.resolve(r.GroupAssignment[i].MemberID)
		}
	case *kmsg.HeartbeatRequest:
		r.MemberID = s.resolve(r.MemberID)
	case *kmsg.LeaveGroupRequest:
		r.MemberID = s.resolve(r.MemberID)
		for i := range r.Members {
			r.Members[i].MemberID = s.resolve(r.Members[i].MemberID)
		}
	case *kmsg.OffsetCommitRequest:
		r.MemberID = s.resolve(r.MemberID)
	case *kmsg.OffsetFetchRequest:
		for i := range r.Groups {
			if r.Groups[i].MemberID != nil {
				r.Groups[i].MemberID = kmsg.StringPtr(s.resolve(*r.Groups[i].MemberID))
			}
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		r.MemberID = s.resolve(r.MemberID)
		for i := range r.Topics {
			if name, ok := refName(r.Topics[i].TopicID); ok {
				if id, ok := s.topicIDs[name]; ok {
					r.Topics[i].TopicID = id
				}
			}
		}
	}
}

// errName is a Kafka error code's name, NONE for 0.
func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return fmt.Sprintf("ERROR_%d", code)
}

// str prints an optional string: null, "" or the value.
func str(p *string) string {
	switch {
	case p == nil:
		return "null"
	case *p == "":
		return `""`
	}
	return *p
}

// blob prints opaque bytes: quoted when printable, else hex.
func blob(b []byte) string {
	s := string(b)
	for _, r := range s {
		if !strconv.IsPrint(r) {
			return fmt.Sprintf("0x%x", b)
		}
	}
	return strconv.Quote(s)
}

// subscribed prints consumer protocol metadata as its topics.
func subscribed(meta []byte) string {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(meta); err != nil {
		return blob(meta)
	}
	return strings.Join(m.Topics, ",")
}

// render turns the answer to member's request into a transcript line.
func (s *symbols) render(member string, resp kmsg.Response) string {
	v := resp.GetVersion()
	head := fmt.Sprintf("%s v%d:", kmsg.NameForKey(resp.Key()), v)
	switch r := resp.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return s.consumerHeartbeat(head, member, r)
	case *kmsg.ConsumerGroupDescribeResponse:
		return s.consumerDescribe(head, r)
	case *kmsg.JoinGroupResponse:
		line := fmt.Sprintf("%s %s gen=%d member=%s leader=%s", head, errName(r.ErrorCode), r.Generation, s.name(r.MemberID), s.optName(r.LeaderID))
		if v >= 7 {
			line += " proto=" + str(r.ProtocolType) + "/" + str(r.Protocol)
		} else {
			line += " proto=" + str(r.Protocol)
		}
		if v >= 9 && r.SkipAssignment {
			line += " skip-assignment"
		}
		if len(r.Members) > 0 {
			ms := make([]string, 0, len(r.Members))
			for _, m := range r.Members {
				ms = append(ms, s.name(m.MemberID)+instance(m.InstanceID)+":"+subscribed(m.ProtocolMetadata))
			}
			sort.Strings(ms)
			line += " members=[" + strings.Join(ms, " ") + "]"
		}
		return line
	case *kmsg.SyncGroupResponse:
		line := head + " " + errName(r.ErrorCode)
		if v >= 5 {
			line += " proto=" + str(r.ProtocolType) + "/" + str(r.Protocol)
		}
		return line + " assignment=" + blob(r.MemberAssignment)
	case *kmsg.HeartbeatResponse:
		return head + " " + errName(r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		line := head + " " + errName(r.ErrorCode)
		if v >= 3 {
			ms := make([]string, 0, len(r.Members))
			for _, m := range r.Members {
				ms = append(ms, s.name(m.MemberID)+instance(m.InstanceID)+"="+errName(m.ErrorCode))
			}
			line += " members=[" + strings.Join(ms, " ") + "]"
		}
		return line
	case *kmsg.OffsetCommitResponse:
		var ps []string
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, errName(p.ErrorCode)))
			}
		}
		sort.Strings(ps)
		return head + " " + strings.Join(ps, " ")
	case *kmsg.OffsetFetchResponse:
		if v >= 8 {
			var gs []string
			for _, g := range r.Groups {
				var ps []string
				for _, t := range g.Topics {
					for _, p := range t.Partitions {
						ps = append(ps, s.fetched(v, t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode))
					}
				}
				sort.Strings(ps)
				gs = append(gs, strings.Join(append([]string{g.Group, errName(g.ErrorCode)}, ps...), " "))
			}
			sort.Strings(gs)
			return head + " " + strings.Join(gs, "; ")
		}
		var ps []string
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, s.fetched(v, t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode))
			}
		}
		sort.Strings(ps)
		line := head
		if v >= 2 {
			line += " " + errName(r.ErrorCode)
		}
		return strings.Join(append([]string{line}, ps...), " ")
	case *kmsg.DescribeGroupsResponse:
		var gs []string
		for _, g := range r.Groups {
			line := fmt.Sprintf("%s %s state=%s proto=%s/%s", g.Group, errName(g.ErrorCode), g.State, quoteEmpty(g.ProtocolType), quoteEmpty(g.Protocol))
			var ms []string
			for _, m := range g.Members {
				d := s.name(m.MemberID) + instance(m.InstanceID) + " client=" + m.ClientID + " host=" + s.host(m.ClientHost)
				if len(m.ProtocolMetadata) > 0 {
					d += " meta=" + subscribed(m.ProtocolMetadata)
				}
				if len(m.MemberAssignment) > 0 {
					d += " assignment=" + blob(m.MemberAssignment)
				}
				ms = append(ms, d)
			}
			sort.Strings(ms)
			gs = append(gs, line+" members=["+strings.Join(ms, "; ")+"]")
		}
		sort.Strings(gs)
		return head + " " + strings.Join(gs, " | ")
	case *kmsg.ListGroupsResponse:
		var gs []string
		for _, g := range r.Groups {
			d := g.Group + "(" + quoteEmpty(g.ProtocolType)
			if v >= 4 {
				d += "," + g.GroupState
			}
			if v >= 5 {
				d += "," + g.GroupType
			}
			gs = append(gs, d+")")
		}
		sort.Strings(gs)
		return fmt.Sprintf("%s %s groups=[%s]", head, errName(r.ErrorCode), strings.Join(gs, " "))
	case *kmsg.DeleteGroupsResponse:
		var gs []string
		for _, g := range r.Groups {
			gs = append(gs, g.Group+"="+errName(g.ErrorCode))
		}
		sort.Strings(gs)
		return head + " " + strings.Join(gs, " ")
	case *kmsg.FindCoordinatorResponse:
		// Which broker is the coordinator differs between servers (kfake
		// and kcoord number and bind theirs apart): only whether one is
		// named is compared.
		named := func(node int32, host string) string {
			if node >= 0 && host != "" {
				return "coordinator"
			}
			return "no-coordinator"
		}
		if v < 4 {
			return fmt.Sprintf("%s %s %s", head, errName(r.ErrorCode), named(r.NodeID, r.Host))
		}
		var cs []string
		for _, c := range r.Coordinators {
			cs = append(cs, fmt.Sprintf("%s=%s %s", c.Key, errName(c.ErrorCode), named(c.NodeID, c.Host)))
		}
		sort.Strings(cs)
		return head + " " + strings.Join(cs, " ")
	case *kmsg.OffsetDeleteResponse:
		var ps []string
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, errName(p.ErrorCode)))
			}
		}
		sort.Strings(ps)
		return strings.Join(append([]string{head, errName(r.ErrorCode)}, ps...), " ")
	}
	return fmt.Sprintf("%s %T not normalised", head, resp)
}

// optName is a member id that may be absent.
func (s *symbols) optName(id string) string {
	if id == "" {
		return `""`
	}
	return s.name(id)
}

// fetched prints one partition of an OffsetFetch answer.
func (s *symbols) fetched(v int16, topic string, partition int32, offset int64, epoch int32, meta *string, code int16) string {
	if s.kfake && meta == nil {
		meta = new(string) // normalisation 3
	}
	d := fmt.Sprintf("%s/%d=%d", topic, partition, offset)
	if v >= 5 {
		d += fmt.Sprintf(" epoch=%d", epoch)
	}
	if meta == nil {
		d += " meta=null"
	} else {
		d += " meta=" + strconv.Quote(*meta)
	}
	if code != 0 {
		d += " " + errName(code)
	}
	return "[" + d + "]"
}

// host prints a client host.
func (s *symbols) host(h string) string {
	if s.kfake {
		if ip, _, err := net.SplitHostPort(h); err == nil {
			return "/" + ip // normalisation 2
		}
	}
	return h
}

func instance(id *string) string {
	if id == nil {
		return ""
	}
	return "(" + *id + ")"
}

func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
