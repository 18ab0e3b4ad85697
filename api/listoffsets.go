package api

// ListOffsets (key 2), versions 0–10.
// v0: up to MaxNumOffsets old-style offsets. v1: one offset and timestamp.
// v2: isolation level. v4: leader epochs. v6: flexible. v7–v10: more
// special timestamps (max timestamp, local and tiered log start).
// kcoord stores no records, so every log is empty: the earliest, latest and
// any other offset is 0, with no timestamp. Needs Topic DESCRIBE
// (TOPIC_AUTHORIZATION_FAILED per partition), as in Kafka.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) listOffsets(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.ListOffsetsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		topic, known := h.lookupTopic(ctx, rc, t.Topic)
		denied := h.topicDenied(rc, auth.OpDescribe, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Timestamp, rp.Offset, rp.LeaderEpoch = p.Partition, -1, 0, 0
			switch {
			case denied != nil:
				rp.ErrorCode = h.errorCode(denied)
				rp.Offset, rp.LeaderEpoch = -1, -1
			case !known || p.Partition < 0 || p.Partition >= topic.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rp.Offset, rp.LeaderEpoch = -1, -1
			case req.Version == 0:
				rp.OldStyleOffsets = []int64{0}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
