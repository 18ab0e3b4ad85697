package auth

import (
	"slices"
	"strings"
)

// ACLs is an immutable set of ACLs indexed for Authorize: by resource
// type, then literal name (the wildcard "*" among them) and prefixed
// name, so one decision looks at the ACLs of its resource alone. Built
// once (NewACLs) each time the ACLs change and then shared: its methods
// are safe for concurrent use, and a nil *ACLs is the empty set.
type ACLs struct {
	all    []ACL
	byType map[ResourceType]*aclIndex
}

// aclIndex is the ACLs of one resource type.
type aclIndex struct {
	literal  map[string][]aclEntry // by name; Wildcard's match every name
	prefixed map[string][]aclEntry // by prefix
	// prefixLens are the lengths of the prefixes, ascending, each once:
	// a name's candidate prefixes are its first n bytes for each n.
	prefixLens []int
}

// aclEntry is the part of an ACL Authorize compares, its principal
// parsed once.
type aclEntry struct {
	principal  Principal
	parsed     bool // false: a principal without a colon, which matches none
	host       string
	operation  Operation
	permission Permission
}

// wildcardPrincipal is "User:*", which ACLs name to match every principal.
var wildcardPrincipal = User(Wildcard)

// NewACLs indexes acls (it keeps a copy). The server builds one each time
// MetaFSM's ACLs change and hands it to the Authorizer.
func NewACLs(acls []ACL) *ACLs {
	s := &ACLs{all: slices.Clone(acls), byType: make(map[ResourceType]*aclIndex)}
	for _, a := range s.all {
		idx := s.byType[a.ResourceType]
		if idx == nil {
			idx = &aclIndex{literal: make(map[string][]aclEntry), prefixed: make(map[string][]aclEntry)}
			s.byType[a.ResourceType] = idx
		}
		// As Kafka's StandardAcl.kafkaPrincipal: the type up to the
		// first colon, the name after it.
		typ, name, ok := strings.Cut(a.Principal, ":")
		e := aclEntry{principal: Principal{Type: typ, Name: name}, parsed: ok, host: a.Host, operation: a.Operation, permission: a.Permission}
		switch a.PatternType {
		case PatternLiteral:
			idx.literal[a.ResourceName] = append(idx.literal[a.ResourceName], e)
		case PatternPrefixed:
			if _, seen := idx.prefixed[a.ResourceName]; !seen {
				idx.prefixLens = append(idx.prefixLens, len(a.ResourceName))
			}
			idx.prefixed[a.ResourceName] = append(idx.prefixed[a.ResourceName], e)
		}
	}
	for _, idx := range s.byType {
		slices.Sort(idx.prefixLens)
		idx.prefixLens = slices.Compact(idx.prefixLens)
	}
	return s
}

// All returns a copy of the ACLs, in the order NewACLs was given them.
func (s *ACLs) All() []ACL {
	if s == nil {
		return nil
	}
	return slices.Clone(s.all)
}

// Len is the number of ACLs.
func (s *ACLs) Len() int {
	if s == nil {
		return 0
	}
	return len(s.all)
}

// Matching returns the ACLs f matches (ACLFilter.Matches), in the order
// of All: what DescribeAcls answers and DeleteAcls deletes for f.
func (s *ACLs) Matching(f ACLFilter) []ACL {
	var out []ACL
	if s != nil {
		for _, a := range s.all {
			if f.Matches(a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// Authorizer decides what principals may do, as Kafka's StandardAuthorizer
// with allow.everyone.if.no.acl.found=false. The Kafka handlers'
// goroutines call Authorize concurrently.
type Authorizer struct {
	super Superusers
	acls  func() *ACLs
}

// NewAuthorizer returns an authorizer that allows super everything and
// decides for everyone else by the ACLs acls returns. Authorize calls
// acls on every decision, from many goroutines at once, so it must be
// cheap and safe for concurrent use: the server returns the ACLs it built
// last, rebuilding them when MetaFSM.ACLsVersion moves. A nil acls, or
// one returning nil, is no ACLs.
func NewAuthorizer(super Superusers, acls func() *ACLs) *Authorizer {
	return &Authorizer{super: super, acls: acls}
}

// Authorize reports whether p, connected from host, may do op on the
// resource of type rt named name (a literal name: ClusterName for the
// cluster). As Kafka's StandardAuthorizer: a superuser may do everything;
// otherwise the ACLs that apply are those of rt (never another type's
// of the same name) that are literal of name or of "*", or prefixed
// with a prefix of name, and of them those whose principal is p or
// "User:*" and whose host is host or "*". Any such ACL that denies op or
// All denies; otherwise one that allows op or All, or an operation
// implying op (Read, Write, Delete and Alter imply Describe; AlterConfigs
// implies DescribeConfigs; a deny implies nothing), allows; otherwise p
// is denied, there being no ACL or none that allows.
//
// host is the client's IP address as Kafka writes it in ACLs, Java's
// InetAddress.getHostAddress: "127.0.0.1", and IPv6 as eight groups of
// lowercase hex without "::" ("0:0:0:0:0:0:0:1"), never brackets or a
// port. It is transport's RequestContext.ClientHost without its leading
// "/". ACL hosts are compared with it as strings, so an ACL for "::1"
// matches no client.
func (a *Authorizer) Authorize(p Principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.super.Contains(p) {
		return true
	}
	var s *ACLs
	if a.acls != nil {
		s = a.acls()
	}
	if s == nil {
		return false
	}
	idx := s.byType[rt]
	if idx == nil {
		return false
	}
	var d decision
	d.check(idx.literal[name], p, host, op)
	if name != Wildcard {
		d.check(idx.literal[Wildcard], p, host, op)
	}
	for _, n := range idx.prefixLens {
		if n > len(name) || d.denied {
			break
		}
		d.check(idx.prefixed[name[:n]], p, host, op)
	}
	return d.allowed && !d.denied
}

// decision gathers what the ACLs that apply to a resource say.
type decision struct {
	allowed, denied bool
}

// check folds entries into d (Kafka's StandardAuthorizerData.findResult
// for each).
func (d *decision) check(entries []aclEntry, p Principal, host string, op Operation) {
	for _, e := range entries {
		if d.denied {
			return
		}
		if !e.parsed || (e.principal != p && e.principal != wildcardPrincipal) {
			continue
		}
		if e.host != Wildcard && e.host != host {
			continue
		}
		switch e.permission {
		case PermissionDeny:
			d.denied = d.denied || e.operation == OpAll || e.operation == op
		case PermissionAllow:
			d.allowed = d.allowed || e.operation == OpAll || e.operation == op || implies(e.operation, op)
		}
	}
}

// implies reports whether an ACL allowing granted allows op too.
func implies(granted, op Operation) bool {
	switch op {
	case OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}
