package api

// OffsetDelete (key 47), version 0 (KIP-496).
// Deletes committed offsets of a group: any partition of an Empty group;
// for a consumer group with members, only partitions of topics no member
// subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise); other groups with
// members answer NON_EMPTY_GROUP. Group-level errors go in the top-level
// error code, as Kafka does.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) offsetDelete(_ context.Context, _ *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.OffsetDeleteRequest](kreq)
	if err != nil {
		return nil, err
	}
	var partitions []fsm.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			partitions = append(partitions, fsm.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	results, err := h.shardFor(req.Group).Coordinator.DeleteOffsets(req.Group, partitions)
	if err != nil {
		resp.ErrorCode = h.errorCode(err)
		return resp, nil
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = h.errorCode(results[fsm.TopicPartition{Topic: t.Topic, Partition: p.Partition}])
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
