package api

// DeleteAcls (key 31), versions 0–3: deletes the ACLs matching each filter
// (as DescribeAcls matches them) and answers, per filter, the ACLs it
// deleted. The matches are taken from this node's replica and deleted in
// one metadata-group entry, forwarded to its leader from other nodes; the
// replica is first brought up to the leader's applied index, so that an
// ACL created through another node just before is matched; an
// ACL matched by two filters is deleted once and reported under both. A
// filter Kafka would not take is INVALID_REQUEST. Needs Cluster ALTER
// (CLUSTER_AUTHORIZATION_FAILED on every filter).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) deleteACLs(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.DeleteACLsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	denied := h.aclAPIDenied(rc, auth.OpAlter)
	errs := make([]error, len(req.Filters))
	matched := make([][]auth.ACL, len(req.Filters))
	var current *auth.ACLs
	if denied == nil {
		var err error
		if current, err = h.acls.SyncedACLs(ctx); err != nil {
			denied = err // answered on every filter, NOT_CONTROLLER or REQUEST_TIMED_OUT
		}
	}
	var doomed []auth.ACL
	seen := make(map[auth.ACL]bool)
	for i, rf := range req.Filters {
		f := aclFilter(req.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host,
			rf.Operation, rf.PermissionType)
		if denied != nil {
			errs[i] = denied
			continue
		}
		if err := f.Validate(); err != nil {
			errs[i] = refuse(kerr.InvalidRequest, "%s", err)
			continue
		}
		matched[i] = current.Matching(f)
		for _, a := range matched[i] {
			if !seen[a] {
				seen[a] = true
				doomed = append(doomed, a)
			}
		}
	}
	if denied == nil {
		// Applying the deletes confirms them on every live node; a
		// request that matched nothing (perhaps a retry of one answered
		// REQUEST_TIMED_OUT) confirms what the leader holds instead, so
		// that either answer means the ACLs are gone everywhere.
		var err error
		if len(doomed) > 0 {
			err = h.acls.DeleteACLs(ctx, doomed)
		} else {
			err = h.confirmEverywhere(ctx)
		}
		if err != nil {
			for i := range errs {
				if errs[i] == nil {
					errs[i], matched[i] = err, nil
				}
			}
		}
	}
	for i := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		if errs[i] != nil {
			r.ErrorCode, r.ErrorMessage = h.controllerErrorCode(errs[i]), errMessage(errs[i])
		}
		for _, a := range matched[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			m.Principal, m.Host = a.Principal, a.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
