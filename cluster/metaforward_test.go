package cluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// Only topic, SCRAM credential and ACL changes reach the metadata group
// through ApplyMetadataChange and the admin stream: a peer cannot forward,
// say, a node drain that way.
func TestMetadataChangeAcceptsOnlyTopicScramAndACLCommands(t *testing.T) {
	cred := fsm.ScramCredential{User: "alice", Mechanism: 1, Salt: []byte{1}, StoredKey: []byte{2}, ServerKey: []byte{3}, Iterations: 4096}
	noUser, badMechanism := cred, cred
	noUser.User, badMechanism.Mechanism = "", 3
	acl := fsm.ACL{ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:bob", Host: "*", Operation: 3, Permission: 3}
	noName, noPrincipal, noHost, anyOperation := acl, acl, acl, acl
	noName.ResourceName, noPrincipal.Principal, noHost.Host, anyOperation.Operation = "", "", "", 1
	for _, tc := range []struct {
		cmd  fsm.Command
		want bool
	}{
		{&fsm.TopicCreate{Topic: fsm.Topic{Name: "t", Partitions: 1, ReplicationFactor: 1}}, true},
		{&fsm.TopicDelete{Name: "t"}, true},
		{&fsm.ScramCredentialSet{Credential: cred}, true},
		{&fsm.ScramCredentialDelete{User: "alice", Mechanism: 2}, true},
		{&fsm.ACLCreate{ACLs: []fsm.ACL{acl}}, true},
		{&fsm.ACLDelete{ACLs: []fsm.ACL{acl, acl}}, true},
		{&fsm.NodeDrain{ID: 2}, false},
		{&fsm.TopicCreate{Topic: fsm.Topic{Name: "t", Partitions: 0}}, false},
		{&fsm.TopicDelete{}, false},
		{&fsm.ScramCredentialSet{Credential: noUser}, false},
		{&fsm.ScramCredentialSet{Credential: badMechanism}, false},
		{&fsm.ScramCredentialDelete{Mechanism: 1}, false},
		{&fsm.ACLCreate{}, false},
		{&fsm.ACLDelete{ACLs: []fsm.ACL{}}, false},
		{&fsm.ACLCreate{ACLs: []fsm.ACL{acl, noName}}, false},
		{&fsm.ACLCreate{ACLs: []fsm.ACL{noPrincipal}}, false},
		{&fsm.ACLDelete{ACLs: []fsm.ACL{noHost}}, false},
		{&fsm.ACLCreate{ACLs: []fsm.ACL{anyOperation}}, false},
	} {
		b, err := fsm.Encode(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := metadataChange(b); (err == nil) != tc.want {
			t.Errorf("%T %+v: metadataChange = %v, want accepted %v", tc.cmd, tc.cmd, err, tc.want)
		}
	}
	create, _ := fsm.Encode(&fsm.TopicCreate{Topic: fsm.Topic{Name: "t", Partitions: 1, ReplicationFactor: 1}})
	set, _ := fsm.Encode(&fsm.ScramCredentialSet{Credential: cred})
	aclCreate, _ := fsm.Encode(&fsm.ACLCreate{ACLs: []fsm.ACL{acl}})
	for name, cmd := range map[string][]byte{
		"empty":                   nil,
		"a body cut short":        create[:len(create)-3],
		"a newer body":            append([]byte{create[0], create[1] + 1}, create[2:]...),
		"a type byte alone":       {create[0]},
		"a SCRAM set cut short":   set[:len(set)-1],
		"a JSON SCRAM set":        {set[0], 1, '{', '}'},
		"an ACL create cut short": aclCreate[:len(aclCreate)-1],
		"a JSON ACL create":       {aclCreate[0], 1, '{', '}'},
	} {
		// Applied, any of these would panic every metadata replica.
		if _, _, err := metadataChange(cmd); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// TestAdminCodesKeepMetadataErrors: the FSM's answers survive the admin
// stream, so a forwarded change fails as it would on the leader.
func TestAdminCodesKeepMetadataErrors(t *testing.T) {
	for _, want := range []error{
		fsm.ErrTopicExists, fsm.ErrTopicNotFound, fsm.ErrScramCredentialNotFound, fsm.ErrInvalidScramCredential, fsm.ErrInvalidACL,
		fsm.ErrNodeNotFound, ErrLastActiveNode, ErrNotMetaLeader, ErrApplyTimeout,
	} {
		var resp adminResponse
		resp.Code, resp.Error = adminCode(fmt.Errorf("wrapped: %w", want))
		if got := adminError(resp); !errors.Is(got, want) {
			t.Errorf("%v came back over the admin stream as %v (code %q)", want, got, resp.Code)
		}
	}
}

// TestScramCredentialChangesThroughAFollowerReachEveryNode: a credential
// set through a node that does not lead the metadata group is forwarded
// to the leader and replicated to every node's MetaFSM with its exact
// bytes; the delete of a credential that is not there fails through the
// follower with fsm.ErrScramCredentialNotFound, and the leader refuses an
// invalid credential forwarded to it with fsm.ErrInvalidScramCredential.
func TestScramCredentialChangesThroughAFollowerReachEveryNode(t *testing.T) {
	follower, leader, other := metaCluster(t)
	nodes := []*testNode{follower, leader, other}
	metaFSM := metaOf
	t.Logf("changes go through node %d; node %d leads the metadata group", follower.ID(), leader.ID())
	// change applies cmd through the follower. A change refused as not
	// led (never applied: the leader moved) is tried again.
	change := func(cmd fsm.Command) error {
		t.Helper()
		b, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err = follower.ApplyMetadataChange(ctx, b, 2*time.Second)
			cancel()
			if !errors.Is(err, raft.ErrNotLeader) || time.Now().After(deadline) {
				return err
			}
			t.Logf("%s through node %d: %v; trying again", cmd.CommandType(), follower.ID(), err)
		}
	}

	cred := fsm.ScramCredential{
		User: "alice-\xfe", Mechanism: 2,
		Salt: []byte{0x00, 0xff, 0x80}, StoredKey: []byte("stored\xfe"), ServerKey: []byte{0xfe, 0x00},
		Iterations: 4096,
	}
	if err := change(&fsm.ScramCredentialSet{Credential: cred}); err != nil {
		t.Fatalf("set through the follower: %v", err)
	}
	for _, tn := range nodes {
		eventually(t, 5*time.Second, fmt.Sprintf("node %d holds the credential", tn.ID()), func() bool {
			got, ok := metaFSM(tn).ScramCredential(cred.User, cred.Mechanism)
			return ok && reflect.DeepEqual(got, cred)
		})
	}

	err := change(&fsm.ScramCredentialDelete{User: cred.User, Mechanism: 1})
	if !errors.Is(err, fsm.ErrScramCredentialNotFound) {
		t.Fatalf("delete of a missing credential through the follower: %v, want fsm.ErrScramCredentialNotFound", err)
	}
	if _, ok := metaFSM(leader).ScramCredential(cred.User, cred.Mechanism); !ok {
		t.Fatal("the refused delete took the user's other credential")
	}

	// A peer's forwarded body is checked again on the leader.
	bad, _ := fsm.Encode(&fsm.ScramCredentialSet{Credential: fsm.ScramCredential{User: "bob", Mechanism: 3}})
	resp, err := follower.adminCall(context.Background(), leader.RaftAddr(), adminRequest{Op: "topic-change", Command: bad, TimeoutMs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if err := adminError(resp); !errors.Is(err, fsm.ErrInvalidScramCredential) {
		t.Fatalf("the leader answered a forwarded invalid credential with %v (code %q), want fsm.ErrInvalidScramCredential", err, resp.Code)
	}

	if err := change(&fsm.ScramCredentialDelete{User: cred.User, Mechanism: cred.Mechanism}); err != nil {
		t.Fatalf("delete through the follower: %v", err)
	}
	for _, tn := range nodes {
		eventually(t, 5*time.Second, fmt.Sprintf("node %d has no credentials", tn.ID()), func() bool {
			return len(metaFSM(tn).ScramCredentials()) == 0
		})
	}
}

// TestACLChangesThroughAFollowerReachEveryNode: ACLs created through a
// node that does not lead the metadata group are forwarded to the leader
// and replicated to every node's MetaFSM with their exact bytes, creating
// them again changes nothing, an invalid create fails through the
// follower with fsm.ErrInvalidACL (and the leader refuses one forwarded
// to it alike), and a delete through the follower removes them
// everywhere.
func TestACLChangesThroughAFollowerReachEveryNode(t *testing.T) {
	follower, leader, other := metaCluster(t)
	nodes := []*testNode{follower, leader, other}
	metaFSM := metaOf
	t.Logf("changes go through node %d; node %d leads the metadata group", follower.ID(), leader.ID())
	// change applies cmd through the follower. A change refused as not
	// led (never applied: the leader moved) is tried again.
	change := func(cmd fsm.Command) error {
		t.Helper()
		b, err := fsm.Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err = follower.ApplyMetadataChange(ctx, b, 2*time.Second)
			cancel()
			if !errors.Is(err, raft.ErrNotLeader) || time.Now().After(deadline) {
				return err
			}
			t.Logf("%s through node %d: %v; trying again", cmd.CommandType(), follower.ID(), err)
		}
	}

	acls := []fsm.ACL{
		{ResourceType: 2, ResourceName: "orders-\xfe", PatternType: 4, Principal: "User:alice-\xfe", Host: "*", Operation: 3, Permission: 3},
		{ResourceType: 3, ResourceName: "*", PatternType: 3, Principal: "User:*", Host: "10.0.0.1", Operation: 2, Permission: 2},
	}
	if err := change(&fsm.ACLCreate{ACLs: acls}); err != nil {
		t.Fatalf("create through the follower: %v", err)
	}
	if err := change(&fsm.ACLCreate{ACLs: acls[:1]}); err != nil {
		t.Fatalf("creating a stored ACL again through the follower: %v", err)
	}
	for _, tn := range nodes {
		eventually(t, 5*time.Second, fmt.Sprintf("node %d holds the ACLs", tn.ID()), func() bool {
			return reflect.DeepEqual(metaFSM(tn).ACLs(), acls)
		})
	}

	// Refused on the follower before it is sent...
	bad := acls[0]
	bad.Permission = 1
	if err := change(&fsm.ACLCreate{ACLs: []fsm.ACL{bad}}); !errors.Is(err, fsm.ErrInvalidACL) {
		t.Fatalf("an invalid create through the follower: %v, want fsm.ErrInvalidACL", err)
	}
	// ...and a peer's forwarded body is checked again on the leader.
	body, _ := fsm.Encode(&fsm.ACLCreate{ACLs: []fsm.ACL{bad}})
	resp, err := follower.adminCall(context.Background(), leader.RaftAddr(), adminRequest{Op: "topic-change", Command: body, TimeoutMs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if err := adminError(resp); !errors.Is(err, fsm.ErrInvalidACL) {
		t.Fatalf("the leader answered a forwarded invalid ACL with %v (code %q), want fsm.ErrInvalidACL", err, resp.Code)
	}

	if err := change(&fsm.ACLDelete{ACLs: acls}); err != nil {
		t.Fatalf("delete through the follower: %v", err)
	}
	for _, tn := range nodes {
		eventually(t, 5*time.Second, fmt.Sprintf("node %d has no ACLs", tn.ID()), func() bool {
			return len(metaFSM(tn).ACLs()) == 0
		})
	}
}
