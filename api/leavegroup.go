package api

// LeaveGroup (key 13), versions 0–5.
// v0–v2: one member id. v1: throttle. v3: a batch of members by member or
// instance id, with a result each (KIP-345). v4: flexible. v5: reason per
// member (KIP-800, logged only).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) leaveGroup(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.LeaveGroupRequest](kreq)
	if err != nil {
		return nil, err
	}
	if err := h.groupDenied(rc, auth.OpRead, req.Group); err != nil {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = h.errorCode(err)
		return resp, nil
	}
	leaving := []groups.LeaveMember{{MemberID: req.MemberID}}
	if req.Version >= 3 {
		leaving = leaving[:0]
		for _, m := range req.Members {
			leaving = append(leaving, groups.LeaveMember{MemberID: m.MemberID, InstanceID: deref(m.InstanceID)})
		}
	}
	results, err := h.shardFor(req.Group).Coordinator.Leave(ctx, req.Group, leaving)
	if waitAborted(err) {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if err != nil {
		resp.ErrorCode = h.errorCode(err)
		return resp, nil
	}
	if req.Version < 3 {
		resp.ErrorCode = h.errorCode(results[0].Err)
		return resp, nil
	}
	for _, r := range results {
		m := kmsg.NewLeaveGroupResponseMember()
		m.MemberID, m.ErrorCode = r.MemberID, h.errorCode(r.Err)
		if r.InstanceID != "" {
			id := r.InstanceID
			m.InstanceID = &id
		}
		resp.Members = append(resp.Members, m)
	}
	return resp, nil
}
