package e2e

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// What one node acknowledged, every node knows (issue 32): on three
// `kcoord serve` processes that authenticate with SCRAM, for every ordered
// pair of nodes (A, B), a topic created through A is committed for at once
// through B, the coordinator of the group; a user created through A logs in
// through B at once; an ACL created through A allows a request on B at
// once, and once deleted through A denies it there at once. And `kcoord
// topics create` then `kcoord topics list` through one node, back to back,
// lists the topic. No step sleeps or retries: every request goes to the one
// node named, on a connection of its own.
func TestWhatOneNodeAcknowledgedEveryNodeKnows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three kcoord processes")
	}
	ctx := testContext(t, 5*time.Minute)
	const superuser, password = "admin", "agreement-secret"
	pwFile := filepath.Join(t.TempDir(), "superuser.password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	procs := startProcCluster(ctx, t, 3, "-c", "sasl.enabled.mechanisms=SCRAM-SHA-256",
		"--sasl-superuser", superuser, "--sasl-superuser-password-file", pwFile)
	// Every node coordinates groups of its own once the leadership
	// balance has spread the shards.
	waitLeadershipSettled(ctx, t, procs[0].http, 2*time.Second)
	admin := scram.Auth{User: superuser, Pass: password}.AsSha256Mechanism()
	nodes := make([]*pinnedNode, len(procs))
	for i, p := range procs {
		nodes[i] = &pinnedNode{id: int32(i + 1), addr: p.kafka, admin: admin}
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			if n.adminCl != nil {
				n.adminCl.Close()
			}
		}
	})

	t.Run("topics", func(t *testing.T) {
		const perPair = 100
		unknown, commits := 0, 0
		for _, a := range nodes {
			for _, b := range nodes {
				if a == b {
					continue
				}
				group, err := b.coordinatedGroup(ctx, fmt.Sprintf("agree-%d-%d", a.id, b.id))
				if err != nil {
					t.Fatal(err)
				}
				for k := range perPair {
					topic := fmt.Sprintf("agree-%d-%d-%03d", a.id, b.id, k)
					if err := a.createTopic(ctx, topic); err != nil {
						t.Fatalf("creating %s through node %d: %v", topic, a.id, err)
					}
					err := b.commit(ctx, group, topic, int64(k))
					commits++
					switch {
					case errors.Is(err, kerr.UnknownTopicOrPartition):
						unknown++
						t.Errorf("%s created through node %d, committed through node %d at once: %v", topic, a.id, b.id, err)
					case err != nil:
						t.Fatalf("committing %s through node %d: %v", topic, b.id, err)
					}
				}
			}
		}
		t.Logf("%d topics created and committed for at once through another node: %d UNKNOWN_TOPIC_OR_PARTITION", commits, unknown)
	})

	t.Run("cli", func(t *testing.T) {
		for _, n := range nodes {
			topic := fmt.Sprintf("cli-%d", n.id)
			cli := func(args ...string) string {
				t.Helper()
				args = append(args, "--bootstrap-server", n.addr, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", superuser)
				cmd := exec.CommandContext(ctx, kcoordBinary(t), args...)
				cmd.Env = append(cleanEnv(), "KCOORD_SASL_PASSWORD="+password)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("kcoord %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			cli("topics", "create", topic, "--partitions", "2")
			if out := cli("topics", "list"); !strings.Contains(out, topic) {
				t.Errorf("kcoord topics list through node %d right after creating %s through it:\n%s", n.id, topic, out)
			}
		}
	})

	t.Run("users", func(t *testing.T) {
		for _, a := range nodes {
			for _, b := range nodes {
				if a == b {
					continue
				}
				user, pass := fmt.Sprintf("user-%d-%d", a.id, b.id), fmt.Sprintf("pass-%d-%d", a.id, b.id)
				if err := a.createUser(ctx, user, pass); err != nil {
					t.Fatalf("creating %s through node %d: %v", user, a.id, err)
				}
				login := scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
				if _, err := b.metadata(ctx, login); err != nil {
					t.Errorf("%s created through node %d logging in through node %d at once: %v", user, a.id, b.id, err)
				}
			}
		}
	})

	t.Run("acls", func(t *testing.T) {
		const user, pass = "reader", "reader-secret"
		if err := nodes[0].createUser(ctx, user, pass); err != nil {
			t.Fatal(err)
		}
		reader := scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		for _, a := range nodes {
			for _, b := range nodes {
				if a == b {
					continue
				}
				topic := fmt.Sprintf("guarded-%d-%d", a.id, b.id)
				if err := a.createTopic(ctx, topic); err != nil {
					t.Fatal(err)
				}
				if err := b.describeTopic(ctx, reader, topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
					t.Fatalf("%s described %s through node %d before any ACL: %v", user, topic, b.id, err)
				}
				if err := a.acl(ctx, true, "User:"+user, topic); err != nil {
					t.Fatalf("creating the ACL through node %d: %v", a.id, err)
				}
				if err := b.describeTopic(ctx, reader, topic); err != nil {
					t.Errorf("an ACL created through node %d: %s describing %s through node %d at once: %v", a.id, user, topic, b.id, err)
				}
				if err := a.acl(ctx, false, "User:"+user, topic); err != nil {
					t.Fatalf("deleting the ACL through node %d: %v", a.id, err)
				}
				if err := b.describeTopic(ctx, reader, topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
					t.Errorf("an ACL deleted through node %d: %s describing %s through node %d at once: %v, want TOPIC_AUTHORIZATION_FAILED", a.id, user, topic, b.id, err)
				}
			}
		}
	})
}

// pinnedNode sends each request to one node only: the superuser's on one
// connection kept for the test, any other login's on a connection of its
// own.
type pinnedNode struct {
	id    int32
	addr  string
	admin sasl.Mechanism

	adminCl *kgo.Client
}

// request sends req to the node alone, logged in with mech, and returns
// its answer; a failed login or a broken connection is the error.
func (n *pinnedNode) request(ctx context.Context, mech sasl.Mechanism, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.SASL(mech))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// adminRequest is request as the superuser.
func (n *pinnedNode) adminRequest(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if n.adminCl == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.SASL(n.admin))
		if err != nil {
			return nil, err
		}
		n.adminCl = cl
	}
	resp, err := n.adminCl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s to node %d: %w", kmsg.NameForKey(req.Key()), n.id, err)
	}
	return resp, nil
}

// coordinatedGroup is a group id starting with prefix whose coordinator,
// as this node answers FindCoordinator, is this node.
func (n *pinnedNode) coordinatedGroup(ctx context.Context, prefix string) (string, error) {
	for i := range 1000 {
		group := fmt.Sprintf("%s-%d", prefix, i)
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = group, []string{group} // v0-3, v4+
		resp, err := n.adminRequest(ctx, req)
		if err != nil {
			return "", err
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		code, id := r.ErrorCode, r.NodeID
		if len(r.Coordinators) == 1 {
			code, id = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
		}
		if code == 0 && id == n.id {
			return group, nil
		}
	}
	return "", fmt.Errorf("node %d coordinates none of 1000 groups", n.id)
}

func (n *pinnedNode) createTopic(ctx context.Context, topic string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, -1
	req.Topics, req.TimeoutMillis = append(req.Topics, rt), 10000
	resp, err := n.adminRequest(ctx, req)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
}

// commit commits offset for partition 0 of topic as a simple consumer of
// group; the partition's error is the answer.
func (n *pinnedNode) commit(ctx context.Context, group, topic string, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := n.adminRequest(ctx, req)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
}

// createUser stores a SCRAM-SHA-256 credential for user, salted here as
// kadm salts it.
func (n *pinnedNode) createUser(ctx context.Context, user, pass string) error {
	salt := []byte("salt-of-" + user)
	const iterations = 4096
	salted, err := pbkdf2.Key(sha256.New, pass, salt, iterations, sha256.Size)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = user, 1, iterations, salt, salted
	req.Upsertions = append(req.Upsertions, up)
	resp, err := n.adminRequest(ctx, req)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode)
}

// metadata sends a Metadata request naming no topic, logged in with mech.
func (n *pinnedNode) metadata(ctx context.Context, mech sasl.Mechanism) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := n.request(ctx, mech, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// describeTopic is the error of topic in a Metadata answer to mech (or
// the request's own).
func (n *pinnedNode) describeTopic(ctx context.Context, mech sasl.Mechanism, topic string) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := n.request(ctx, mech, req)
	if err != nil {
		return fmt.Errorf("Metadata of %s to node %d: %w", topic, n.id, err)
	}
	return kerr.ErrorForCode(resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode)
}

// acl creates (or deletes) the ACL allowing principal to describe topic.
func (n *pinnedNode) acl(ctx context.Context, create bool, principal, topic string) error {
	const (
		resourceTopic  = kmsg.ACLResourceTypeTopic
		patternLiteral = kmsg.ACLResourcePatternTypeLiteral
		opDescribe     = kmsg.ACLOperationDescribe
		permAllow      = kmsg.ACLPermissionTypeAllow
	)
	if create {
		req := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = resourceTopic, topic, patternLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", opDescribe, permAllow
		req.Creations = append(req.Creations, c)
		resp, err := n.adminRequest(ctx, req)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.(*kmsg.CreateACLsResponse).Results[0].ErrorCode)
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = resourceTopic, kmsg.StringPtr(topic), patternLiteral
	f.Principal, f.Host, f.Operation, f.PermissionType = kmsg.StringPtr(principal), kmsg.StringPtr("*"), opDescribe, permAllow
	req.Filters = append(req.Filters, f)
	kresp, err := n.adminRequest(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.DeleteACLsResponse)
	if err := kerr.ErrorForCode(resp.Results[0].ErrorCode); err != nil {
		return err
	}
	if len(resp.Results[0].MatchingACLs) != 1 {
		return fmt.Errorf("DeleteAcls matched %d ACLs, want 1", len(resp.Results[0].MatchingACLs))
	}
	return nil
}
