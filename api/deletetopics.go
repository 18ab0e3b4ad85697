package api

// DeleteTopics (key 20), versions 0–6.
// v1: throttle. v4: flexible. v5: error messages. v6: topics by name or id.
// Removes topics from the registry in the metadata Raft group, on any node
// (forwarded to the metadata leader, as CreateTopics is); committed offsets
// of groups are left alone, as in Kafka. Needs Topic DELETE on each topic
// (TOPIC_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) deleteTopics(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.DeleteTopicsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{t.Topic, t.TopicID})
		}
	} else {
		for _, name := range req.TopicNames {
			name := name
			targets = append(targets, target{name: &name})
		}
	}
	// A topic already gone (perhaps by an earlier attempt answered
	// REQUEST_TIMED_OUT) is answered once it is gone everywhere: one
	// confirmation for the whole request.
	var confirmed *error
	confirm := func() error {
		if confirmed == nil {
			err := h.confirmEverywhere(ctx)
			confirmed = &err
		}
		return *confirmed
	}
	for _, t := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.name, t.id
		name, ok := h.resolveTopic(t.name, t.id)
		if !ok && h.syncMetadata(ctx, rc) {
			// Created through another node just before, perhaps.
			name, ok = h.resolveTopic(t.name, t.id)
		}
		switch denied := h.topicDenied(rc, auth.OpDelete, name); {
		case (ok || t.name != nil) && denied != nil:
			rt.ErrorCode, rt.ErrorMessage = h.errorCode(denied), errMessage(denied)
		case !ok && t.name == nil:
			rt.ErrorCode = kerr.UnknownTopicID.Code
		case !ok:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if err := confirm(); err != nil {
				rt.ErrorCode, rt.ErrorMessage = h.controllerErrorCode(err), errMessage(err)
			}
		default:
			if err := h.topics.Delete(ctx, name); err != nil {
				rt.ErrorCode, rt.ErrorMessage = h.controllerErrorCode(err), errMessage(err)
			}
			if rt.Topic == nil {
				rt.Topic = &name
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// resolveTopic finds a registered topic by name, or by id when no name is
// given.
func (h *Handlers) resolveTopic(name *string, id [16]byte) (string, bool) {
	if name != nil {
		_, ok := h.registry.Topic(*name)
		return *name, ok
	}
	for _, t := range h.registry.Topics() {
		if t.ID == id {
			return t.Name, true
		}
	}
	return "", false
}
