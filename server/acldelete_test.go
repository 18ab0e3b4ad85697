package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeleteACLsThroughAFollowerMatchesWhatWasJustCreated: an ACL
// created through a follower and deleted right after through it is
// deleted: DeleteAcls brings the follower's replica up to the leader's
// applied index before matching its filters, as Kafka matches them on
// the controller (a reviewer found the follower's lagging copy answering
// "deleted nothing").
func TestDeleteACLsThroughAFollowerMatchesWhatWasJustCreated(t *testing.T) {
	servers := StartTestCluster(t, 3, func(i int, c *Config) {
		c.SASLEnabledMechanisms, c.SASLSuperuser, c.SASLSuperuserPassword = "SCRAM-SHA-512", testSuperuser, testSuperPass
	})
	waitAllReady(t, servers)
	ctx := testCtx(t, 60*time.Second)
	var follower *Server
	deadline := time.Now().Add(20 * time.Second)
	for follower == nil {
		for _, s := range servers {
			if b, ok := s.node.MetaLeader(); ok && b.NodeID != s.cfg.NodeID {
				follower = s
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no metadata leader")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(follower.KafkaAddr().String()), scram512(testSuperuser, testSuperPass))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	br := cl.Broker(int(follower.cfg.NodeID)) // every request to the follower
	missed := 0
	const rounds = 10
	for i := 0; i < rounds; i++ {
		group := "g" + string(rune('a'+i))
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeGroup, group, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:eve", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		creq := kmsg.NewPtrCreateACLsRequest()
		creq.Creations = append(creq.Creations, c)
		cr, err := creq.RequestWith(ctx, br)
		if err != nil || cr.Results[0].ErrorCode != 0 {
			t.Fatalf("create: %v %+v", err, cr)
		}
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeGroup, kmsg.StringPtr(group), kmsg.ACLResourcePatternTypeLiteral
		f.Principal, f.Host = kmsg.StringPtr("User:eve"), kmsg.StringPtr("*")
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		dreq := kmsg.NewPtrDeleteACLsRequest()
		dreq.Filters = append(dreq.Filters, f)
		dr, err := dreq.RequestWith(ctx, br)
		if err != nil || dr.Results[0].ErrorCode != 0 {
			t.Fatalf("delete: %v %+v", err, dr)
		}
		if len(dr.Results[0].MatchingACLs) == 0 {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d DeleteAcls through a follower, right after the CreateAcls through it succeeded, deleted nothing and answered no error: the ACL stays", missed, rounds)
	}
}
