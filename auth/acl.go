package auth

// This file is Kafka's ACL model (KIP-11, KIP-290): an ACL allows or
// denies a principal, from a host, an operation on resources of one type
// named literally or by prefix. The numbers are Kafka's wire codes
// (AclResourceType, AclPatternType, AclOperation, AclPermissionType).

// ResourceType is the type of resource an ACL is about.
type ResourceType int8

const (
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// ClusterName is the name of the one cluster resource ("kafka-cluster").
const ClusterName = "kafka-cluster"

// PatternType is how an ACL's resource name matches.
type PatternType int8

const (
	PatternAny      PatternType = 1 // filters only: any pattern type
	PatternMatch    PatternType = 2 // filters only: every ACL that matches the name
	PatternLiteral  PatternType = 3 // the name exactly, or every name when it is "*"
	PatternPrefixed PatternType = 4 // every name starting with it
)

// Wildcard is the literal resource name, principal and host that match
// every one.
const Wildcard = "*"

// Operation is what an ACL allows or denies.
type Operation int8

const (
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// Permission is whether an ACL allows or denies.
type Permission int8

const (
	PermissionAny   Permission = 1 // filters only
	PermissionDeny  Permission = 2
	PermissionAllow Permission = 3
)

// ACL is one access control entry bound to a resource pattern (Kafka's
// AclBinding). Principal is "User:alice" or "User:*"; Host an IP address
// or "*".
type ACL struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

// ACLFilter selects ACLs (Kafka's AclBindingFilter), for DescribeAcls and
// DeleteAcls: the Any values, and nil strings, match everything;
// PatternMatch matches the ACLs that would apply to ResourceName (the
// literal name, the literal wildcard, and every prefix of it).
type ACLFilter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}
