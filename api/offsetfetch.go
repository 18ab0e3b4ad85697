package api

// OffsetFetch (key 9), versions 0–9.
// v1: no change (v0 read ZooKeeper in Kafka; both read kcoord's store). v2:
// a top-level error code, and null topics mean every committed partition.
// v3: throttle. v5: leader epoch. v6: flexible. v7: RequireStable (kcoord
// has no transactional offsets, so committed offsets are always stable).
// v8: many groups per request, each with its own error (KIP-709). v9: member
// id and epoch for KIP-848 groups, ignored for classic groups. (v10 uses
// topic ids; not served.)
// Offsets are read from the shard FSM on its leader: an acknowledged commit
// is applied there before it was acknowledged.
// A group listed more than once in a v8+ request is answered once, at its
// first place, for the topics of all its entries (every committed partition
// when one entry asks for all). Kafka answers every entry; a request of
// a thousand copies of one group would otherwise be answered with a
// thousand copies of all its offsets.
// Needs Group DESCRIBE (else GROUP_AUTHORIZATION_FAILED for the group) and,
// as in Kafka, Topic DESCRIBE on each topic: a topic asked for without it
// is answered TOPIC_AUTHORIZATION_FAILED on each of its partitions, and
// one the principal may not describe is left out of an answer of every
// committed partition.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) offsetFetch(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.OffsetFetchRequest](kreq)
	if err != nil {
		return nil, err
	}
	ctx = groups.OneHold(ctx)         // one hold for all the request's groups
	ctx = groups.OneConfirmation(ctx) // one leadership confirmation per shard
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, g := range distinctFetchGroups(req.Groups) {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.group
			fetched, denied, err := h.fetchAuthorized(ctx, rc, g)
			rg.ErrorCode = h.errorCode(err)
			for _, ft := range fetched {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = ft.Topic
				for _, f := range ft.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = f.Partition, f.Offset, f.LeaderEpoch, &f.Metadata
					rp.ErrorCode = denied[ft.Topic]
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	var topics []groups.FetchTopic
	if req.Topics != nil || req.Version < 2 {
		topics = make([]groups.FetchTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			topics = append(topics, groups.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	fetched, denied, err := h.fetchAuthorized(ctx, rc, fetchGroup{group: req.Group, topics: topics, memberEpoch: -1})
	code := h.errorCode(err)
	if err != nil && req.Version < 2 {
		// v0–v1 have no top-level error: report it on every partition.
		fetched = groups.UnknownOffsets(topics)
	}
	resp.ErrorCode = code
	for _, ft := range fetched {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = ft.Topic
		for _, f := range ft.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = f.Partition, f.Offset, f.LeaderEpoch, &f.Metadata
			if req.Version < 2 {
				rp.ErrorCode = code
			}
			if c := denied[ft.Topic]; c != 0 {
				rp.ErrorCode = c
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// fetchAuthorized is fetchOffsets for what rc's principal may see (see
// the top of the file): denied maps each topic asked for without Topic
// DESCRIBE to TOPIC_AUTHORIZATION_FAILED, answered with no offsets.
func (h *Handlers) fetchAuthorized(ctx context.Context, rc *transport.RequestContext, g fetchGroup) (fetched []groups.FetchedTopic, denied map[string]int16, err error) {
	if err := h.groupDenied(rc, auth.OpDescribe, g.group); err != nil {
		return nil, nil, err
	}
	if g.topics == nil {
		all, err := h.fetchOffsets(ctx, g)
		for _, ft := range all {
			if h.allowed(rc, auth.OpDescribe, auth.ResourceTopic, ft.Topic) {
				fetched = append(fetched, ft)
			}
		}
		return fetched, nil, err
	}
	var allowed, refused []groups.FetchTopic
	for _, t := range g.topics {
		if h.allowed(rc, auth.OpDescribe, auth.ResourceTopic, t.Topic) {
			allowed = append(allowed, t)
		} else {
			refused = append(refused, t)
		}
	}
	if len(refused) == 0 {
		fetched, err := h.fetchOffsets(ctx, g)
		return fetched, nil, err
	}
	g.topics = allowed
	if allowed == nil {
		g.topics = []groups.FetchTopic{} // none, not all
	}
	fetched, err = h.fetchOffsets(ctx, g)
	denied = make(map[string]int16, len(refused))
	for _, t := range refused {
		denied[t.Topic] = kerr.TopicAuthorizationFailed.Code
	}
	return append(fetched, groups.UnknownOffsets(refused)...), denied, err
}

// fetchOffsets asks the group's coordinator for its offsets
// (groups.FetchOffsets).
func (h *Handlers) fetchOffsets(ctx context.Context, g fetchGroup) ([]groups.FetchedTopic, error) {
	return h.shardFor(g.group).Coordinator.FetchOffsets(ctx, groups.FetchRequest{
		GroupID: g.group, Topics: g.topics, MemberID: g.memberID, MemberEpoch: g.memberEpoch})
}

// fetchGroup is one distinct group of a v8+ OffsetFetch and what is asked of
// it: nil topics mean every committed partition.
type fetchGroup struct {
	group  string
	topics []groups.FetchTopic
	// memberID and memberEpoch are the v9 member the fetch comes from (nil
	// and -1 for none), checked against a consumer group.
	memberID    *string
	memberEpoch int32
}

// distinctFetchGroups lists each group of a v8+ OffsetFetch once, in the
// order of first appearance, with the topics of all its entries one after
// the other; an entry with null topics (all) makes the group's answer all.
func distinctFetchGroups(entries []kmsg.OffsetFetchRequestGroup) []fetchGroup {
	out := make([]fetchGroup, 0, len(entries))
	at := make(map[string]int, len(entries))
	all := make(map[string]bool)
	for _, g := range entries {
		i, seen := at[g.Group]
		if !seen {
			i = len(out)
			at[g.Group] = i
			out = append(out, fetchGroup{group: g.Group, topics: make([]groups.FetchTopic, 0, len(g.Topics)), memberID: g.MemberID, memberEpoch: g.MemberEpoch})
		}
		if g.Topics == nil {
			all[g.Group] = true
		}
		for _, t := range g.Topics {
			out[i].topics = append(out[i].topics, groups.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	for i := range out {
		if all[out[i].group] {
			out[i].topics = nil
		}
	}
	return out
}
