package api

// SyncGroup (key 14), versions 0–5.
// v1: throttle. v3: group.instance.id (KIP-345). v4: flexible. v5: protocol
// type and name in request and answer, checked against the group's
// (KIP-559); a v5 naming neither or only one is answered
// INCONSISTENT_GROUP_PROTOCOL here, before the coordinator sees it, as
// Kafka's KafkaApis does (areMandatoryProtocolTypeAndNamePresent).
// Needs Group READ (GROUP_AUTHORIZATION_FAILED).

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) syncGroup(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.SyncGroupRequest](kreq)
	if err != nil {
		return nil, err
	}
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return resp, nil
	}
	sr := groups.SyncRequest{
		GroupID:      req.Group,
		MemberID:     req.MemberID,
		InstanceID:   deref(req.InstanceID),
		Generation:   req.Generation,
		ProtocolType: deref(req.ProtocolType),
		Protocol:     deref(req.Protocol),
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			// Cloned: the assignment outlives the request frame it points into.
			sr.Assignments[a.MemberID] = bytes.Clone(a.MemberAssignment)
		}
	}
	var res groups.SyncResult
	if err := h.groupDenied(rc, auth.OpRead, req.Group); err != nil {
		res.Err = err
	} else {
		res = h.shardFor(req.Group).Coordinator.Sync(ctx, sr)
	}
	if waitAborted(res.Err) {
		return nil, res.Err
	}
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if res.Err != nil {
		resp.ErrorCode = h.errorCode(res.Err)
		return resp, nil
	}
	resp.MemberAssignment = res.Assignment
	if req.Version >= 5 {
		resp.ProtocolType, resp.Protocol = &res.ProtocolType, &res.Protocol
	}
	return resp, nil
}
