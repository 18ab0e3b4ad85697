package api

// OffsetDelete (key 47), version 0 (KIP-496).
// Deletes committed offsets of a group: any partition of an Empty group;
// for a consumer group with members, only partitions of topics no member
// subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise); other groups with
// members answer NON_EMPTY_GROUP. Group-level errors go in the top-level
// error code, as Kafka does, and partitions of topics (or partition
// numbers) the registry does not have are UNKNOWN_TOPIC_OR_PARTITION.
// Needs Group DELETE (a top-level GROUP_AUTHORIZATION_FAILED) and Topic
// READ on each topic (TOPIC_AUTHORIZATION_FAILED on its partitions), as in
// Kafka.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) offsetDelete(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.OffsetDeleteRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if err := h.groupDenied(rc, auth.OpDelete, req.Group); err != nil {
		resp.ErrorCode = h.errorCode(err)
		return resp, nil
	}
	// As Kafka's KafkaApis.handleOffsetDeleteRequest: a partition the
	// registry does not have is UNKNOWN_TOPIC_OR_PARTITION before the
	// coordinator is asked (about the others only), and a group-level
	// error answers alone. One departure: Kafka deletes a topic's offsets
	// with the topic, kcoord does not, so offsets the group still holds
	// for a topic no longer registered go to the coordinator too, to be
	// deletable at all.
	var partitions []fsm.TopicPartition
	refused := make([][]int16, len(req.Topics)) // a code answered before the coordinator
	shard := h.shardFor(req.Group)
	for i, t := range req.Topics {
		refused[i] = make([]int16, len(t.Partitions))
		topic, registered := h.lookupTopic(ctx, rc, t.Topic)
		denied := h.topicDenied(rc, auth.OpRead, t.Topic)
		for j, p := range t.Partitions {
			tp := fsm.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if denied != nil {
				refused[i][j] = h.errorCode(denied)
				continue
			}
			if !h.committable(topic, registered, p.Partition) && (registered || !shard.Coordinator.HasOffset(req.Group, tp)) {
				refused[i][j] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			partitions = append(partitions, tp)
		}
	}
	results, err := shard.Coordinator.DeleteOffsets(ctx, req.Group, partitions)
	if waitAborted(err) {
		return nil, err
	}
	if err != nil {
		resp.ErrorCode = h.errorCode(err)
		return resp, nil
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			if refused[i][j] != 0 {
				rp.ErrorCode = refused[i][j]
			} else {
				rp.ErrorCode = h.errorCode(results[fsm.TopicPartition{Topic: t.Topic, Partition: p.Partition}])
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
