package groups

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

func TestValidateOffset(t *testing.T) {
	meta := func(n int) *string { s := strings.Repeat("x", n); return &s }
	for _, c := range []struct {
		p    CommitPartition
		want error
	}{
		{CommitPartition{Topic: "t", Metadata: meta(4096)}, nil},
		{CommitPartition{Topic: "t", Metadata: meta(4097)}, ErrOffsetMetadataTooLarge},
		{CommitPartition{Topic: "t"}, nil},
		{CommitPartition{Topic: "", Partition: 1}, ErrInvalidTopic},
		{CommitPartition{Topic: "t", Partition: -1}, ErrInvalidPartition},
		// Kafka counts UTF-16 code units (String.length), not bytes.
		{CommitPartition{Topic: "t", Metadata: func() *string { s := strings.Repeat("é", 4096); return &s }()}, nil},
		{CommitPartition{Topic: "t", Metadata: func() *string { s := strings.Repeat("😀", 2048); return &s }()}, nil},
		{CommitPartition{Topic: "t", Metadata: func() *string { s := strings.Repeat("😀", 2049); return &s }()}, ErrOffsetMetadataTooLarge},
	} {
		if err := validateOffset(c.p, 4096); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.p, err, c.want)
		}
	}
}

func TestRecordExpiry(t *testing.T) {
	m := "meta"
	p := CommitPartition{Topic: "t", Partition: 2, Offset: 9, LeaderEpoch: 3, Metadata: &m}
	r := offsetRecord(p, 1000, nil, 50)
	if r.Offset != (fsm.Offset{Offset: 9, LeaderEpoch: 3, Metadata: "meta", CommitTimestamp: 1000, ExpireTimestamp: noExpiry}) {
		t.Fatalf("v5+: %+v", r.Offset)
	}
	if r := offsetRecord(p, 1000, ptr(int64(200)), 50); r.Offset.ExpireTimestamp != 1200 {
		t.Fatalf("v2-v4 retention: %+v", r.Offset)
	}
	p.Timestamp = ptr(int64(700))
	if r := offsetRecord(p, 1000, nil, 50); r.Offset.CommitTimestamp != 700 || r.Offset.ExpireTimestamp != 750 {
		t.Fatalf("v1 timestamp: %+v", r.Offset)
	}
}

func TestFetchOffsets(t *testing.T) {
	state := fsm.NewShardFSM(0, nil)
	cmd, _ := fsm.Encode(&fsm.OffsetCommit{GroupID: "g", Timestamp: 1, Offsets: []fsm.OffsetCommitPartition{
		{Topic: "b", Partition: 1, Offset: fsm.Offset{Offset: 11, LeaderEpoch: 2, Metadata: "m"}},
		{Topic: "b", Partition: 0, Offset: fsm.Offset{Offset: 10, LeaderEpoch: -1}},
		{Topic: "a", Partition: 0, Offset: fsm.Offset{Offset: 5, LeaderEpoch: -1}},
	}})
	state.Apply(&raft.Log{Type: raft.LogCommand, Data: cmd})

	all := fetchOffsets(state, "g", nil)
	if len(all) != 2 || all[0].Topic != "a" || all[1].Partitions[0].Partition != 0 || all[1].Partitions[1].Offset != 11 {
		t.Fatalf("all: %+v", all)
	}
	some := fetchOffsets(state, "g", []FetchTopic{{Topic: "b", Partitions: []int32{1, 7}}, {Topic: "c", Partitions: []int32{0}}})
	if got := some[0].Partitions[0]; got != (Fetched{Partition: 1, Offset: 11, LeaderEpoch: 2, Metadata: "m"}) {
		t.Fatalf("committed: %+v", got)
	}
	if got := some[0].Partitions[1]; got != (Fetched{Partition: 7, Offset: UnknownOffset, LeaderEpoch: -1}) {
		t.Fatalf("uncommitted: %+v", got)
	}
	if len(some[1].Partitions) != 1 || some[1].Partitions[0].Offset != UnknownOffset {
		t.Fatalf("unknown topic: %+v", some[1])
	}
	if got := fetchOffsets(state, "other", nil); len(got) != 0 {
		t.Fatalf("unknown group: %+v", got)
	}
}

func ptr[T any](v T) *T { return &v }
