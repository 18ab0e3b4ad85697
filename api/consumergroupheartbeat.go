package api

// ConsumerGroupHeartbeat (key 68), versions 0–1 (KIP-848).
// v1: SubscribedTopicRegex, and the member makes its own member id
// (KIP-1082). A member joins at epoch 0, heartbeats at the epoch it was
// given, leaves at -1, and a static member leaves for a while at -2; the
// answer carries its epoch and, on a join, a full request or a change, its
// assigned partitions. The coordinator answers once the heartbeat's write
// has committed (groups.Coordinator.ConsumerHeartbeat).
// Needs Group READ (GROUP_AUTHORIZATION_FAILED) and, as Kafka 4.x checks,
// Topic DESCRIBE on every topic it subscribes to by name
// (TOPIC_AUTHORIZATION_FAILED).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) consumerGroupHeartbeat(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.ConsumerGroupHeartbeatRequest](kreq)
	if err != nil {
		return nil, err
	}
	hb := groups.ConsumerHeartbeatRequest{
		Version: req.Version, GroupID: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		InstanceID: req.InstanceID, RackID: req.RackID, RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		SubscribedTopicNames: req.SubscribedTopicNames, SubscribedTopicRegex: req.SubscribedTopicRegex,
		ServerAssignor: req.ServerAssignor, ClientID: rc.ClientID, ClientHost: rc.ClientHost,
	}
	if h.cfg.Authorizer != nil {
		hb.Principal = principalOf(rc).String()
	}
	if req.Topics != nil {
		hb.Owned = make([]groups.TopicIDPartitions, len(req.Topics))
		for i, t := range req.Topics {
			hb.Owned[i] = groups.TopicIDPartitions{TopicID: t.TopicID, Partitions: t.Partitions}
		}
	}
	var res groups.ConsumerHeartbeatResult
	if err = h.consumerHeartbeatDenied(rc, req); err == nil {
		res, err = h.shardFor(req.Group).Coordinator.ConsumerHeartbeat(ctx, hb)
	}
	if waitAborted(err) {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if err != nil {
		resp.ErrorCode = h.errorCode(err)
		if !errors.Is(err, groups.ErrNotCoordinator) {
			resp.ErrorMessage = errMessage(err)
		}
		return resp, nil
	}
	resp.MemberID, resp.MemberEpoch = &res.MemberID, res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
	if res.HasAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, len(res.Assignment))
		for i, tp := range res.Assignment {
			a.Topics[i] = kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: tp.TopicID, Partitions: tp.Partitions}
		}
		resp.Assignment = &a
	}
	return resp, nil
}

// consumerHeartbeatDenied is the authorization of a heartbeat: the group,
// then each subscribed topic.
func (h *Handlers) consumerHeartbeatDenied(rc *transport.RequestContext, req *kmsg.ConsumerGroupHeartbeatRequest) error {
	if err := h.groupDenied(rc, auth.OpRead, req.Group); err != nil {
		return err
	}
	for _, t := range req.SubscribedTopicNames {
		if err := h.topicDenied(rc, auth.OpDescribe, t); err != nil {
			return err
		}
	}
	return nil
}
