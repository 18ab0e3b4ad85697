package api

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

func consumerJoin(group, member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, member, 0, 30000
	req.SubscribedTopicNames, req.Topics = topics, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return req
}

func heartbeatConsumer(t *testing.T, h *Handlers, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	resp, err := h.consumerGroupHeartbeat(context.Background(), &transport.RequestContext{ClientID: "c", ClientHost: "/127.0.0.1"}, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ConsumerGroupHeartbeatResponse)
}

func describeConsumers(t *testing.T, h *Handlers, ids ...string) map[string]kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version, req.Groups = 1, ids
	resp, err := h.consumerGroupDescribe(context.Background(), &transport.RequestContext{}, req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kmsg.ConsumerGroupDescribeResponseGroup{}
	for _, g := range resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
		out[g.Group] = g
	}
	return out
}

// TestConsumerGroupHeartbeatOnTheWire: a join gets its epoch, interval and
// partitions (by topic id); ConsumerGroupDescribe shows the member with
// names resolved; bad requests get Kafka's codes with messages.
func TestConsumerGroupHeartbeatOnTheWire(t *testing.T) {
	orders := fsm.Topic{Name: "orders", ID: [16]byte{7}, Partitions: 3, ReplicationFactor: 1}
	h := newTestHandlers(t, Config{}, newMemTopics(orders))
	resp := heartbeatConsumer(t, h, consumerJoin("g", "m1", "orders"))
	if resp.ErrorCode != 0 || resp.MemberID == nil || *resp.MemberID != "m1" || resp.MemberEpoch != 1 || resp.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("join answered %+v", resp)
	}
	if resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || resp.Assignment.Topics[0].TopicID != orders.ID || len(resp.Assignment.Topics[0].Partitions) != 3 {
		t.Fatalf("join's assignment: %+v", resp.Assignment)
	}

	// A heartbeat that changes nothing and says nothing of what it owns
	// carries no assignment.
	beat := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	beat.Version, beat.Group, beat.MemberID, beat.MemberEpoch, beat.RebalanceTimeoutMillis = 1, "g", "m1", 1, -1
	if r := heartbeatConsumer(t, h, beat); r.ErrorCode != 0 || r.Assignment != nil || r.MemberEpoch != 1 {
		t.Fatalf("a plain heartbeat answered %+v", r)
	}

	d := describeConsumers(t, h, "g", "missing", "")
	g := d["g"]
	if g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != 1 || g.AssignmentEpoch != 1 || g.AssignorName != "uniform" || len(g.Members) != 1 {
		t.Fatalf("described %+v", g)
	}
	m := g.Members[0]
	if m.MemberID != "m1" || m.MemberType != 1 || m.ClientID != "c" || len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "orders" {
		t.Fatalf("described member %+v", m)
	}
	wantCode(t, "an unknown group", d["missing"].ErrorCode, kerr.GroupIDNotFound)
	if msg := d["missing"].ErrorMessage; msg == nil || *msg != "Group missing not found." {
		t.Errorf("an unknown group's message: %v", deref(msg))
	}
	wantCode(t, "an empty group id", d[""].ErrorCode, kerr.InvalidGroupID)

	fenced := *beat
	fenced.MemberEpoch = 7
	wantCode(t, "an epoch ahead of the member's", heartbeatConsumer(t, h, &fenced).ErrorCode, kerr.FencedMemberEpoch)
	unknown := *beat
	unknown.MemberID = "ghost"
	wantCode(t, "an unknown member", heartbeatConsumer(t, h, &unknown).ErrorCode, kerr.UnknownMemberID)
	bad := consumerJoin("g", "m2", "orders")
	regex := "orders("
	bad.SubscribedTopicRegex = &regex
	wantCode(t, "a regex that does not compile", heartbeatConsumer(t, h, bad).ErrorCode, kerr.InvalidRegularExpression)
	assignor := "sticky"
	bad = consumerJoin("g", "m2", "orders")
	bad.ServerAssignor = &assignor
	r := heartbeatConsumer(t, h, bad)
	wantCode(t, "an assignor kcoord does not have", r.ErrorCode, kerr.UnsupportedAssignor)
	if r.ErrorMessage == nil {
		t.Error("UNSUPPORTED_ASSIGNOR without a message")
	}
}

// TestClassicAPIsAnswerForAConsumerGroup: DescribeGroups v6 says a
// consumer group is not a classic group, ListGroups gives each group its
// type and filters by it, and a classic JoinGroup is refused.
func TestClassicAPIsAnswerForAConsumerGroup(t *testing.T) {
	h := newTestHandlers(t, Config{}, newMemTopics(fsm.Topic{Name: "orders", ID: [16]byte{7}, Partitions: 3, ReplicationFactor: 1}))
	if r := heartbeatConsumer(t, h, consumerJoin("new", "m1", "orders")); r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	got := commitCodes(t, h, commitReq("old", [2]any{"orders", 0})) // a classic group, offsets only

	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version, dreq.Groups = 6, []string{"new"}
	dresp, err := h.describeGroups(context.Background(), &transport.RequestContext{}, dreq)
	if err != nil {
		t.Fatal(err)
	}
	dg := dresp.(*kmsg.DescribeGroupsResponse).Groups[0]
	wantCode(t, "DescribeGroups v6 of a consumer group", dg.ErrorCode, kerr.GroupIDNotFound)
	if dg.State != "Dead" || dg.ErrorMessage == nil || *dg.ErrorMessage != "Group new is not a classic group." {
		t.Errorf("DescribeGroups of a consumer group: %+v %v", dg, deref(dg.ErrorMessage))
	}

	list := func(types ...string) map[string]kmsg.ListGroupsResponseGroup {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.TypesFilter = 5, types
		resp, err := h.listGroups(context.Background(), &transport.RequestContext{}, req)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]kmsg.ListGroupsResponseGroup{}
		for _, g := range resp.(*kmsg.ListGroupsResponse).Groups {
			out[g.Group] = g
		}
		return out
	}
	all := list()
	if g := all["new"]; g.GroupType != "consumer" || g.ProtocolType != "consumer" || g.GroupState != "Stable" {
		t.Errorf("ListGroups lists the consumer group as %+v", g)
	}
	if g := all["old"]; g.GroupType != "classic" || len(got) != 1 {
		t.Errorf("ListGroups lists the classic group as %+v", g)
	}
	if consumers := list("Consumer"); len(consumers) != 1 || consumers["new"].Group != "new" {
		t.Errorf("ListGroups of type consumer: %v", consumers)
	}
	if classics := list("classic"); len(classics) != 1 || classics["old"].Group != "old" {
		t.Errorf("ListGroups of type classic: %v", classics)
	}

	d := describeConsumers(t, h, "old")
	if msg := d["old"].ErrorMessage; d["old"].ErrorCode != kerr.GroupIDNotFound.Code || msg == nil || *msg != "Group old is not a consumer group." {
		t.Errorf("ConsumerGroupDescribe of a classic group: %+v %v", d["old"], deref(msg))
	}
}
