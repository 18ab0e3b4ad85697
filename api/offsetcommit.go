package api

// OffsetCommit (key 8), versions 0–9.
// v0: no generation or member (generation -1: offsets outside group
// management). v1: generation, member id and a per-partition commit
// timestamp. v2–v4: RetentionTimeMillis (an explicit expiry). v3: throttle.
// v5: retention removed (KIP-211: offsets live as long as the group). v6:
// leader epoch. v7: group.instance.id. v8: flexible. v9: no change for
// classic groups. (v10 replaces names with topic ids; not served.)
// Each partition is validated on its own; the valid ones are committed
// through Raft together and answered once on a quorum.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/offsets"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) offsetCommit(_ context.Context, _ *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.OffsetCommitRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	generation := req.Generation
	if req.Version == 0 {
		generation = -1
	}
	retention := int64(-1)
	if req.Version >= 2 && req.Version <= 4 {
		retention = req.RetentionTimeMillis
	}
	now := time.Now().UnixMilli()
	defaultRetention := h.cfg.OffsetsRetention.Milliseconds()

	// codes[i][j] is the answer for req.Topics[i].Partitions[j]; valid
	// partitions wait for the commit's outcome (pending).
	type slot struct{ i, j int }
	var (
		valid   []fsm.OffsetCommitPartition
		pending []slot
		codes   = make([][]int16, len(req.Topics))
	)
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			op := offsets.Partition{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, Timestamp: -1}
			if req.Version == 1 {
				op.Timestamp = p.Timestamp
			}
			if req.Version < 6 {
				op.LeaderEpoch = -1
			}
			if err := offsets.Validate(op, h.cfg.OffsetMetadataMaxBytes); err != nil {
				codes[i][j] = h.errorCode(err)
				continue
			}
			valid = append(valid, offsets.Record(op, now, retention, defaultRetention))
			pending = append(pending, slot{i, j})
		}
	}
	if len(valid) > 0 || req.Group == "" {
		err := h.shardFor(req.Group).Coordinator.Commit(groups.CommitRequest{
			GroupID:    req.Group,
			MemberID:   req.MemberID,
			InstanceID: deref(req.InstanceID),
			Generation: generation,
			Offsets:    valid,
		})
		code := h.errorCode(err)
		for _, s := range pending {
			codes[s.i][s.j] = code
		}
		if req.Group == "" {
			for i := range codes {
				for j := range codes[i] {
					codes[i][j] = code
				}
			}
		}
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
