package groups

import (
	"context"
	"sort"
	"sync"

	"github.com/kcoord/kcoord/fsm"
)

// UnknownOffset is the offset reported for a partition with no committed
// offset.
const UnknownOffset int64 = -1

// FetchRequest is an OffsetFetch for one group.
type FetchRequest struct {
	GroupID string
	// Topics are the partitions asked for; nil asks for every committed
	// partition.
	Topics []FetchTopic
	// MemberID and MemberEpoch are OffsetFetch v9's member (nil and -1
	// for none), checked against a consumer group (checkFetchMember).
	MemberID    *string
	MemberEpoch int32
}

// FetchOffsets serves an OffsetFetch for one group, from the shard's
// applied state once a quorum confirmed this coordinator's leadership
// (invariant 7): an acknowledged commit was applied here before it was
// acknowledged. A request naming several groups passes a ctx from
// OneConfirmation, so each coordinator confirms once for all of them.
// Called from a connection's handler goroutine; blocks about one round
// trip, and a hold for a settling shard ends with ctx.
func (c *Coordinator) FetchOffsets(ctx context.Context, req FetchRequest) ([]FetchedTopic, error) {
	if err := c.confirmOnce(ctx); err != nil {
		return nil, err
	}
	if err := c.checkFetchMember(req.GroupID, req.MemberID, req.MemberEpoch); err != nil {
		return nil, err
	}
	return fetchOffsets(c.state, req.GroupID, req.Topics), nil
}

// confirmations remembers, for one request, each coordinator's
// leadership confirmation (OneConfirmation).
type confirmations struct {
	mu   sync.Mutex
	errs map[*Coordinator]error
}

type confirmationsKey struct{}

// OneConfirmation returns a context under which FetchOffsets confirms
// each coordinator's leadership once: a confirmation made after the
// request arrived serves every group of the shard (the state read after
// it holds every commit acknowledged before the request, and never moves
// back). The OffsetFetch handler calls it once per request.
func OneConfirmation(ctx context.Context) context.Context {
	return context.WithValue(ctx, confirmationsKey{}, &confirmations{errs: make(map[*Coordinator]error)})
}

// confirmOnce is Check, once per coordinator under a ctx from
// OneConfirmation.
func (c *Coordinator) confirmOnce(ctx context.Context) error {
	cs, ok := ctx.Value(confirmationsKey{}).(*confirmations)
	if !ok {
		return c.Check(ctx)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	err, done := cs.errs[c]
	if !done {
		err = c.Check(ctx)
		cs.errs[c] = err
	}
	return err
}

// FetchTopic asks for some partitions of one topic.
type FetchTopic struct {
	Topic      string
	Partitions []int32
}

// Fetched is one partition's committed offset as OffsetFetch reports it.
type Fetched struct {
	Partition   int32
	Offset      int64 // UnknownOffset when nothing is committed
	LeaderEpoch int32 // -1 when unknown
	Metadata    string
}

// FetchedTopic groups Fetched partitions of one topic.
type FetchedTopic struct {
	Topic      string
	Partitions []Fetched
}

// fetchOffsets reads a group's committed offsets from the shard state: for
// the requested partitions (with UnknownOffset for those never committed),
// or, when topics is nil, every committed partition. Safe from any
// goroutine.
func fetchOffsets(state *fsm.ShardFSM, group string, topics []FetchTopic) []FetchedTopic {
	stored := state.Offsets(group)
	if topics == nil {
		return allOffsets(stored)
	}
	out := make([]FetchedTopic, 0, len(topics))
	for _, t := range topics {
		ft := FetchedTopic{Topic: t.Topic, Partitions: make([]Fetched, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			f := Fetched{Partition: p, Offset: UnknownOffset, LeaderEpoch: -1}
			if o, ok := stored[fsm.TopicPartition{Topic: t.Topic, Partition: p}]; ok {
				f = fetched(p, o)
			}
			ft.Partitions = append(ft.Partitions, f)
		}
		out = append(out, ft)
	}
	return out
}

func fetched(p int32, o fsm.Offset) Fetched {
	return Fetched{Partition: p, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
}

// allOffsets lists every stored offset, sorted by topic and partition.
func allOffsets(stored map[fsm.TopicPartition]fsm.Offset) []FetchedTopic {
	byTopic := make(map[string][]Fetched)
	for tp, o := range stored {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], fetched(tp.Partition, o))
	}
	out := make([]FetchedTopic, 0, len(byTopic))
	for t, ps := range byTopic {
		sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
		out = append(out, FetchedTopic{Topic: t, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// UnknownOffsets answers every requested partition with no offset.
func UnknownOffsets(topics []FetchTopic) []FetchedTopic {
	out := make([]FetchedTopic, 0, len(topics))
	for _, t := range topics {
		ft := FetchedTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			ft.Partitions = append(ft.Partitions, Fetched{Partition: p, Offset: UnknownOffset, LeaderEpoch: -1})
		}
		out = append(out, ft)
	}
	return out
}
