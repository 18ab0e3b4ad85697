package api

// OffsetCommit (key 8), versions 0–9.
// v0: no generation or member (generation -1: offsets outside group
// management). v1: generation, member id and a per-partition commit
// timestamp. v2–v4: RetentionTimeMillis (an explicit expiry). v3: throttle.
// v5: retention removed (KIP-211: offsets live as long as the group). v6:
// leader epoch. v7: group.instance.id. v8: flexible. v9: a generation
// for a group that does not exist is GROUP_ID_NOT_FOUND (ILLEGAL_GENERATION
// before), as Kafka 4.x answers. (v10 replaces names with topic ids; not served.)
// The checks run in Kafka's order (KafkaApis.handleOffsetCommitRequest):
// first the topic registry, where a partition of a topic that is not
// registered, or beyond its topic's partition count, is
// UNKNOWN_TOPIC_OR_PARTITION (unless
// kcoord.offsets.commit.unregistered.topics.enable takes unregistered
// topics); when no partition is left the coordinator never sees the request,
// so no group is checked or created. Then the coordinator (groups.Commit):
// each remaining partition is validated on its own, and the valid ones are
// stamped, committed through Raft together and answered once on a quorum.
// Authorization comes first, as in Kafka: without Group READ every
// partition is GROUP_AUTHORIZATION_FAILED, and without Topic READ on a
// topic its partitions are TOPIC_AUTHORIZATION_FAILED.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) offsetCommit(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.OffsetCommitRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	generation := req.Generation
	if req.Version == 0 {
		generation = -1
	}
	commit := groups.CommitRequest{
		Version:    req.Version,
		GroupID:    req.Group,
		MemberID:   req.MemberID,
		InstanceID: deref(req.InstanceID),
		Generation: generation,
	}
	if req.Version >= 2 && req.Version <= 4 {
		commit.RetentionMs = &req.RetentionTimeMillis
	}

	// codes[i][j] is the answer for req.Topics[i].Partitions[j]. The
	// partitions that pass the registry check go to the coordinator and
	// get its answer (pending[k] is commit.Partitions[k]'s place).
	type slot struct{ i, j int }
	partitions := 0
	for _, t := range req.Topics {
		partitions += len(t.Partitions)
	}
	var (
		pending = make([]slot, 0, partitions)
		codes   = make([][]int16, len(req.Topics))
	)
	// Sized once: at scale a commit's appends were a tenth of a node's
	// allocations, and so of its GC cycles.
	commit.Partitions = make([]groups.CommitPartition, 0, partitions)
	groupDenied := h.groupDenied(rc, auth.OpRead, req.Group)
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		// A miss is answered only once the leader's registry was
		// consulted: the topic may have been created through another
		// node just before.
		topic, registered := h.lookupTopic(ctx, rc, t.Topic)
		denied := groupDenied
		if denied == nil {
			denied = h.topicDenied(rc, auth.OpRead, t.Topic)
		}
		for j, p := range t.Partitions {
			if denied != nil {
				codes[i][j] = h.errorCode(denied)
				continue
			}
			if !h.committable(topic, registered, p.Partition) {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			cp := groups.CommitPartition{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata}
			if req.Version == 1 {
				cp.Timestamp = &t.Partitions[j].Timestamp
			}
			if req.Version < 6 {
				cp.LeaderEpoch = -1
			}
			commit.Partitions = append(commit.Partitions, cp)
			pending = append(pending, slot{i, j})
		}
	}
	if len(commit.Partitions) > 0 {
		results, err := h.shardFor(req.Group).Coordinator.Commit(ctx, commit)
		if waitAborted(err) {
			return nil, err
		}
		for k, s := range pending {
			err := results[k]
			if errors.Is(err, groups.ErrGroupIDNotFound) && req.Version < 9 {
				// A generation for a group that does not exist: Kafka
				// answers GROUP_ID_NOT_FOUND from v9 only,
				// ILLEGAL_GENERATION before
				// (OffsetMetadataManager.validateOffsetCommit).
				err = groups.ErrIllegalGeneration
			}
			codes[s.i][s.j] = h.errorCode(err)
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

// committable reports whether a partition passes the registry check of an
// OffsetCommit: it is one of a registered topic's partitions, or its topic
// is not registered and CommitUnregisteredTopics takes such topics.
func (h *Handlers) committable(t fsm.Topic, registered bool, partition int32) bool {
	if !registered {
		return h.cfg.CommitUnregisteredTopics
	}
	return partition >= 0 && partition < t.Partitions
}
