package api

import (
	"fmt"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/transport"
)

// This file is authorization. Until ACLs are stored (issue 15's next
// step), a node that authenticates its clients (SASL or mutual TLS:
// Config.Authorize) lets only superusers (super.users and the bootstrap
// superuser) use the cluster-level APIs that manage credentials, as
// Kafka's authorizer does with no ACL granting them; a node that does not
// authenticate lets everyone, as Kafka without an authorizer does.

// operation is a Kafka ACL operation, as error messages name it.
type operation string

const (
	opDescribe operation = "DESCRIBE"
	opAlter    operation = "ALTER"
)

// clusterAllowed reports whether rc's principal may perform op on the
// cluster resource.
func (h *Handlers) clusterAllowed(rc *transport.RequestContext, op operation) bool {
	if !h.cfg.Authorize {
		return true
	}
	return h.cfg.Superusers.Contains(rc.Principal)
}

// clusterDenied is the message of a CLUSTER_AUTHORIZATION_FAILED.
func clusterDenied(rc *transport.RequestContext, op operation) string {
	return fmt.Sprintf("Principal %s is not authorized to %s the cluster", principalOf(rc), op)
}

func principalOf(rc *transport.RequestContext) auth.Principal {
	if rc.Principal == (auth.Principal{}) {
		return auth.Anonymous
	}
	return rc.Principal
}
