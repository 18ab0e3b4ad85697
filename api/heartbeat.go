package api

// Heartbeat (key 12), versions 0–4.
// v1: throttle. v3: group.instance.id (KIP-345). v4: flexible.
// Heartbeats are answered from the leader's memory and never touch Raft.
// Needs Group READ (GROUP_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) heartbeat(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.HeartbeatRequest](kreq)
	if err != nil {
		return nil, err
	}
	if err := h.groupDenied(rc, auth.OpRead, req.Group); err != nil {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = h.errorCode(err)
		return resp, nil
	}
	err = h.shardFor(req.Group).Coordinator.Heartbeat(ctx, groups.HeartbeatRequest{
		GroupID:    req.Group,
		MemberID:   req.MemberID,
		InstanceID: deref(req.InstanceID),
		Generation: req.Generation,
	})
	if waitAborted(err) {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = h.errorCode(err)
	return resp, nil
}
