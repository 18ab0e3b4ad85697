package auth

import (
	"errors"
	"fmt"
	"strings"
)

// This file checks ACLs and filters as Kafka's CreateAcls, DeleteAcls and
// DescribeAcls do, and matches filters to ACLs (Kafka's
// AclBindingFilter.matches). Authorization is authorizer.go's.

// ErrInvalidACL is an ACL that CreateAcls refuses, or a DeleteAcls or
// DescribeAcls filter with an unknown field (INVALID_REQUEST). The errors
// that wrap it (ACL.Validate, ACLFilter.Validate) have Kafka's message,
// and only it, as their text, so the api package sends err.Error() to the
// client as its error message.
var ErrInvalidACL = errors.New("invalid ACL")

// invalidACL is an ErrInvalidACL whose text is Kafka's message alone.
// cause, when set, is what made it (a principal's ErrInvalidPrincipal).
type invalidACL struct {
	msg   string
	cause error
}

func (e *invalidACL) Error() string        { return e.msg }
func (e *invalidACL) Is(target error) bool { return target == ErrInvalidACL }
func (e *invalidACL) Unwrap() error        { return e.cause }

func invalidf(format string, args ...any) error {
	return &invalidACL{msg: fmt.Sprintf(format, args...)}
}

// Validate answers an error wrapping ErrInvalidACL, with Kafka's message,
// for an ACL that CreateAcls refuses, checked in the order a Kafka broker
// and its controller check them (AclApis.handleCreateAcls, then
// AclControlManager.validateNewAcl): a cluster resource not named
// "kafka-cluster", an empty resource name, a resource type that is Any or
// unknown, a pattern type other than Literal and Prefixed, an operation
// that is Any or unknown, a permission other than Allow and Deny. Then,
// beyond Kafka (which stores such an ACL and never matches it), a
// principal ParsePrincipal refuses (the error wraps ErrInvalidPrincipal
// too) and an empty host.
func (a ACL) Validate() error {
	switch {
	case a.ResourceType == ResourceCluster && a.ResourceName != ClusterName:
		return invalidf("The only valid name for the CLUSTER resource is %s", ClusterName)
	case a.ResourceName == "":
		return invalidf("Invalid empty resource name")
	case a.ResourceType < ResourceTopic || a.ResourceType > ResourceUser:
		return invalidf("Invalid resourceType %s", a.ResourceType)
	case a.PatternType != PatternLiteral && a.PatternType != PatternPrefixed:
		return invalidf("Invalid patternType %s", a.PatternType)
	case a.Operation < OpAll || a.Operation > OpDescribeTokens:
		return invalidf("Invalid operation %s", a.Operation)
	case a.Permission != PermissionDeny && a.Permission != PermissionAllow:
		return invalidf("Invalid permissionType %s", a.Permission)
	}
	if _, err := ParsePrincipal(a.Principal); err != nil {
		return &invalidACL{msg: fmt.Sprintf("Invalid principal %q: expected a string in format principalType:principalName", a.Principal), cause: err}
	}
	if a.Host == "" {
		return invalidf("Invalid empty host: want an IP address or %s", Wildcard)
	}
	return nil
}

// Validate answers an error wrapping ErrInvalidACL, with Kafka's message,
// for a filter with a field whose code Kafka does not know (UNKNOWN):
// "Unknown patternFilter." for the resource or pattern type,
// "Unknown entryFilter." for the operation or permission
// (AclControlManager.validateFilter). Every known value is valid in a
// filter, the Any ones and PatternMatch included.
func (f ACLFilter) Validate() error {
	switch {
	case f.ResourceType < ResourceAny || f.ResourceType > ResourceUser,
		f.PatternType < PatternAny || f.PatternType > PatternPrefixed:
		return invalidf("Unknown patternFilter.")
	case f.Operation < OpAny || f.Operation > OpDescribeTokens,
		f.Permission < PermissionAny || f.Permission > PermissionAllow:
		return invalidf("Unknown entryFilter.")
	}
	return nil
}

// Matches reports whether f selects a, as Kafka's AclBindingFilter.matches:
// each Any value and nil string matches every ACL; ResourceName matches
// exactly under PatternAny or the ACL's own pattern type, and under
// PatternMatch it matches every ACL that applies to that name (a literal
// ACL of the name or of "*", a prefixed ACL whose name starts it).
// Principal and Host are compared as strings ("User:*" and "*" match
// only ACLs of those).
func (f ACLFilter) Matches(a ACL) bool {
	return f.matchesPattern(a) &&
		(f.Principal == nil || *f.Principal == a.Principal) &&
		(f.Host == nil || *f.Host == a.Host) &&
		(f.Operation == OpAny || f.Operation == a.Operation) &&
		(f.Permission == PermissionAny || f.Permission == a.Permission)
}

// matchesPattern is ResourcePatternFilter.matches.
func (f ACLFilter) matchesPattern(a ACL) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != a.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != a.PatternType {
		return false
	}
	switch {
	case f.ResourceName == nil:
		return true
	case f.PatternType == PatternAny || f.PatternType == a.PatternType:
		return *f.ResourceName == a.ResourceName
	}
	name := *f.ResourceName // PatternMatch
	switch a.PatternType {
	case PatternLiteral:
		return name == a.ResourceName || a.ResourceName == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, a.ResourceName)
	}
	return false
}

// String is the type's name in Kafka's ResourceType enum ("TOPIC"),
// "UNKNOWN" for a code it does not know.
func (t ResourceType) String() string {
	switch t {
	case ResourceAny:
		return "ANY"
	case ResourceTopic:
		return "TOPIC"
	case ResourceGroup:
		return "GROUP"
	case ResourceCluster:
		return "CLUSTER"
	case ResourceTransactionalID:
		return "TRANSACTIONAL_ID"
	case ResourceDelegationToken:
		return "DELEGATION_TOKEN"
	case ResourceUser:
		return "USER"
	}
	return "UNKNOWN"
}

// String is the type's name in Kafka's PatternType enum ("LITERAL"),
// "UNKNOWN" for a code it does not know.
func (t PatternType) String() string {
	switch t {
	case PatternAny:
		return "ANY"
	case PatternMatch:
		return "MATCH"
	case PatternLiteral:
		return "LITERAL"
	case PatternPrefixed:
		return "PREFIXED"
	}
	return "UNKNOWN"
}

// operationNames are Kafka's AclOperation names, by code.
var operationNames = [...]string{
	OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE", OpCreate: "CREATE",
	OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION",
	OpDescribeConfigs: "DESCRIBE_CONFIGS", OpAlterConfigs: "ALTER_CONFIGS",
	OpIdempotentWrite: "IDEMPOTENT_WRITE", OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS",
}

// String is the operation's name in Kafka's AclOperation enum ("READ"),
// "UNKNOWN" for a code it does not know.
func (o Operation) String() string {
	if o >= OpAny && int(o) < len(operationNames) {
		return operationNames[o]
	}
	return "UNKNOWN"
}

// String is the permission's name in Kafka's AclPermissionType enum
// ("ALLOW"), "UNKNOWN" for a code it does not know.
func (p Permission) String() string {
	switch p {
	case PermissionAny:
		return "ANY"
	case PermissionDeny:
		return "DENY"
	case PermissionAllow:
		return "ALLOW"
	}
	return "UNKNOWN"
}
