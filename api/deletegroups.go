package api

// DeleteGroups (key 42), versions 0–2.
// v1: no change. v2: flexible.
// Only Empty groups can be deleted (NON_EMPTY_GROUP otherwise); a group
// goes with its committed offsets, through Raft. Needs Group DELETE per
// group (GROUP_AUTHORIZATION_FAILED).
// A group named more than once is deleted and answered once, as Kafka's
// KafkaApis.handleDeleteGroupsRequest takes the distinct names first.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) deleteGroups(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.DeleteGroupsRequest](kreq)
	if err != nil {
		return nil, err
	}
	ctx = groups.OneHold(ctx) // one hold for all the request's groups
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range distinct(req.Groups) {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		err := h.groupDenied(rc, auth.OpDelete, id)
		if err == nil {
			err = h.shardFor(id).Coordinator.Delete(ctx, id)
		}
		rg.ErrorCode = h.errorCode(err)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
