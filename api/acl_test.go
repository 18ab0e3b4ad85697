package api

import (
	"context"
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
