package server

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
)

// TestACLsGateGroupsAndTopics: on a SASL node, a user without ACLs gets
// GROUP_AUTHORIZATION_FAILED on JoinGroup and TOPIC_AUTHORIZATION_FAILED
// on OffsetCommit; once the superuser grants Group READ and Topic READ
// (kadm's CreateACLs, as kafka-acls.sh), the user's consumer group runs and
// commits; ListGroups shows it only the groups it may describe; a DENY
// beats the ALLOW; and deleting the ACLs takes the access away again.
func TestACLsGateGroupsAndTopics(t *testing.T) {
	ca := newTestCA(t)
	s := startSASLServer(t, ca, nil)
	addr := s.KafkaAddr().String()
	ctx := testCtx(t, 90*time.Second)
	adm := saslAdmin(t, addr, ca, scram512(testSuperuser, testSuperPass))
	if r, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Password: "carol-pw"}}); err != nil || r.Error() != nil {
		t.Fatalf("creating carol: %v, %v", err, r.Error())
	}
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	// A group carol must not see: the superuser commits for it.
	if _, err := adm.CommitOffsets(ctx, "secret", kadm.OffsetsFromRecords(kgo.Record{Topic: "orders", Partition: 0, Offset: 1})); err != nil {
		t.Fatal(err)
	}

	carolOpts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsClient(ca, nil)), scram512("carol", "carol-pw")}
	carol, err := kgo.NewClient(carolOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer carol.Close()
	join := func() int16 {
		t.Helper()
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.ProtocolType, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = "billing", "consumer", 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, carol)
		if errors.Is(err, kerr.GroupAuthorizationFailed) {
			return kerr.GroupAuthorizationFailed.Code // refused at FindCoordinator
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	commit := func() int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = "billing", -1, ""
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 7
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, carol)
		if errors.Is(err, kerr.GroupAuthorizationFailed) {
			return kerr.GroupAuthorizationFailed.Code // refused at FindCoordinator
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := join(); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("JoinGroup without ACLs: %v", kerr.ErrorForCode(code))
	}
	if code := commit(); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("OffsetCommit without ACLs: %v", kerr.ErrorForCode(code))
	}

	// Group READ alone: the commit is refused on the topic.
	grant := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("creating %+v: %v %s", r, r.Err, r.ErrMessage)
			}
		}
	}
	grant(kadm.NewACLs().Allow("User:carol").Groups("billing").Operations(kadm.OpRead))
	if code := commit(); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("OffsetCommit with Group READ only: %v", kerr.ErrorForCode(code))
	}
	grant(kadm.NewACLs().Allow("User:carol").Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))

	// carol's consumer group runs and commits.
	assigned := make(chan struct{}, 1)
	member, err := kgo.NewClient(append(carolOpts, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	go func() {
		for ctx.Err() == nil {
			member.PollFetches(ctx)
		}
	}()
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("carol's group was never assigned its partitions")
	}
	if err := member.CommitRecords(ctx, &kgo.Record{Topic: "orders", Partition: 1, Offset: 41}); err != nil {
		t.Fatalf("carol's commit: %v", err)
	}
	fetched, err := kadm.NewClient(carol).FetchOffsets(ctx, "billing")
	if err != nil || fetched.Error() != nil {
		t.Fatalf("carol fetching her offsets: %v, %v", err, fetched.Error())
	}
	if o, ok := fetched.Lookup("orders", 1); !ok || o.At != 42 {
		t.Fatalf("carol's committed offset: %+v", o)
	}

	// ListGroups: carol sees billing, not secret; the superuser both.
	list := func(cl *kadm.Client) []string {
		t.Helper()
		listed, err := cl.ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return listed.Groups()
	}
	if got := list(kadm.NewClient(carol)); !slices.Equal(got, []string{"billing"}) {
		t.Fatalf("carol lists %v, want [billing]", got)
	}
	if got := list(adm); !slices.Contains(got, "secret") || !slices.Contains(got, "billing") {
		t.Fatalf("the superuser lists %v", got)
	}

	// carol may not manage ACLs.
	res, err := kadm.NewClient(carol).CreateACLs(ctx, kadm.NewACLs().Allow("User:carol").Groups("secret").Operations(kadm.OpAll))
	if err == nil && (len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("carol granting herself: %+v", res)
	}

	// A DENY beats the ALLOW.
	grant(kadm.NewACLs().Deny("User:carol").Groups("billing").Operations(kadm.OpRead))
	if code := join(); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("JoinGroup under a DENY: %v", kerr.ErrorForCode(code))
	}

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow().Deny().AllowHosts().DenyHosts().AnyResource().Operations().
		ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[kadm.DescribedACL]bool)
	for _, d := range described {
		for _, a := range d.Described {
			seen[a] = true
		}
	}
	if len(seen) != 3 {
		t.Fatalf("described %+v, want the three ACLs", described)
	}
	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:carol").Deny("User:carol").AllowHosts().DenyHosts().
		AnyResource().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(deleted) == 0 {
		t.Fatalf("deleting: %+v, %v", deleted, err)
	}
	n := 0
	for _, d := range deleted {
		n += len(d.Deleted)
	}
	if n != 3 {
		t.Fatalf("deleted %d ACLs, want 3: %+v", n, deleted)
	}
	if code := commit(); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("OffsetCommit after the ACLs were deleted: %v", kerr.ErrorForCode(code))
	}
}

// TestACLsAreCheckedAsKafkaChecksThem sends CreateAcls that Kafka refuses.
func TestACLsAreCheckedAsKafkaChecksThem(t *testing.T) {
	ca := newTestCA(t)
	s := startSASLServer(t, ca, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()), kgo.DialTLSConfig(tlsClient(ca, nil)), scram512(testSuperuser, testSuperPass))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t, 30*time.Second)
	creation := func(mut func(*kmsg.CreateACLsRequestCreation)) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeGroup, "g", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host = "User:alice", "*"
		c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		mut(&c)
		return c
	}
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{
		creation(func(c *kmsg.CreateACLsRequestCreation) {}),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.ResourceName = "" }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "alice" }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationAny }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.ResourcePatternType = kmsg.ACLResourcePatternTypeMatch }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.PermissionType = kmsg.ACLPermissionTypeAny }),
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		want := kerr.InvalidRequest.Code
		if i == 0 {
			want = 0
		}
		if r.ErrorCode != want {
			t.Errorf("creation %d: %v (%v), want %v", i, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, kerr.ErrorForCode(want))
		}
		if want != 0 && (r.ErrorMessage == nil || *r.ErrorMessage == "") {
			t.Errorf("creation %d: no message", i)
		}
	}
}

// TestSecurityChangesWaitForEveryNodeToApplyThem: on a three-node SASL
// cluster, a user created through one node logs in through another; with
// one node playing a release that cannot apply SCRAM or ACL entries (a
// rolling upgrade half done), AlterUserScramCredentials and CreateAcls are
// UNSUPPORTED_VERSION instead of crashing that node, and the cluster keeps
// serving.
func TestSecurityChangesWaitForEveryNodeToApplyThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  bool
	}{{"every node upgraded", false}, {"one node behind", true}} {
		t.Run(tc.name, func(t *testing.T) {
			servers := StartTestCluster(t, 3, func(i int, c *Config) {
				c.SASLEnabledMechanisms, c.SASLSuperuser, c.SASLSuperuserPassword = "SCRAM-SHA-512", testSuperuser, testSuperPass
				if tc.old && i == 2 {
					raft := c.Raft
					c.Raft = func(rc *cluster.Config) {
						raft(rc)
						rc.PlayApplyLevel = int(fsm.ConsumerGroupWriteType)
					}
				}
			})
			ctx := testCtx(t, 60*time.Second)
			admin := func(s *Server) *kadm.Client {
				cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()), scram512(testSuperuser, testSuperPass))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(cl.Close)
				return kadm.NewClient(cl)
			}
			res, err := admin(servers[1]).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dana", Mechanism: kadm.ScramSha512, Password: "dana-pw"}})
			if err != nil {
				t.Fatal(err)
			}
			acl, aclErr := admin(servers[0]).CreateACLs(ctx, kadm.NewACLs().Allow("User:dana").Groups("g").Operations(kadm.OpRead))
			if tc.old {
				if !errors.Is(res["dana"].Err, kerr.UnsupportedVersion) {
					t.Fatalf("creating a user with a node behind: %+v", res)
				}
				if aclErr != nil || len(acl) != 1 || !errors.Is(acl[0].Err, kerr.UnsupportedVersion) {
					t.Fatalf("creating an ACL with a node behind: %+v, %v", acl, aclErr)
				}
				if err := metadata(t, servers[2].KafkaAddr().String(), scram512(testSuperuser, testSuperPass)); err != nil {
					t.Fatalf("the node behind stopped serving: %v", err)
				}
				return
			}
			if res.Error() != nil || aclErr != nil || acl[0].Err != nil {
				t.Fatalf("creating a user and an ACL: %v, %+v, %v", res.Error(), acl, aclErr)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := metadata(t, servers[2].KafkaAddr().String(), scram512("dana", "dana-pw"))
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("dana logging in through node 3: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
