package api

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

// catchingUp is a MetadataReplica whose read barrier delivers what the
// leader already had: onSync runs at each barrier (registering a topic,
// granting an ACL), as a replica that applies the leader's entries then.
type catchingUp struct {
	mu     sync.Mutex
	syncs  []time.Time // the since of each barrier asked for
	fresh  bool
	onSync func()
}

func (c *catchingUp) EnsureFresh(ctx context.Context) error {
	if c.fresh {
		return nil
	}
	return c.SyncSince(ctx, time.Now())
}

func (c *catchingUp) SyncSince(_ context.Context, since time.Time) error {
	c.mu.Lock()
	c.syncs = append(c.syncs, since)
	f := c.onSync
	c.mu.Unlock()
	if f != nil {
		f()
	}
	return nil
}

func (c *catchingUp) ConfirmEverywhere(context.Context) error { return nil }

func (c *catchingUp) barriers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.syncs)
}

// A commit of a topic this replica does not hold yet is answered only
// after a read barrier, which finds it: no UNKNOWN_TOPIC_OR_PARTITION for
// a topic created through another node just before. A hit needs none.
func TestACommitOfATopicNotYetHereWaitsForTheLeadersRegistry(t *testing.T) {
	topics := newMemTopics(fsm.Topic{Name: "known", Partitions: 1})
	replica := &catchingUp{fresh: true}
	replica.onSync = func() { _ = topics.Create(context.Background(), fsm.Topic{Name: "new", Partitions: 2}) }
	h := newTestHandlers(t, Config{Metadata: replica}, topics)
	received := time.Now().Add(-time.Second)
	rc := &transport.RequestContext{Received: received}

	commit := func(topics ...string) *kmsg.OffsetCommitResponse {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, "g", -1
		for _, name := range topics {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = name
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := h.offsetCommit(context.Background(), rc, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.OffsetCommitResponse)
	}
	if resp := commit("known"); resp.Topics[0].Partitions[0].ErrorCode != 0 || replica.barriers() != 0 {
		t.Fatalf("a commit of a known topic: %v after %d barriers", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode), replica.barriers())
	}
	resp := commit("new", "never")
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		t.Errorf("a commit of a topic the leader registered: %v", err)
	}
	if code := resp.Topics[1].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("a commit of a topic no one registered: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
	if n := replica.barriers(); n == 0 || replica.syncs[0] != received {
		t.Fatalf("barriers %v, want them from the request's arrival %v", replica.syncs, received)
	}
}

// allowAfterSync is an Authorizer that allows once granted.
type allowAfterSync struct {
	mu      sync.Mutex
	granted bool
}

func (a *allowAfterSync) Authorize(auth.Principal, string, auth.Operation, auth.ResourceType, string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.granted
}

// A denial is a miss too: an ACL created through another node just before
// allows the request once the barrier brought it here. A replica that has
// not heard from the metadata leader lately is brought up to date before
// any request; when it cannot be, the connection closes.
func TestADenialWaitsForTheLeadersACLs(t *testing.T) {
	authz := &allowAfterSync{}
	replica := &catchingUp{fresh: true}
	replica.onSync = func() { authz.mu.Lock(); authz.granted = true; authz.mu.Unlock() }
	h := newTestHandlers(t, Config{Metadata: replica, Authorizer: authz}, newMemTopics(fsm.Topic{Name: "t", Partitions: 1}))
	rc := &transport.RequestContext{Received: time.Now()}
	if !h.allowed(rc, auth.OpDescribe, auth.ResourceTopic, "t") {
		t.Fatal("a request an ACL created just before allows was denied")
	}
	if replica.barriers() != 1 {
		t.Fatalf("%d barriers for one denial, want 1", replica.barriers())
	}
	if !h.allowed(rc, auth.OpDescribe, auth.ResourceTopic, "t") || replica.barriers() != 1 {
		t.Fatalf("an allowed request ran a barrier (%d in all)", replica.barriers())
	}

	replica.fresh = false
	if err := h.freshForAuthorization(context.Background()); err != nil || replica.barriers() != 2 {
		t.Fatalf("a stale replica: %v after %d barriers, want a barrier and nil", err, replica.barriers())
	}
	failing := &failingReplica{}
	h = newTestHandlers(t, Config{Metadata: failing, Authorizer: authz}, newMemTopics())
	if err := h.freshForAuthorization(context.Background()); err == nil {
		t.Fatal("a stale replica that cannot reach the leader served a request")
	}
}

type failingReplica struct{}

func (failingReplica) EnsureFresh(context.Context) error { return context.DeadlineExceeded }
func (failingReplica) SyncSince(context.Context, time.Time) error {
	return context.DeadlineExceeded
}

func (failingReplica) ConfirmEverywhere(context.Context) error { return context.DeadlineExceeded }

// confirmCounter counts ConfirmEverywhere calls and answers err.
type confirmCounter struct {
	catchingUp
	confirms int
	err      error
}

func (c *confirmCounter) ConfirmEverywhere(context.Context) error {
	c.confirms++
	return c.err
}

// A DeleteAcls that matches nothing (a retry of one answered
// REQUEST_TIMED_OUT finds the ACL gone here) is answered only once every
// live node is confirmed to hold what the leader holds: its success then
// means what the first attempt's would have, the ACL gone everywhere.
func TestADeleteThatMatchesNothingIsConfirmedEverywhere(t *testing.T) {
	replica := &confirmCounter{catchingUp: catchingUp{fresh: true}}
	h := newTestHandlers(t, Config{Metadata: replica, Authorizer: &allowAfterSync{granted: true}}, newMemTopics()).WithACLs(&memACLs{})
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Version = 3
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("gone"), kmsg.ACLResourcePatternTypeLiteral
	f.Principal, f.Host = kmsg.StringPtr("User:eve"), kmsg.StringPtr("*")
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	req.Filters = append(req.Filters, f)
	ask := func() int16 {
		resp, err := h.deleteACLs(context.Background(), &transport.RequestContext{Principal: auth.User("admin"), Received: time.Now()}, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode
	}
	if code := ask(); code != 0 || replica.confirms != 1 {
		t.Fatalf("DeleteAcls matching nothing: %v after %d confirmations, want success after 1", kerr.ErrorForCode(code), replica.confirms)
	}
	replica.err = context.DeadlineExceeded
	if code := ask(); code != kerr.RequestTimedOut.Code {
		t.Fatalf("DeleteAcls matching nothing, unconfirmed: %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(code))
	}
}
