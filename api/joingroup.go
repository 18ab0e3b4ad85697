package api

// JoinGroup (key 11), versions 0–9.
// v1: rebalance timeout (v0 uses the session timeout for both). v2:
// throttle. v4: a new member gets MEMBER_ID_REQUIRED and must rejoin with
// the id given (KIP-394). v5: group.instance.id (KIP-345). v6: flexible. v7:
// protocol type in the answer (KIP-559). v8: reason (KIP-800, logged only).
// v9: SkipAssignment in the answer (KIP-814).
// Needs Group READ (GROUP_AUTHORIZATION_FAILED, answered with no member
// id), checked before the group id, as in Kafka.

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) joinGroup(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.JoinGroupRequest](kreq)
	if err != nil {
		return nil, err
	}
	jr := groups.JoinRequest{
		GroupID:                req.Group,
		MemberID:               req.MemberID,
		InstanceID:             deref(req.InstanceID),
		ClientID:               rc.ClientID,
		ClientHost:             rc.ClientHost,
		ProtocolType:           req.ProtocolType,
		SessionTimeoutMs:       req.SessionTimeoutMillis,
		RebalanceTimeoutMs:     req.RebalanceTimeoutMillis,
		RequireKnownMemberID:   req.Version >= 4,
		SupportsSkipAssignment: req.Version >= 9,
	}
	if req.Version == 0 {
		jr.RebalanceTimeoutMs = req.SessionTimeoutMillis
	}
	for _, p := range req.Protocols {
		// Cloned: kmsg's byte fields point into the request frame, and a
		// member's metadata outlives the request (the frame's bytes went
		// back to queued.max.request.bytes when it was answered).
		jr.Protocols = append(jr.Protocols, fsm.Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	var res groups.JoinResult
	if err := h.groupDenied(rc, auth.OpRead, req.Group); err != nil {
		// Kafka answers a refused join without the member's id
		// (JoinGroupRequest.getErrorResponse).
		res = groups.JoinResult{Err: err}
	} else {
		res = h.shardFor(req.Group).Coordinator.Join(ctx, jr)
	}
	if waitAborted(res.Err) {
		return nil, res.Err
	}
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.MemberID = res.MemberID
	if res.Err != nil {
		resp.ErrorCode = h.errorCode(res.Err)
		resp.Generation = -1
		if req.Version < 7 {
			resp.Protocol = new(string)
		}
		return resp, nil
	}
	resp.Generation = res.Generation
	resp.LeaderID = res.Leader
	resp.SkipAssignment = res.SkipAssignment
	resp.Protocol = &res.Protocol
	if req.Version >= 7 {
		resp.ProtocolType = &res.ProtocolType
	}
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.MemberID, m.Metadata
		if m.InstanceID != "" {
			rm.InstanceID = &m.InstanceID
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
