package offsets

import (
	"sort"

	"github.com/kcoord/kcoord/fsm"
)

// Unknown is the offset reported for a partition with no committed offset.
const Unknown int64 = -1

// FetchTopic asks for some partitions of one topic.
type FetchTopic struct {
	Topic      string
	Partitions []int32
}

// Fetched is one partition's committed offset as OffsetFetch reports it.
type Fetched struct {
	Partition   int32
	Offset      int64 // Unknown when nothing is committed
	LeaderEpoch int32 // -1 when unknown
	Metadata    string
}

// FetchedTopic groups Fetched partitions of one topic.
type FetchedTopic struct {
	Topic      string
	Partitions []Fetched
}

// Fetch reads a group's committed offsets from the shard state: for the
// requested partitions (with Unknown for those never committed), or, when
// topics is nil, every committed partition. Safe from any goroutine.
func Fetch(state *fsm.ShardFSM, group string, topics []FetchTopic) []FetchedTopic {
	stored := state.Offsets(group)
	if topics == nil {
		return all(stored)
	}
	out := make([]FetchedTopic, 0, len(topics))
	for _, t := range topics {
		ft := FetchedTopic{Topic: t.Topic, Partitions: make([]Fetched, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			f := Fetched{Partition: p, Offset: Unknown, LeaderEpoch: -1}
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

// all lists every stored offset, sorted by topic and partition.
func all(stored map[fsm.TopicPartition]fsm.Offset) []FetchedTopic {
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
