package api

// CreateAcls (key 30), versions 0–3 (KIP-11; v1: pattern types, KIP-290;
// v2: flexible). Each creation is checked as Kafka's AclControlManager
// does (auth.ACL.Validate; INVALID_REQUEST with its message) and the
// valid ones are written to the metadata group in one entry, forwarded to
// its leader from other nodes; creating an ACL that exists changes
// nothing. Needs Cluster ALTER, else every creation is
// CLUSTER_AUTHORIZATION_FAILED; a node that does not authenticate its
// clients answers SECURITY_DISABLED, as Kafka without an authorizer.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) createACLs(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.CreateACLsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	errs := make([]error, len(req.Creations))
	var valid []auth.ACL
	var at []int // the creation each valid ACL came from
	denied := h.aclAPIDenied(rc, auth.OpAlter)
	for i, c := range req.Creations {
		a := auth.ACL{
			ResourceType: auth.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: auth.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: auth.Operation(c.Operation), Permission: auth.Permission(c.PermissionType),
		}
		if req.Version == 0 {
			a.PatternType = auth.PatternLiteral
		}
		switch {
		case denied != nil:
			errs[i] = denied
		case a.Validate() != nil:
			errs[i] = refuse(kerr.InvalidRequest, "%s", a.Validate()) // Kafka's message, whole
		default:
			valid = append(valid, a)
			at = append(at, i)
		}
	}
	if len(valid) > 0 {
		if err := h.acls.CreateACLs(ctx, valid); err != nil {
			for _, i := range at {
				errs[i] = err
			}
		}
	}
	for _, err := range errs {
		r := kmsg.NewCreateACLsResponseResult()
		if err != nil {
			r.ErrorCode, r.ErrorMessage = h.controllerErrorCode(err), errMessage(err)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
