package api

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

// Authorization that Kafka 4.x does beyond one resource per API: regex
// subscriptions, the topics of a described group, and the ACL APIs
// without an authorizer.

var (
	aclOrders = fsm.Topic{Name: "orders", ID: [16]byte{1}, Partitions: 2, ReplicationFactor: 1}
	aclSecret = fsm.Topic{Name: "secret", ID: [16]byte{2}, Partitions: 2, ReplicationFactor: 1}
)

func aclRC(user string) *transport.RequestContext {
	return &transport.RequestContext{ClientID: "c", ClientHost: "/127.0.0.1", Principal: auth.User(user)}
}

// aclHandlers: alice may READ group g and DESCRIBE (via READ) topic
// orders only; "admin" is a superuser.
func aclHandlers(t *testing.T) *Handlers {
	t.Helper()
	acls := auth.NewACLs([]auth.ACL{
		{ResourceType: auth.ResourceGroup, ResourceName: "g", PatternType: auth.PatternLiteral, Principal: "User:alice", Host: "*", Operation: auth.OpRead, Permission: auth.PermissionAllow},
		{ResourceType: auth.ResourceTopic, ResourceName: "orders", PatternType: auth.PatternLiteral, Principal: "User:alice", Host: "*", Operation: auth.OpRead, Permission: auth.PermissionAllow},
	})
	super := auth.Superusers{auth.User("admin"): {}}
	az := auth.NewAuthorizer(super, func() *auth.ACLs { return acls })
	return newTestHandlers(t, Config{Authorizer: az}, newMemTopics(aclOrders, aclSecret))
}

// TestRegexSubscriptionsMatchOnlyDescribableTopics: a KIP-848 member that
// subscribes by regex is assigned every matching topic, including one its
// principal may not DESCRIBE. Kafka 4.x resolves the regex and then drops
// the topics the member may not describe
// (GroupMetadataManager/TopicRegexResolver.filterTopicDescribeAuthorizedTopics);
// kcoord checks Topic DESCRIBE only for SubscribedTopicNames.
func TestRegexSubscriptionsMatchOnlyDescribableTopics(t *testing.T) {
	h := aclHandlers(t)
	req := consumerJoin("g", "m1")
	req.SubscribedTopicNames = nil
	re := "orders|secret"
	req.SubscribedTopicRegex = &re
	resp, err := h.consumerGroupHeartbeat(context.Background(), aclRC("alice"), req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A regex member may need a second heartbeat to see its assignment.
	if r.Assignment == nil {
		beat := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		beat.Version, beat.Group, beat.MemberID, beat.MemberEpoch, beat.RebalanceTimeoutMillis = 1, "g", "m1", r.MemberEpoch, -1
		resp, err = h.consumerGroupHeartbeat(context.Background(), aclRC("alice"), beat)
		if err != nil {
			t.Fatal(err)
		}
		r = resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	if r.Assignment == nil {
		t.Fatalf("no assignment: %+v", r)
	}
	for _, tp := range r.Assignment.Topics {
		if tp.TopicID == aclSecret.ID {
			t.Errorf("alice, without Topic DESCRIBE on secret, was assigned its partitions %v through a regex subscription", tp.Partitions)
		}
	}
}

// TestConsumerGroupDescribeHidesGroupsWithUndescribableTopics: Kafka 4.x's
// handleConsumerGroupDescribe answers a group whose members' assignment
// or target names a topic the caller may not DESCRIBE with
// TOPIC_AUTHORIZATION_FAILED ("The group has described topic(s) that the
// client is not authorized to describe."), so topic names stay hidden.
// kcoord checks Group DESCRIBE only and returns the topic names.
func TestConsumerGroupDescribeHidesGroupsWithUndescribableTopics(t *testing.T) {
	h := aclHandlers(t)
	// The superuser's member consumes secret in group g.
	if r, err := h.consumerGroupHeartbeat(context.Background(), aclRC("admin"), consumerJoin("g", "m1", "secret")); err != nil || r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode != 0 {
		t.Fatalf("admin's join: %v %+v", err, r)
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version, req.Groups = 1, []string{"g"}
	resp, err := h.consumerGroupDescribe(context.Background(), aclRC("alice"), req)
	if err != nil {
		t.Fatal(err)
	}
	g := resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if g.ErrorCode == kerr.TopicAuthorizationFailed.Code {
		return
	}
	for _, m := range g.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			if tp.Topic == "secret" {
				t.Errorf("alice (Group READ on g, no Topic DESCRIBE on secret) sees secret in a member's assignment; want TOPIC_AUTHORIZATION_FAILED for the group, got %v", kerr.ErrorForCode(g.ErrorCode))
			}
		}
	}
}

// memACLs is an ACLStore in memory.
type memACLs struct{ acls []auth.ACL }

func (m *memACLs) ACLs() *auth.ACLs { return auth.NewACLs(m.acls) }
func (m *memACLs) CreateACLs(_ context.Context, a []auth.ACL) error {
	m.acls = append(m.acls, a...)
	return nil
}
func (m *memACLs) DeleteACLs(context.Context, []auth.ACL) error { return nil }

func (m *memACLs) SyncedACLs(context.Context) (*auth.ACLs, error) { return m.ACLs(), nil }

// TestACLAPIsAreSecurityDisabledWithoutAnAuthorizer: on a node that does not
// authenticate (no Authorizer), anyone may create ACLs that every
// authenticating node of the cluster then enforces; Kafka answers
// SECURITY_DISABLED ("No Authorizer is configured") to CreateAcls,
// DescribeAcls and DeleteAcls there (AclApis). kcoord documents this as
// "ACLs may be prepared before turning authentication on".
func TestACLAPIsAreSecurityDisabledWithoutAnAuthorizer(t *testing.T) {
	h := newTestHandlers(t, Config{}, newMemTopics()).WithACLs(&memACLs{})
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = 3
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:*", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	resp, err := h.createACLs(context.Background(), &transport.RequestContext{Principal: auth.Anonymous, ClientHost: "/10.0.0.9"}, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.CreateACLsResponse).Results[0].ErrorCode; code != kerr.SecurityDisabled.Code {
		t.Errorf("an anonymous client of a node without an authorizer created User:* ALL on the cluster: %v (Kafka: SECURITY_DISABLED)", kerr.ErrorForCode(code))
	}
}

// Authorization against Kafka's other request checks: which comes first is
// part of each API's answer, and the conformance suite runs without an
// authorizer. bob has no ACL; alice may READ group g and topic orders.

// askAs sends req to h's handler of its key as user.
func askAs(t *testing.T, h *Handlers, user string, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := handlerFor(h, req.Key())(context.Background(), aclRC(user), req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// groupCode is the error of a one-group answer.
func groupCode(t *testing.T, resp kmsg.Response) int16 {
	t.Helper()
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		return r.ErrorCode
	case *kmsg.OffsetDeleteResponse:
		return r.ErrorCode
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.ConsumerGroupDescribeResponse:
		if len(r.Groups) == 1 {
			return r.Groups[0].ErrorCode
		}
	}
	t.Fatalf("no one-group error in %T", resp)
	return 0
}

// joinV7 is a JoinGroup v7 of member to group.
func joinV7(group, member string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.MemberID, req.ProtocolType = 7, group, member, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	return req
}

// syncV5 is a SyncGroup v5 of group naming its protocol type and name.
func syncV5(group string) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 5, group, "m", 1
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	return req
}

// TestSyncGroupV5WithoutProtocolIsRefusedBeforeAuthorization: Kafka 4.x's
// KafkaApis.scala handleSyncGroupRequest answers a v5+ SyncGroup without
// its protocol type or name INCONSISTENT_GROUP_PROTOCOL before it
// authorizes the group (areMandatoryProtocolTypeAndNamePresent, then
// authorize READ GROUP).
func TestSyncGroupV5WithoutProtocolIsRefusedBeforeAuthorization(t *testing.T) {
	h := aclHandlers(t)
	req := syncV5("g")
	req.Protocol = nil
	wantCode(t, "bob's SyncGroup v5 without a protocol name", groupCode(t, askAs(t, h, "bob", req)), kerr.InconsistentGroupProtocol)
	wantCode(t, "bob's SyncGroup v5 with one", groupCode(t, askAs(t, h, "bob", syncV5("g"))), kerr.GroupAuthorizationFailed)
}

// TestGroupIDIsCheckedAfterAuthorization: Kafka 4.x authorizes the group
// in KafkaApis.scala (handleJoinGroupRequest, handleSyncGroupRequest,
// handleHeartbeatRequest, handleLeaveGroupRequest,
// handleOffsetDeleteRequest, handleConsumerGroupHeartbeat,
// handleConsumerGroupDescribe) before its coordinator refuses the empty
// group id (GroupCoordinatorService.java isGroupIdNotEmpty => INVALID_GROUP_ID;
// throwIfConsumerGroupHeartbeatRequestIsInvalid => INVALID_REQUEST for
// ConsumerGroupHeartbeat): a principal that may not use group "" learns
// GROUP_AUTHORIZATION_FAILED, one that may learns the id is invalid.
func TestGroupIDIsCheckedAfterAuthorization(t *testing.T) {
	h := aclHandlers(t)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Members = 4, []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	beat := kmsg.NewPtrHeartbeatRequest()
	beat.Version, beat.MemberID, beat.Generation = 4, "m", 1
	offsetDelete := kmsg.NewPtrOffsetDeleteRequest()
	offsetDelete.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	describe := kmsg.NewPtrConsumerGroupDescribeRequest()
	describe.Version, describe.Groups = 1, []string{""}
	for _, c := range []struct {
		req     kmsg.Request
		invalid *kerr.Error
	}{
		{joinV7("", ""), kerr.InvalidGroupID},
		{syncV5(""), kerr.InvalidGroupID},
		{beat, kerr.InvalidGroupID},
		{leave, kerr.InvalidGroupID},
		{offsetDelete, kerr.InvalidGroupID},
		{consumerJoin("", "m1", "orders"), kerr.InvalidRequest},
		{describe, kerr.InvalidGroupID},
	} {
		name := kmsg.NameForKey(c.req.Key())
		wantCode(t, "bob's "+name+" of group \"\"", groupCode(t, askAs(t, h, "bob", c.req)), kerr.GroupAuthorizationFailed)
		wantCode(t, "the superuser's "+name+" of group \"\"", groupCode(t, askAs(t, h, "admin", c.req)), c.invalid)
	}
}

// TestJoinGroupRefusedByAuthorizationNamesNoMember: Kafka answers a
// JoinGroup it does not authorize with JoinGroupRequest.java's
// getErrorResponse: no member id, generation -1, no leader. kcoord echoed
// the member id the request named.
func TestJoinGroupRefusedByAuthorizationNamesNoMember(t *testing.T) {
	h := aclHandlers(t)
	r := askAs(t, h, "bob", joinV7("g", "bob-7d1e")).(*kmsg.JoinGroupResponse)
	wantCode(t, "bob's JoinGroup", r.ErrorCode, kerr.GroupAuthorizationFailed)
	if r.MemberID != "" || r.Generation != -1 || r.LeaderID != "" || len(r.Members) != 0 {
		t.Errorf("a refused JoinGroup is answered member=%q generation=%d leader=%q members=%d; Kafka: member \"\", generation -1, no leader, no members",
			r.MemberID, r.Generation, r.LeaderID, len(r.Members))
	}
}

// TestOffsetCommitAuthorizesBeforeCheckingTopics: Kafka 4.x's
// KafkaApis.scala handleOffsetCommitRequest authorizes the group (every
// partition GROUP_AUTHORIZATION_FAILED), then each topic (its partitions
// TOPIC_AUTHORIZATION_FAILED), and only then looks topics and partitions
// up (UNKNOWN_TOPIC_OR_PARTITION): a principal learns nothing of topics
// it may not read.
func TestOffsetCommitAuthorizesBeforeCheckingTopics(t *testing.T) {
	h := aclHandlers(t)
	codes := func(user string, req *kmsg.OffsetCommitRequest) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range askAs(t, h, user, req).(*kmsg.OffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				out[rt.Topic+"/"+strconv.Itoa(int(rp.Partition))] = rp.ErrorCode
			}
		}
		return out
	}
	req := commitReq("g", [2]any{"orders", 0}, [2]any{"orders", 9}, [2]any{"secret", 0}, [2]any{"nope", 0})
	got := codes("bob", req)
	for _, tp := range []string{"orders/0", "orders/9", "secret/0", "nope/0"} {
		wantCode(t, "bob's commit to group g, "+tp, got[tp], kerr.GroupAuthorizationFailed)
	}
	got = codes("alice", req)
	wantCode(t, "alice's commit, orders/0", got["orders/0"], nil)
	wantCode(t, "alice's commit, orders/9 (no such partition)", got["orders/9"], kerr.UnknownTopicOrPartition)
	wantCode(t, "alice's commit, secret/0 (not readable)", got["secret/0"], kerr.TopicAuthorizationFailed)
	wantCode(t, "alice's commit, nope/0 (not readable, no such topic)", got["nope/0"], kerr.TopicAuthorizationFailed)
}

// TestConsumerGroupHeartbeatAuthorizesBeforeValidating: Kafka 4.x's
// KafkaApis.scala handleConsumerGroupHeartbeat authorizes the group, then
// Topic DESCRIBE on the subscribed names, before its coordinator validates
// the request (GroupCoordinatorService.java
// throwIfConsumerGroupHeartbeatRequestIsInvalid).
func TestConsumerGroupHeartbeatAuthorizesBeforeValidating(t *testing.T) {
	h := aclHandlers(t)
	invalid := func(topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
		req := consumerJoin("g", "m1", topics...)
		req.RebalanceTimeoutMillis = -1 // a join must name it
		return req
	}
	wantCode(t, "bob's invalid join", groupCode(t, askAs(t, h, "bob", invalid("orders"))), kerr.GroupAuthorizationFailed)
	wantCode(t, "alice's invalid join to secret", groupCode(t, askAs(t, h, "alice", invalid("orders", "secret"))), kerr.TopicAuthorizationFailed)
	wantCode(t, "alice's invalid join to orders", groupCode(t, askAs(t, h, "alice", invalid("orders"))), kerr.InvalidRequest)
}

// TestFindCoordinatorChecksEachKeyType: Kafka 4.x's KafkaApis.scala
// getCoordinator checks a key by its type: a group key needs Group
// DESCRIBE; a transaction key TransactionalId DESCRIBE
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a share key is INVALID_REQUEST
// before v6 whoever asks, and from v6 needs Cluster CLUSTER_ACTION
// (authorizeClusterOperation fails the request
// CLUSTER_AUTHORIZATION_FAILED) before it is found to have no share
// coordinator (INVALID_REQUEST); and an unknown type is INVALID_REQUEST
// (CoordinatorType.forId), whoever asks.
func TestFindCoordinatorChecksEachKeyType(t *testing.T) {
	h := aclHandlers(t)
	find := func(user string, v int16, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType = v, keyType
		if v < 4 {
			req.CoordinatorKey = key
		} else {
			req.CoordinatorKeys = []string{key}
		}
		r := askAs(t, h, user, req).(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			return kmsg.FindCoordinatorResponseCoordinator{Key: key, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage, NodeID: r.NodeID}
		}
		return r.Coordinators[0]
	}
	for _, c := range []struct {
		user    string
		v       int16
		keyType int8
		want    *kerr.Error
	}{
		{"bob", 4, coordinatorTypeGroup, kerr.GroupAuthorizationFailed},
		{"alice", 4, coordinatorTypeGroup, nil},
		{"bob", 4, coordinatorTypeTransaction, kerr.TransactionalIDAuthorizationFailed},
		{"bob", 3, coordinatorTypeTransaction, kerr.TransactionalIDAuthorizationFailed},
		{"admin", 4, coordinatorTypeTransaction, kerr.CoordinatorNotAvailable}, // kcoord serves no transactions
		{"bob", 5, coordinatorTypeShare, kerr.InvalidRequest},
		{"bob", 6, coordinatorTypeShare, kerr.ClusterAuthorizationFailed},
		{"admin", 6, coordinatorTypeShare, kerr.InvalidRequest},
		{"bob", 4, 3, kerr.InvalidRequest},
		{"admin", 1, -1, kerr.InvalidRequest},
	} {
		got := find(c.user, c.v, c.keyType, "g")
		wantCode(t, fmt.Sprintf("%s's FindCoordinator v%d of key type %d", c.user, c.v, c.keyType), got.ErrorCode, c.want)
		if c.want != nil && got.NodeID != -1 {
			t.Errorf("%s's FindCoordinator v%d of key type %d names node %d with its error", c.user, c.v, c.keyType, got.NodeID)
		}
	}
	// Kafka answers a refused key with the error's message when the whole
	// answer is the error (v0–v3), and without one on a key of v4+.
	if m := find("bob", 3, coordinatorTypeTransaction, "g").ErrorMessage; m == nil || *m != kerr.TransactionalIDAuthorizationFailed.Description {
		t.Errorf("v3 transaction key refused with message %q, want the error's", deref(m))
	}
	if m := find("bob", 4, coordinatorTypeTransaction, "g").ErrorMessage; m != nil {
		t.Errorf("v4 transaction key refused with message %q, want none", *m)
	}
}
