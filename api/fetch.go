package api

// Fetch (key 1), versions 0–12.
// v3: response size limit. v4: isolation level, last stable offset. v5: log
// start offset. v7: fetch sessions (KIP-227; kcoord answers session id 0,
// so clients send full fetches). v11: rack. v12: flexible. (v13+ names
// topics by id; not served.)
// kcoord stores no records: a fetch waits MaxWaitMillis (capped) and
// answers every partition empty at offset 0, so consumers idle instead of
// failing. The wait ends early when the connection closes. Needs Topic
// READ (TOPIC_AUTHORIZATION_FAILED per partition), as in Kafka.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) fetch(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.FetchRequest](kreq)
	if err != nil {
		return nil, err
	}
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, h.cfg.MaxFetchWait)
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		topic, known := h.lookupTopic(ctx, rc, t.Topic)
		denied := h.topicDenied(rc, auth.OpRead, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 0, 0, 0
			rp.PreferredReadReplica = -1
			// An empty record set, never a null one (length -1), which
			// Kafka never sends: librdkafka fails to parse a Fetch v0 answer
			// holding one ("Protocol parse failure for Fetch v0").
			rp.RecordBatches = []byte{}
			switch {
			case denied != nil:
				rp.ErrorCode = h.errorCode(denied)
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			case !known || p.Partition < 0 || p.Partition >= topic.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
