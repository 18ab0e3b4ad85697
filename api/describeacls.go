package api

// DescribeAcls (key 29), versions 0–3: the ACLs matching one filter
// (auth.ACLFilter: Any values and null strings match everything, MATCH
// the ACLs that apply to a name), grouped by resource pattern, from this
// node's replica of the metadata group once a read barrier brought it up to
// the leader's (a listing has no miss to notice: every ACL acknowledged
// before the request is listed, through whichever node created it). A
// filter Kafka would not take is INVALID_REQUEST. Needs Cluster DESCRIBE
// (CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) describeACLs(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.DescribeACLsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := aclFilter(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host,
		req.Operation, req.PermissionType)
	if err := h.aclAPIDenied(rc, auth.OpDescribe); err != nil {
		resp.ErrorCode, resp.ErrorMessage = h.errorCode(err), errMessage(err)
		return resp, nil
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		return resp, nil
	}
	type pattern struct {
		rt   auth.ResourceType
		name string
		pt   auth.PatternType
	}
	byPattern := make(map[pattern]int)
	h.syncMetadata(ctx, rc) // if it fails, this replica's ACLs, as Kafka's broker answers
	for _, a := range h.acls.ACLs().Matching(f) {
		p := pattern{a.ResourceType, a.ResourceName, a.PatternType}
		i, ok := byPattern[p]
		if !ok {
			i = len(resp.Resources)
			byPattern[p] = i
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			resp.Resources = append(resp.Resources, r)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, e)
	}
	if req.Version == 0 {
		// v0 knows literal patterns only, as Kafka answers it.
		resp.Resources = slices.DeleteFunc(resp.Resources, func(r kmsg.DescribeACLsResponseResource) bool {
			return r.ResourcePatternType != kmsg.ACLResourcePatternType(auth.PatternLiteral)
		})
	}
	return resp, nil
}

// aclFilter is a DescribeAcls or DeleteAcls filter as auth reads it; a
// v0 request knows only literal patterns.
func aclFilter(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) auth.ACLFilter {
	f := auth.ACLFilter{
		ResourceType: auth.ResourceType(rt), ResourceName: name, PatternType: auth.PatternType(pt),
		Principal: principal, Host: host, Operation: auth.Operation(op), Permission: auth.Permission(perm),
	}
	if version == 0 {
		f.PatternType = auth.PatternLiteral
	}
	return f
}
