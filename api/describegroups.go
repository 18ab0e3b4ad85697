package api

// DescribeGroups (key 15), versions 0–6.
// v1: throttle. v3: authorized operations (reported as not asked for).
// Needs Group DESCRIBE per group (GROUP_AUTHORIZATION_FAILED). v4: group.instance.id per
// member. v5: flexible. v6: error messages; an unknown group is
// GROUP_ID_NOT_FOUND (KIP-1043).
// An unknown group, or a consumer-protocol one (ConsumerGroupDescribe
// describes those), is Dead with no members (and before v6 no error); the
// protocol and the members' metadata and assignments are only given when
// Stable.
// A group id listed more than once is described once, at its first place
// (Kafka describes it at every place: a request repeating one group would
// otherwise be answered with as many copies of all its members).

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) describeGroups(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.DescribeGroupsRequest](kreq)
	if err != nil {
		return nil, err
	}
	ctx = groups.OneHold(ctx) // one hold for all the request's groups
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range distinct(req.Groups) {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		rg.AuthorizedOperations = math.MinInt32
		if err := h.groupDenied(rc, auth.OpDescribe, id); err != nil {
			rg.ErrorCode = h.errorCode(err)
			if req.Version >= 6 {
				rg.ErrorMessage = errMessage(err)
			}
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, err := h.shardFor(id).Coordinator.Describe(ctx, id)
		if err != nil {
			rg.ErrorCode = h.errorCode(err)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State, rg.ProtocolType, rg.Protocol = d.State, d.ProtocolType, d.Protocol
		if !d.Exists && req.Version >= 6 {
			msg := "Group " + id + " not found."
			if d.ConsumerProtocol {
				msg = "Group " + id + " is not a classic group."
			}
			rg.ErrorCode, rg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
		}
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.ClientID, rm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
			rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
			if m.InstanceID != "" {
				id := m.InstanceID
				rm.InstanceID = &id
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// distinct returns ids without repeats, in the order of first appearance.
func distinct(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
