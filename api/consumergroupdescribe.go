package api

// ConsumerGroupDescribe (key 69), versions 0–1 (KIP-848).
// v1: each member's type (KIP-1099: classic or consumer protocol). Each group is described as its last
// committed write left it, confirmed by a quorum: its state, group and
// assignment epochs, assignor, and per member its subscription, assigned
// partitions and target. An unknown group, or a classic one, is
// GROUP_ID_NOT_FOUND with Kafka's message; an empty id INVALID_GROUP_ID.
// Needs Group DESCRIBE per group (GROUP_AUTHORIZATION_FAILED), the empty
// id included, as Kafka authorizes each group before its coordinator
// checks the id; and, as Kafka 4.x checks, Topic DESCRIBE on every topic
// its members subscribe to by name or are assigned (else the group is
// TOPIC_AUTHORIZATION_FAILED). Authorized operations are not reported.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

// ConsumerGroupDescribe's member types (v1).
const (
	classicMemberType  int8 = 0
	consumerMemberType int8 = 1
)

func (h *Handlers) consumerGroupDescribe(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.ConsumerGroupDescribeRequest](kreq)
	if err != nil {
		return nil, err
	}
	ctx = groups.OneHold(ctx) // one hold for all the request's groups
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range distinct(req.Groups) {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group = id
		if err := h.groupDenied(rc, auth.OpDescribe, id); err != nil {
			rg.ErrorCode, rg.ErrorMessage = h.errorCode(err), errMessage(err)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if id == "" {
			// As Kafka's GroupCoordinatorService.consumerGroupDescribe,
			// once the group is authorized: no message.
			rg.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, err := h.shardFor(id).Coordinator.DescribeConsumer(ctx, id)
		if waitAborted(err) {
			return nil, err
		}
		if err != nil {
			rg.ErrorCode, rg.ErrorMessage = h.errorCode(err), errMessage(err)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if !h.describesTopicsOf(rc, d) {
			// As Kafka 4.x: a group naming a topic the principal may not
			// describe is not described at all.
			msg := "The group has described topic(s) that the client is not authorized to describe."
			rg.ErrorCode, rg.ErrorMessage = kerr.TopicAuthorizationFailed.Code, &msg
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = string(d.State), d.Epoch, d.AssignmentEpoch, d.AssignorName
		for _, m := range d.Members {
			rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			rm.MemberID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost
			rm.InstanceID, rm.RackID = optional(m.InstanceID), optional(m.RackID)
			rm.SubscribedTopics, rm.SubscribedTopicRegex = m.SubscribedTopicNames, optional(m.SubscribedTopicRegex)
			if rm.SubscribedTopics == nil {
				rm.SubscribedTopics = []string{}
			}
			rm.Assignment, rm.TargetAssignment = describedAssignment(m.Assignment), describedAssignment(m.Target)
			rm.MemberType = consumerMemberType
			if m.Classic {
				rm.MemberType = classicMemberType
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// optional is nil for "" (the wire's null) and &s otherwise.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func describedAssignment(tps []groups.NamedTopicPartitions) kmsg.Assignment {
	a := kmsg.Assignment{TopicPartitions: make([]kmsg.AssignmentTopicPartition, len(tps))}
	for i, tp := range tps {
		a.TopicPartitions[i] = kmsg.AssignmentTopicPartition{TopicID: tp.TopicID, Topic: tp.Topic, Partitions: tp.Partitions}
	}
	return a
}

// describesTopicsOf reports whether rc's principal may describe every
// topic the group's members subscribe to by name, own or are to own.
func (h *Handlers) describesTopicsOf(rc *transport.RequestContext, d groups.ConsumerGroupDescription) bool {
	if h.cfg.Authorizer == nil {
		return true
	}
	ok := func(topic string) bool { return h.allowed(rc, auth.OpDescribe, auth.ResourceTopic, topic) }
	for _, m := range d.Members {
		for _, t := range m.SubscribedTopicNames {
			if !ok(t) {
				return false
			}
		}
		for _, tps := range [][]groups.NamedTopicPartitions{m.Assignment, m.Target} {
			for _, tp := range tps {
				if !ok(tp.Topic) {
					return false
				}
			}
		}
	}
	return true
}
