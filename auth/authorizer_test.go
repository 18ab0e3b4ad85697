package auth

import (
	"errors"
	"fmt"
	"testing"
)

// acl is an ACL of a topic, group or other resource, for tables.
func acl(rt ResourceType, name string, pt PatternType, principal, host string, op Operation, perm Permission) ACL {
	return ACL{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// authorizerOf authorizes by acls, with User:admin a superuser.
func authorizerOf(acls ...ACL) *Authorizer {
	set := NewACLs(acls)
	return NewAuthorizer(Superusers{User("admin"): {}}, func() *ACLs { return set })
}

// request is one decision asked of an authorizer, and its answer.
type request struct {
	user string
	host string
	op   Operation
	rt   ResourceType
	name string
	want bool
}

func (r request) String() string {
	return fmt.Sprintf("User:%s from %s %s %s %q", r.user, r.host, r.op, r.rt, r.name)
}

// TestAuthorizeFollowsKafkasStandardAuthorizer: literal, wildcard and
// prefixed resources, deny beating allow, the User:* principal, hosts,
// the operations that imply Describe and DescribeConfigs, All,
// superusers, and denial without an ACL. Several cases are the facts of
// Kafka's StandardAuthorizerTest.
func TestAuthorizeFollowsKafkasStandardAuthorizer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		acls     []ACL
		requests []request
	}{
		{"no ACLs denies everyone but superusers", nil, []request{
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "t", false},
			{"bob", "10.0.0.1", OpDescribe, ResourceCluster, ClusterName, false},
			{"ANONYMOUS", "10.0.0.1", OpRead, ResourceTopic, "t", false},
			{"admin", "10.0.0.1", OpAlter, ResourceCluster, ClusterName, true},
			{"admin", "10.0.0.1", OpDelete, ResourceTopic, "anything", true},
		}},
		{"a literal ACL is its name alone", []ACL{
			acl(ResourceTopic, "orders", PatternLiteral, "User:bob", Wildcard, OpRead, PermissionAllow),
		}, []request{
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "orders", true},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "orders2", false},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "order", false},
			{"bob", "10.0.0.1", OpWrite, ResourceTopic, "orders", false},
			{"alice", "10.0.0.1", OpRead, ResourceTopic, "orders", false},
		}},
		{"a Group ACL does not grant the Topic of the same name", []ACL{
			acl(ResourceGroup, "orders", PatternLiteral, "User:bob", Wildcard, OpAll, PermissionAllow),
		}, []request{
			{"bob", "10.0.0.1", OpRead, ResourceGroup, "orders", true},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "orders", false},
			{"bob", "10.0.0.1", OpDescribe, ResourceTransactionalID, "orders", false},
		}},
		{"the literal wildcard resource is every name of its type", []ACL{
			acl(ResourceTopic, "*", PatternLiteral, "User:bob", Wildcard, OpRead, PermissionAllow),
		}, []request{
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "orders", true},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "*", true},
			{"bob", "10.0.0.1", OpRead, ResourceGroup, "orders", false},
		}},
		{"a prefixed * is a prefix, not the wildcard", []ACL{
			acl(ResourceTopic, "*", PatternPrefixed, "User:bob", Wildcard, OpRead, PermissionAllow),
		}, []request{
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "orders", false},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "*orders", true},
		}},
		{"StandardAuthorizerTest.testPrefixAcls", []ACL{
			acl(ResourceTopic, "fooa", PatternPrefixed, "User:alice", Wildcard, OpAll, PermissionAllow),
			acl(ResourceTopic, "foobar", PatternLiteral, "User:bob", Wildcard, OpAll, PermissionAllow),
			acl(ResourceTopic, "f", PatternPrefixed, "User:bob", Wildcard, OpAll, PermissionAllow),
		}, []request{
			{"bob", "10.0.0.1", OpWrite, ResourceTopic, "foobarr", true},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "goobar", false},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "fooa", true},
			{"alice", "10.0.0.1", OpDescribe, ResourceTopic, "fooa", true},
			{"alice", "10.0.0.1", OpWrite, ResourceTopic, "bar", false},
			{"alice", "10.0.0.1", OpRead, ResourceTopic, "baz", false},
		}},
		{"StandardAuthorizerTest.testAuthorizationWithManyAcls", []ACL{
			acl(ResourceTopic, "green2", PatternLiteral, "User:*", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "green", PatternPrefixed, "User:bob", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "betamax4", PatternLiteral, "User:bob", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "betamax", PatternLiteral, "User:bob", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "beta", PatternPrefixed, "User:*", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "alpha", PatternPrefixed, "User:*", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "alp", PatternPrefixed, "User:bob", Wildcard, OpRead, PermissionDeny),
			acl(ResourceGroup, "*", PatternLiteral, "User:bob", Wildcard, OpWrite, PermissionAllow),
			acl(ResourceGroup, "wheel", PatternLiteral, "User:*", Wildcard, OpWrite, PermissionDeny),
		}, []request{
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "green1", true},
			{"bob", "10.0.0.1", OpWrite, ResourceGroup, "wheel", false},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "alpha", false},
			{"bob", "10.0.0.1", OpWrite, ResourceGroup, "arbitrary", true},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "ala", false},
			{"carol", "10.0.0.1", OpRead, ResourceTopic, "alpha2", true},
			{"carol", "10.0.0.1", OpRead, ResourceTopic, "betamax", true},
			{"carol", "10.0.0.1", OpRead, ResourceTopic, "green1", false},
		}},
		{"StandardAuthorizerTest.testDenyPrecedenceWithOperationAll", []ACL{
			acl(ResourceTopic, "foo", PatternLiteral, "User:alice", Wildcard, OpAll, PermissionDeny),
			acl(ResourceTopic, "foo", PatternPrefixed, "User:alice", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "foo", PatternLiteral, "User:*", Wildcard, OpAll, PermissionDeny),
			acl(ResourceTopic, "foo", PatternPrefixed, "User:*", Wildcard, OpDescribe, PermissionAllow),
		}, []request{
			{"alice", "10.0.0.1", OpWrite, ResourceTopic, "foo", false},
			{"alice", "10.0.0.1", OpRead, ResourceTopic, "foo", false},
			{"alice", "10.0.0.1", OpDescribe, ResourceTopic, "foo", false},
			{"alice", "10.0.0.1", OpRead, ResourceTopic, "foobar", true},
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "foo", false},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "foo", false},
			{"bob", "10.0.0.1", OpWrite, ResourceTopic, "foo", false},
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "foobaz", true},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "foobaz", false},
		}},
		{"StandardAuthorizerTest.testTopicAclWithOperationAll", []ACL{
			acl(ResourceTopic, "foo", PatternLiteral, "User:*", Wildcard, OpAll, PermissionAllow),
			acl(ResourceTopic, "bar", PatternPrefixed, "User:alice", Wildcard, OpAll, PermissionAllow),
			acl(ResourceTopic, "baz", PatternLiteral, "User:bob", Wildcard, OpAll, PermissionAllow),
		}, []request{
			{"alice", "10.0.0.1", OpWrite, ResourceTopic, "foo", true},
			{"alice", "10.0.0.1", OpDescribeConfigs, ResourceTopic, "bar", true},
			{"alice", "10.0.0.1", OpDescribe, ResourceTopic, "baz", false},
			{"bob", "10.0.0.1", OpWrite, ResourceTopic, "foo", true},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "bar", false},
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "baz", true},
			{"malory", "10.0.0.1", OpDescribe, ResourceTopic, "foo", true},
			{"malory", "10.0.0.1", OpWrite, ResourceTopic, "bar", false},
			{"malory", "10.0.0.1", OpRead, ResourceTopic, "baz", false},
		}},
		{"a deny of one operation leaves the others to the allows", []ACL{
			acl(ResourceTopic, "t", PatternLiteral, "User:bob", Wildcard, OpAll, PermissionAllow),
			acl(ResourceTopic, "t", PatternLiteral, "User:bob", Wildcard, OpWrite, PermissionDeny),
		}, []request{
			{"bob", "10.0.0.1", OpWrite, ResourceTopic, "t", false},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "t", true},
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "t", true},
		}},
		{"a wildcard-resource deny beats a literal allow", []ACL{
			acl(ResourceTopic, "t", PatternLiteral, "User:bob", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "*", PatternLiteral, "User:*", Wildcard, OpRead, PermissionDeny),
		}, []request{
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "t", false},
			{"admin", "10.0.0.1", OpRead, ResourceTopic, "t", true},
		}},
		{"operations that imply Describe and DescribeConfigs, when allowed", []ACL{
			acl(ResourceTopic, "read", PatternLiteral, "User:bob", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "write", PatternLiteral, "User:bob", Wildcard, OpWrite, PermissionAllow),
			acl(ResourceTopic, "delete", PatternLiteral, "User:bob", Wildcard, OpDelete, PermissionAllow),
			acl(ResourceTopic, "alter", PatternLiteral, "User:bob", Wildcard, OpAlter, PermissionAllow),
			acl(ResourceTopic, "create", PatternLiteral, "User:bob", Wildcard, OpCreate, PermissionAllow),
			acl(ResourceTopic, "alterconfigs", PatternLiteral, "User:bob", Wildcard, OpAlterConfigs, PermissionAllow),
			acl(ResourceTopic, "describe", PatternLiteral, "User:bob", Wildcard, OpDescribe, PermissionAllow),
			acl(ResourceTopic, "denied", PatternLiteral, "User:bob", Wildcard, OpAll, PermissionAllow),
			acl(ResourceTopic, "denied", PatternLiteral, "User:bob", Wildcard, OpRead, PermissionDeny),
		}, []request{
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "read", true},
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "write", true},
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "delete", true},
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "alter", true},
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "create", false},
			{"bob", "10.0.0.1", OpDescribeConfigs, ResourceTopic, "alterconfigs", true},
			{"bob", "10.0.0.1", OpDescribeConfigs, ResourceTopic, "alter", false},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "describe", false},
			{"bob", "10.0.0.1", OpAlterConfigs, ResourceTopic, "alterconfigs", true},
			// A deny of Read denies Read alone, not the Describe it would imply.
			{"bob", "10.0.0.1", OpDescribe, ResourceTopic, "denied", true},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "denied", false},
		}},
		{"StandardAuthorizerTest.testHostAddressAclValidation", []ACL{
			acl(ResourceTopic, "foo", PatternLiteral, "User:alice", "192.168.1.1", OpRead, PermissionDeny),
			acl(ResourceTopic, "foo", PatternLiteral, "User:alice", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "bar", PatternLiteral, "User:bob", "192.168.1.2", OpRead, PermissionAllow),
			acl(ResourceTopic, "bar", PatternLiteral, "User:*", "127.0.0.1", OpDescribe, PermissionAllow),
		}, []request{
			{"alice", "127.0.0.1", OpRead, ResourceTopic, "foo", true},
			{"alice", "127.0.0.1", OpRead, ResourceTopic, "bar", false},
			{"alice", "127.0.0.1", OpDescribe, ResourceTopic, "bar", true},
			{"alice", "192.168.1.1", OpRead, ResourceTopic, "foo", false},
			{"alice", "192.168.1.1", OpDescribe, ResourceTopic, "bar", false},
			{"alice", "192.168.1.2", OpRead, ResourceTopic, "foo", true},
			{"bob", "127.0.0.1", OpRead, ResourceTopic, "foo", false},
			{"bob", "127.0.0.1", OpDescribe, ResourceTopic, "bar", true},
			{"bob", "192.168.1.2", OpRead, ResourceTopic, "bar", true},
			{"bob", "192.168.1.2", OpDescribe, ResourceTopic, "bar", true},
			{"bob", "192.168.1.1", OpRead, ResourceTopic, "bar", false},
		}},
		{"hosts and principals compare as Kafka writes them", []ACL{
			acl(ResourceTopic, "v6", PatternLiteral, "User:bob", "0:0:0:0:0:0:0:1", OpRead, PermissionAllow),
			acl(ResourceTopic, "short", PatternLiteral, "User:bob", "::1", OpRead, PermissionAllow),
			acl(ResourceTopic, "colon", PatternLiteral, "User:CN=a:b,O=c", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "bare", PatternLiteral, "bob", Wildcard, OpRead, PermissionAllow),
			acl(ResourceTopic, "star", PatternLiteral, "User:*", Wildcard, OpRead, PermissionAllow),
		}, []request{
			{"bob", "0:0:0:0:0:0:0:1", OpRead, ResourceTopic, "v6", true},
			{"bob", "0:0:0:0:0:0:0:1", OpRead, ResourceTopic, "short", false},
			{"CN=a:b,O=c", "10.0.0.1", OpRead, ResourceTopic, "colon", true},
			{"bob", "10.0.0.1", OpRead, ResourceTopic, "bare", false},
			{"ANONYMOUS", "10.0.0.1", OpRead, ResourceTopic, "star", true},
			{"*", "10.0.0.1", OpRead, ResourceTopic, "v6", false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := authorizerOf(tc.acls...)
			for _, r := range tc.requests {
				if got := a.Authorize(User(r.user), r.host, r.op, r.rt, r.name); got != r.want {
					t.Errorf("%s: allowed %v, want %v", r, got, r.want)
				}
			}
		})
	}
}

// TestAuthorizeReadsTheACLsOfEachDecision: the authorizer decides by
// what its ACLs function returns at the time, and nil ACLs are none.
func TestAuthorizeReadsTheACLsOfEachDecision(t *testing.T) {
	var current *ACLs
	a := NewAuthorizer(nil, func() *ACLs { return current })
	bob := User("bob")
	if a.Authorize(bob, "10.0.0.1", OpRead, ResourceTopic, "t") {
		t.Fatal("allowed with nil ACLs")
	}
	current = NewACLs([]ACL{acl(ResourceTopic, "t", PatternLiteral, "User:bob", "*", OpRead, PermissionAllow)})
	if !a.Authorize(bob, "10.0.0.1", OpRead, ResourceTopic, "t") {
		t.Fatal("denied after the allow was added")
	}
	current = NewACLs(nil)
	if a.Authorize(bob, "10.0.0.1", OpRead, ResourceTopic, "t") {
		t.Fatal("allowed after the allow was removed")
	}
	if NewAuthorizer(nil, nil).Authorize(bob, "10.0.0.1", OpRead, ResourceTopic, "t") {
		t.Fatal("allowed without an ACLs function")
	}
}

// TestACLsKeepTheirOwnCopy: NewACLs and All copy, so no caller changes
// a set others share.
func TestACLsKeepTheirOwnCopy(t *testing.T) {
	in := []ACL{acl(ResourceTopic, "t", PatternLiteral, "User:bob", "*", OpRead, PermissionAllow)}
	s := NewACLs(in)
	in[0].ResourceName = "changed"
	out := s.All()
	out[0].Principal = "User:changed"
	if got := s.All(); len(got) != 1 || got[0].ResourceName != "t" || got[0].Principal != "User:bob" || s.Len() != 1 {
		t.Fatalf("the set changed through a caller's slice: %+v", got)
	}
	var none *ACLs
	if none.Len() != 0 || none.All() != nil || none.Matching(ACLFilter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}) != nil {
		t.Fatal("a nil set is not empty")
	}
}

func ptr(s string) *string { return &s }

// anyFilter matches every ACL (Kafka's AclBindingFilter.ANY).
var anyFilter = ACLFilter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}

// TestACLFilterMatchesAsKafka: every field of a filter, PatternMatch
// selecting the ACLs that apply to a name and PatternAny the ACLs of
// that exact name of any pattern type.
func TestACLFilterMatchesAsKafka(t *testing.T) {
	literal := acl(ResourceTopic, "foobar", PatternLiteral, "User:bob", "*", OpRead, PermissionAllow)
	wildcard := acl(ResourceTopic, "*", PatternLiteral, "User:bob", "*", OpRead, PermissionAllow)
	prefix := acl(ResourceTopic, "foo", PatternPrefixed, "User:alice", "10.0.0.1", OpWrite, PermissionDeny)
	otherPrefix := acl(ResourceTopic, "fox", PatternPrefixed, "User:bob", "*", OpRead, PermissionAllow)
	longer := acl(ResourceTopic, "foobarbaz", PatternPrefixed, "User:bob", "*", OpRead, PermissionAllow)
	group := acl(ResourceGroup, "foobar", PatternLiteral, "User:bob", "*", OpRead, PermissionAllow)
	all := []ACL{literal, wildcard, prefix, otherPrefix, longer, group}
	with := func(change func(*ACLFilter)) ACLFilter {
		f := anyFilter
		change(&f)
		return f
	}
	for _, tc := range []struct {
		name   string
		filter ACLFilter
		want   []ACL
	}{
		{"any", anyFilter, all},
		{"a resource type", with(func(f *ACLFilter) { f.ResourceType = ResourceGroup }), []ACL{group}},
		{"a name under PatternAny is that exact name",
			with(func(f *ACLFilter) { f.ResourceName = ptr("foobar") }), []ACL{literal, group}},
		{"* under PatternAny is the wildcard ACL alone",
			with(func(f *ACLFilter) { f.ResourceName = ptr("*") }), []ACL{wildcard}},
		{"a name under PatternLiteral",
			with(func(f *ACLFilter) { f.ResourceName, f.PatternType = ptr("foo"), PatternLiteral }), nil},
		{"a name under PatternPrefixed is that prefix exactly",
			with(func(f *ACLFilter) { f.ResourceName, f.PatternType = ptr("foo"), PatternPrefixed }), []ACL{prefix}},
		{"PatternPrefixed without a name",
			with(func(f *ACLFilter) { f.PatternType = PatternPrefixed }), []ACL{prefix, otherPrefix, longer}},
		{"PatternMatch: the ACLs that apply to the name",
			with(func(f *ACLFilter) {
				f.ResourceType, f.ResourceName, f.PatternType = ResourceTopic, ptr("foobar"), PatternMatch
			}),
			[]ACL{literal, wildcard, prefix}},
		{"PatternMatch of a name no literal names",
			with(func(f *ACLFilter) { f.ResourceName, f.PatternType = ptr("fox1"), PatternMatch }), []ACL{wildcard, otherPrefix}},
		{"PatternMatch without a name is every ACL",
			with(func(f *ACLFilter) { f.PatternType = PatternMatch }), all},
		{"a principal", with(func(f *ACLFilter) { f.Principal = ptr("User:alice") }), []ACL{prefix}},
		{"the wildcard principal is an ACL's, not every one",
			with(func(f *ACLFilter) { f.Principal = ptr("User:*") }), nil},
		{"a host", with(func(f *ACLFilter) { f.Host = ptr("10.0.0.1") }), []ACL{prefix}},
		{"the wildcard host", with(func(f *ACLFilter) { f.Host = ptr("*") }), []ACL{literal, wildcard, otherPrefix, longer, group}},
		{"an operation", with(func(f *ACLFilter) { f.Operation = OpWrite }), []ACL{prefix}},
		{"All is an ACL's operation, not every one", with(func(f *ACLFilter) { f.Operation = OpAll }), nil},
		{"a permission", with(func(f *ACLFilter) { f.Permission = PermissionAllow }), []ACL{literal, wildcard, otherPrefix, longer, group}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewACLs(all).Matching(tc.filter)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("matched\n %v\nwant\n %v", got, tc.want)
			}
			for _, a := range all {
				if m := tc.filter.Matches(a); m != contains(tc.want, a) {
					t.Errorf("Matches(%v) = %v", a, m)
				}
			}
		})
	}
}

func contains(acls []ACL, a ACL) bool {
	for _, b := range acls {
		if a == b {
			return true
		}
	}
	return false
}

// TestACLValidateAnswersKafkasMessages: CreateAcls refuses these ACLs with
// Kafka's INVALID_REQUEST messages, which are the errors' whole text.
func TestACLValidateAnswersKafkasMessages(t *testing.T) {
	good := acl(ResourceTopic, "t", PatternLiteral, "User:bob", "*", OpRead, PermissionAllow)
	with := func(change func(*ACL)) ACL {
		a := good
		change(&a)
		return a
	}
	for _, a := range []ACL{
		good,
		with(func(a *ACL) { a.PatternType, a.ResourceName = PatternPrefixed, "*" }),
		with(func(a *ACL) { a.ResourceType, a.ResourceName = ResourceCluster, ClusterName }),
		with(func(a *ACL) { a.ResourceType, a.Operation = ResourceUser, OpDescribeTokens }),
		with(func(a *ACL) { a.Operation, a.Permission = OpAll, PermissionDeny }),
		with(func(a *ACL) { a.Principal, a.Host = "User:*", "::1" }),
	} {
		if err := a.Validate(); err != nil {
			t.Errorf("%+v: %v", a, err)
		}
	}
	for _, tc := range []struct {
		acl  ACL
		want string
	}{
		{with(func(a *ACL) { a.ResourceType = ResourceCluster }), "The only valid name for the CLUSTER resource is kafka-cluster"},
		{with(func(a *ACL) { a.ResourceName = "" }), "Invalid empty resource name"},
		{with(func(a *ACL) { a.ResourceType = ResourceAny }), "Invalid resourceType ANY"},
		{with(func(a *ACL) { a.ResourceType = 0 }), "Invalid resourceType UNKNOWN"},
		{with(func(a *ACL) { a.ResourceType = 8 }), "Invalid resourceType UNKNOWN"},
		{with(func(a *ACL) { a.PatternType = PatternMatch }), "Invalid patternType MATCH"},
		{with(func(a *ACL) { a.PatternType = PatternAny }), "Invalid patternType ANY"},
		{with(func(a *ACL) { a.PatternType = 5 }), "Invalid patternType UNKNOWN"},
		{with(func(a *ACL) { a.Operation = OpAny }), "Invalid operation ANY"},
		{with(func(a *ACL) { a.Operation = 15 }), "Invalid operation UNKNOWN"},
		{with(func(a *ACL) { a.Permission = PermissionAny }), "Invalid permissionType ANY"},
		{with(func(a *ACL) { a.Permission = -1 }), "Invalid permissionType UNKNOWN"},
		{with(func(a *ACL) { a.Principal = "bob" }), `Invalid principal "bob": expected a string in format principalType:principalName`},
		{with(func(a *ACL) { a.Principal = "" }), `Invalid principal "": expected a string in format principalType:principalName`},
		{with(func(a *ACL) { a.Host = "" }), "Invalid empty host: want an IP address or *"},
		// Kafka's order: the broker's checks, then the controller's.
		{with(func(a *ACL) { a.ResourceType, a.ResourceName = ResourceAny, "" }), "Invalid empty resource name"},
		{with(func(a *ACL) { a.PatternType, a.Operation = PatternMatch, OpAny }), "Invalid patternType MATCH"},
	} {
		err := tc.acl.Validate()
		if !errors.Is(err, ErrInvalidACL) || err.Error() != tc.want {
			t.Errorf("%+v: %v, want ErrInvalidACL %q", tc.acl, err, tc.want)
		}
	}
	if err := with(func(a *ACL) { a.Principal = "bob" }).Validate(); !errors.Is(err, ErrInvalidPrincipal) {
		t.Errorf("an unparsable principal: %v, want ErrInvalidPrincipal too", err)
	}
}

// TestACLFilterValidateRefusesUnknownFields: DeleteAcls and DescribeAcls
// refuse a filter with a code Kafka does not know, and accept every
// known one.
func TestACLFilterValidateRefusesUnknownFields(t *testing.T) {
	for rt := ResourceAny; rt <= ResourceUser; rt++ {
		for pt := PatternAny; pt <= PatternPrefixed; pt++ {
			for op := OpAny; op <= OpDescribeTokens; op++ {
				for perm := PermissionAny; perm <= PermissionAllow; perm++ {
					f := ACLFilter{ResourceType: rt, PatternType: pt, Operation: op, Permission: perm}
					if err := f.Validate(); err != nil {
						t.Fatalf("%+v: %v", f, err)
					}
				}
			}
		}
	}
	with := func(change func(*ACLFilter)) ACLFilter {
		f := anyFilter
		change(&f)
		return f
	}
	for _, tc := range []struct {
		filter ACLFilter
		want   string
	}{
		{with(func(f *ACLFilter) { f.ResourceType = 0 }), "Unknown patternFilter."},
		{with(func(f *ACLFilter) { f.ResourceType = 8 }), "Unknown patternFilter."},
		{with(func(f *ACLFilter) { f.PatternType = 0 }), "Unknown patternFilter."},
		{with(func(f *ACLFilter) { f.PatternType = 5 }), "Unknown patternFilter."},
		{with(func(f *ACLFilter) { f.Operation = 0 }), "Unknown entryFilter."},
		{with(func(f *ACLFilter) { f.Operation = 15 }), "Unknown entryFilter."},
		{with(func(f *ACLFilter) { f.Permission = 4 }), "Unknown entryFilter."},
		{with(func(f *ACLFilter) { f.Permission = -3 }), "Unknown entryFilter."},
	} {
		err := tc.filter.Validate()
		if !errors.Is(err, ErrInvalidACL) || err.Error() != tc.want {
			t.Errorf("%+v: %v, want ErrInvalidACL %q", tc.filter, err, tc.want)
		}
	}
}

// TestKafkaNames: the enums print as Kafka's.
func TestKafkaNames(t *testing.T) {
	got := fmt.Sprint(ResourceTransactionalID, PatternPrefixed, OpIdempotentWrite, PermissionDeny, ResourceType(0), Operation(15), PatternType(-1), Permission(9))
	if want := "TRANSACTIONAL_ID PREFIXED IDEMPOTENT_WRITE DENY UNKNOWN UNKNOWN UNKNOWN UNKNOWN"; got != want {
		t.Errorf("names %q, want %q", got, want)
	}
}

// BenchmarkAuthorize is one decision among many ACLs of many names.
func BenchmarkAuthorize(b *testing.B) {
	var acls []ACL
	for i := range 10000 {
		acls = append(acls,
			acl(ResourceTopic, fmt.Sprintf("topic-%d", i), PatternLiteral, fmt.Sprintf("User:u%d", i%100), "*", OpRead, PermissionAllow),
			acl(ResourceTopic, fmt.Sprintf("team-%d-", i), PatternPrefixed, fmt.Sprintf("User:u%d", i%100), "*", OpWrite, PermissionAllow))
	}
	a := authorizerOf(acls...)
	p := User("u42")
	b.ResetTimer()
	for range b.N {
		if !a.Authorize(p, "10.0.0.1", OpDescribe, ResourceTopic, "team-142-orders") {
			b.Fatal("denied")
		}
	}
}
