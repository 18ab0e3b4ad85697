package fsm

import (
	"cmp"
	"fmt"
	"slices"
)

// ACL is one Kafka ACL (an AclBinding, KIP-11 and KIP-290) as the
// metadata group stores it: who (Principal, "User:alice" or "User:*"),
// from where (Host, an IP address as Java writes it or "*"), may or may
// not (Permission) do what (Operation) on which resources (ResourceType,
// and ResourceName matched as PatternType says). The codes are Kafka's
// wire codes, the ones auth.ACL has under the same field names: resource
// type 2 (topic) to 7 (user), pattern type 3 (literal) or 4 (prefixed),
// operation 2 (all) to 14 (describe tokens), permission 2 (deny) or 3
// (allow). Strings are kept as their exact bytes.
type ACL struct {
	ResourceType int8   `codec:"resource_type"`
	ResourceName string `codec:"resource_name"`
	PatternType  int8   `codec:"pattern_type"`
	Principal    string `codec:"principal"`
	Host         string `codec:"host"`
	Operation    int8   `codec:"operation"`
	Permission   int8   `codec:"permission"`
}

// The ranges of ACL's codes the metadata group stores.
const (
	aclResourceMin, aclResourceMax     int8 = 2, 7
	aclPatternMin, aclPatternMax       int8 = 3, 4
	aclOperationMin, aclOperationMax   int8 = 2, 14
	aclPermissionMin, aclPermissionMax int8 = 2, 3
)

// ACLPermissionDeny is Kafka's AclPermissionType DENY: an ACL that forbids
// what it matches, whatever grants it.
const ACLPermissionDeny int8 = 2

// Validate answers ErrInvalidACL for an ACL the metadata group refuses to
// store: one with an empty resource name, principal or host, or a code
// out of its range (the filter-only Any and Match values among them).
// Apply refuses an ACLCreate holding one; cluster.Node.ApplyMetadataChange
// refuses it before writing. The leader checks the rest (a principal's
// form, Kafka's messages; auth.ACL.Validate) before writing.
func (a ACL) Validate() error {
	switch {
	case a.ResourceName == "" || a.Principal == "" || a.Host == "":
		return fmt.Errorf("%w: %+v has an empty resource name, principal or host", ErrInvalidACL, a)
	case a.ResourceType < aclResourceMin || a.ResourceType > aclResourceMax,
		a.PatternType < aclPatternMin || a.PatternType > aclPatternMax,
		a.Operation < aclOperationMin || a.Operation > aclOperationMax,
		a.Permission < aclPermissionMin || a.Permission > aclPermissionMax:
		return fmt.Errorf("%w: %+v has a code out of range", ErrInvalidACL, a)
	}
	return nil
}

// compareACLs is the order ACLs are read and snapshotted in: by resource
// type, resource name, pattern type, principal, host, operation, then
// permission.
func compareACLs(a, b ACL) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType), cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host), cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission))
}

// ACLCreate is the body of ACLCreateType: it adds each ACL, and an ACL
// already stored stays as it is (creating it again succeeds, as in
// Kafka). Apply answers ErrInvalidACL and changes nothing when any of
// them is invalid (ACL.Validate).
type ACLCreate struct {
	ACLs []ACL `codec:"acls"`
}

// ACLDelete is the body of ACLDeleteType: it removes each ACL stored
// exactly as given, ignoring those that are not (the leader computed
// them from a DeleteAcls filter against the ACLs it held before writing).
type ACLDelete struct {
	ACLs []ACL `codec:"acls"`
}

// CommandType implements Command.
func (ACLCreate) CommandType() CommandType { return ACLCreateType }

// CommandType implements Command.
func (ACLDelete) CommandType() CommandType { return ACLDeleteType }

// aclState is the part of MetaFSM that ACLs own. Its methods run with
// MetaFSM's lock held.
type aclState struct {
	acls map[ACL]struct{}
	// version counts changes of acls on this replica (it is not
	// replicated state: only equal versions on one replica compare).
	version uint64
}

func newACLState() aclState {
	return aclState{acls: make(map[ACL]struct{})}
}

// apply applies one ACL command and returns Apply's response.
func (s *aclState) apply(cmd Command) any {
	changed := false
	switch c := cmd.(type) {
	case *ACLCreate:
		for _, a := range c.ACLs {
			if err := a.Validate(); err != nil {
				return err
			}
		}
		for _, a := range c.ACLs {
			if _, ok := s.acls[a]; !ok {
				s.acls[a] = struct{}{}
				changed = true
			}
		}
	case *ACLDelete:
		for _, a := range c.ACLs {
			if _, ok := s.acls[a]; ok {
				delete(s.acls, a)
				changed = true
			}
		}
	}
	if changed {
		s.version++
	}
	return nil
}

// snapshot returns the ACLs in compareACLs order.
func (s *aclState) snapshot() []ACL {
	out := make([]ACL, 0, len(s.acls))
	for a := range s.acls {
		out = append(out, a)
	}
	slices.SortFunc(out, compareACLs)
	return out
}

// restore replaces the ACLs with a snapshot's, and moves the version on.
func (s *aclState) restore(acls []ACL) {
	s.acls = make(map[ACL]struct{}, len(acls))
	for _, a := range acls {
		s.acls[a] = struct{}{}
	}
	s.version++
}

// ACLs returns every stored ACL, sorted by resource type, resource name,
// pattern type, principal, host, operation, then permission.
func (f *MetaFSM) ACLs() []ACL {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.acls.snapshot()
}

// ACLsVersion changes whenever the ACLs may have changed on this replica
// (an ACL created or deleted, a snapshot restored): the server rebuilds
// the auth.ACLs it authorizes by when it moves. Read it before ACLs:
// ACLs read after a version are at least that new, so a cache keyed by
// the version read first is never older than its key. It is 0, with no
// ACLs, on a new MetaFSM.
func (f *MetaFSM) ACLsVersion() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.acls.version
}
