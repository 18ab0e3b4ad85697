package api

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

// This file is authorization: each handler asks whether the request's
// principal may perform Kafka's operation on Kafka's resource for its API
// (the mapping is KafkaApis'; each handler file says its own). A node
// that authenticates its clients (SASL or mutual TLS) has an Authorizer:
// ACLs from the metadata group, superusers allowed everything, and no
// matching ACL a denial, as Kafka's StandardAuthorizer with
// allow.everyone.if.no.acl.found=false. A node that does not authenticate
// has none and allows every request, as Kafka without an authorizer.

// Authorizer decides a principal's operation on a resource;
// *auth.Authorizer is one. Handlers call it from their connections'
// goroutines, concurrently; it must not block (a denial's read barrier is
// the handlers', metareplica.go).
type Authorizer interface {
	Authorize(p auth.Principal, host string, op auth.Operation, rt auth.ResourceType, name string) bool
}

// allowed reports whether rc's principal may perform op on the resource.
// A denial is a miss (metareplica.go): it stands only once the ACLs were
// brought up to the metadata leader's as of the request's arrival, so an
// ACL created through another node just before allows the request here.
// The barrier blocks the handler for about one round trip, once per
// request however many of its checks are denied.
func (h *Handlers) allowed(rc *transport.RequestContext, op auth.Operation, rt auth.ResourceType, name string) bool {
	if h.allowedHere(rc, op, rt, name) {
		return true
	}
	return h.syncMetadata(context.Background(), rc) && h.allowedHere(rc, op, rt, name)
}

// allowedHere is allowed as this replica decides it, without a read
// barrier: for a probe of a broad grant whose denial is no answer (the
// request goes on to check narrower resources, allowedUnder).
func (h *Handlers) allowedHere(rc *transport.RequestContext, op auth.Operation, rt auth.ResourceType, name string) bool {
	return h.cfg.Authorizer == nil || h.cfg.Authorizer.Authorize(principalOf(rc), clientIP(rc), op, rt, name)
}

// allowedUnder reports whether *broad (a probe of a cluster-wide grant,
// made with allowedHere and decided again by probe) or rc's own grant on
// the resource allows op. A denial of both consults the metadata leader
// (once per request, metareplica.go) and decides both again, so a grant
// of either kind created just before through another node counts.
func (h *Handlers) allowedUnder(rc *transport.RequestContext, broad *bool, probe func() bool, op auth.Operation, rt auth.ResourceType, name string) bool {
	if *broad || h.allowedHere(rc, op, rt, name) {
		return true
	}
	if !h.syncMetadata(context.Background(), rc) {
		return false
	}
	*broad = probe()
	return *broad || h.allowedHere(rc, op, rt, name)
}

// groupDenied is nil when rc may perform op on group, else a
// GROUP_AUTHORIZATION_FAILED refusal.
func (h *Handlers) groupDenied(rc *transport.RequestContext, op auth.Operation, group string) error {
	if h.allowed(rc, op, auth.ResourceGroup, group) {
		return nil
	}
	return refuse(kerr.GroupAuthorizationFailed, "Principal %s is not authorized to access group %s", principalOf(rc), group)
}

// topicDenied is nil when rc may perform op on topic, else a
// TOPIC_AUTHORIZATION_FAILED refusal.
func (h *Handlers) topicDenied(rc *transport.RequestContext, op auth.Operation, topic string) error {
	if h.allowed(rc, op, auth.ResourceTopic, topic) {
		return nil
	}
	return topicRefusal(rc, topic)
}

// topicRefusal is the TOPIC_AUTHORIZATION_FAILED refusal of topic.
func topicRefusal(rc *transport.RequestContext, topic string) error {
	return refuse(kerr.TopicAuthorizationFailed, "Principal %s is not authorized to access topic %s", principalOf(rc), topic)
}

// clusterDenied is nil when rc may perform op on the cluster, else a
// CLUSTER_AUTHORIZATION_FAILED refusal.
func (h *Handlers) clusterDenied(rc *transport.RequestContext, op auth.Operation) error {
	if h.allowed(rc, op, auth.ResourceCluster, auth.ClusterName) {
		return nil
	}
	return refuse(kerr.ClusterAuthorizationFailed, "Principal %s is not authorized to %s the cluster", principalOf(rc), opName(op))
}

// opName is an operation as Kafka's messages write it.
func opName(op auth.Operation) string {
	switch op {
	case auth.OpDescribe:
		return "DESCRIBE"
	case auth.OpAlter:
		return "ALTER"
	case auth.OpCreate:
		return "CREATE"
	}
	return "access"
}

func principalOf(rc *transport.RequestContext) auth.Principal {
	if rc == nil || rc.Principal == (auth.Principal{}) {
		return auth.Anonymous
	}
	return rc.Principal
}

// clientIP is the client's address as ACL hosts name it: "127.0.0.1"
// (RequestContext.ClientHost is Kafka's "/127.0.0.1").
func clientIP(rc *transport.RequestContext) string {
	if rc == nil {
		return ""
	}
	return strings.TrimPrefix(rc.ClientHost, "/")
}

// aclAPIDenied is the check of CreateAcls, DescribeAcls and DeleteAcls:
// SECURITY_DISABLED on a node without an authorizer, as Kafka answers
// (else an anonymous client of a node that does not authenticate could
// write the ACLs every other node enforces), then Cluster op.
func (h *Handlers) aclAPIDenied(rc *transport.RequestContext, op auth.Operation) error {
	if h.cfg.Authorizer == nil {
		return refuse(kerr.SecurityDisabled, "No Authorizer is configured.")
	}
	return h.clusterDenied(rc, op)
}

// TopicAuthorizer is groups.Config.AuthorizeTopic over a: whether a
// consumer-group member's principal may describe a topic its regex
// matches (Kafka 4.x leaves the others out of the subscription).
func TopicAuthorizer(a Authorizer) groups.TopicAuthorizer {
	return func(principal, host, topic string) bool {
		p, err := auth.ParsePrincipal(principal)
		return err == nil && a.Authorize(p, strings.TrimPrefix(host, "/"), auth.OpDescribe, auth.ResourceTopic, topic)
	}
}
