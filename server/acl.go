package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
)

// This file is the ACLs of a node: stored in the metadata group
// (fsm.ACLCreate, fsm.ACLDelete), served by CreateAcls, DescribeAcls and
// DeleteAcls (api.ACLStore), and enforced by an auth.Authorizer on a node
// that authenticates its clients.

// aclStore is the api.ACLStore of a node: reads from the metadata FSM,
// writes through the metadata group (forwarded to its leader).
type aclStore struct {
	node    *cluster.Node
	fsm     *fsm.MetaFSM
	timeout time.Duration

	// index is the ACLs as of version (indexed), published for lock-free
	// reads; rebuilding takes mu.
	current atomic.Pointer[versionedACLs]
	mu      sync.Mutex
}

// versionedACLs is an index of the ACLs as of a MetaFSM.ACLsVersion.
type versionedACLs struct {
	version uint64
	acls    *auth.ACLs
}

func (s *aclStore) ACLs() *auth.ACLs { return s.index() }

func (s *aclStore) SyncedACLs(ctx context.Context) (*auth.ACLs, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.node.SyncMetadata(ctx); err != nil {
		return nil, apiError(err)
	}
	return s.ACLs(), nil
}

func (s *aclStore) CreateACLs(ctx context.Context, acls []auth.ACL) error {
	return s.apply(ctx, &fsm.ACLCreate{ACLs: toFSMACLs(acls)})
}

func (s *aclStore) DeleteACLs(ctx context.Context, acls []auth.ACL) error {
	return s.apply(ctx, &fsm.ACLDelete{ACLs: toFSMACLs(acls)})
}

func (s *aclStore) apply(ctx context.Context, cmd fsm.Command) error {
	b, err := fsm.Encode(cmd)
	if err != nil {
		return err
	}
	return apiError(s.node.ApplyMetadataChange(ctx, b, s.timeout))
}

// index is the stored ACLs as the authorizer reads them, rebuilt only
// when the metadata FSM's ACLs changed. Connection goroutines call it on
// every authorization: without a change it is two atomic loads; after
// one, a single caller rebuilds while the others wait for it.
func (s *aclStore) index() *auth.ACLs {
	v := s.fsm.ACLsVersion()
	if c := s.current.Load(); c != nil && c.version >= v {
		return c.acls
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.current.Load(); c != nil && c.version >= v {
		return c.acls // rebuilt while this caller waited
	}
	// The version is read before the ACLs: a change between the two is
	// in the index under the older version, and the next call rebuilds.
	v = s.fsm.ACLsVersion()
	c := &versionedACLs{version: v, acls: auth.NewACLs(fromFSMACLs(s.fsm.ACLs()))}
	s.current.Store(c)
	return c.acls
}

func toFSMACLs(acls []auth.ACL) []fsm.ACL {
	out := make([]fsm.ACL, len(acls))
	for i, a := range acls {
		out[i] = fsm.ACL{ResourceType: int8(a.ResourceType), ResourceName: a.ResourceName, PatternType: int8(a.PatternType),
			Principal: a.Principal, Host: a.Host, Operation: int8(a.Operation), Permission: int8(a.Permission)}
	}
	return out
}

func fromFSMACLs(acls []fsm.ACL) []auth.ACL {
	out := make([]auth.ACL, len(acls))
	for i, a := range acls {
		out[i] = auth.ACL{ResourceType: auth.ResourceType(a.ResourceType), ResourceName: a.ResourceName,
			PatternType: auth.PatternType(a.PatternType), Principal: a.Principal, Host: a.Host,
			Operation: auth.Operation(a.Operation), Permission: auth.Permission(a.Permission)}
	}
	return out
}
