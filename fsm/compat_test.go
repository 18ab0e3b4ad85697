package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// The files under testdata/v1 are entries and snapshots in the format of the
// release before msgpack (body version 1, snapshot version 1: JSON). They
// were first written by that release's own Encode and writeSnapshot; the
// encoders below reproduce its output byte for byte, and
// TestV1FixturesAreTheOldFormat keeps them honest. Regenerate with
//
//	go test ./fsm -run TestV1Fixtures -update-fixtures
var updateFixtures = flag.Bool("update-fixtures", false, "rewrite testdata/v1 from the v1 encoders in compat_test.go")

// encodeV1 is Encode as the JSON release wrote it.
func encodeV1(cmd Command) ([]byte, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	return append([]byte{byte(cmd.CommandType()), 1}, body...), nil
}

// decodeV1Body is the JSON release's Decode of a body, for the benchmark.
func decodeV1Body(body []byte, cmd Command) error { return json.Unmarshal(body, cmd) }

// The snapshot documents as the JSON release wrote them.
type shardSnapshotV1 struct {
	Groups  []Group            `json:"groups"`
	Offsets []snapshotOffsetV1 `json:"offsets"`
}

type snapshotOffsetV1 struct {
	Group string `json:"g"`
	TopicPartition
	Offset Offset `json:"o"`
}

type metaSnapshotV1 struct {
	Topics []Topic `json:"topics"`
}

// snapshotV1 is writeSnapshot as the JSON release wrote it.
func snapshotV1(doc any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte(1)
	if err := json.NewEncoder(&b).Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// v1Command is one fixture entry: the command as written and as a reader
// must decode it. They differ only where the JSON release itself lost bytes.
type v1Command struct {
	file    string
	written Command
	decoded Command
}

func fixtureGroup() Group {
	return Group{
		ID: "grüße-☃", ProtocolType: "consumer", Protocol: "cooperative-sticky", Generation: 7, Leader: "m-1",
		State: StateStable, StateTimestamp: 1700000000123,
		Members: []Member{
			{
				ID: "m-1", InstanceID: "inst-1", ClientID: "client-a", ClientHost: "/10.0.0.1",
				SessionTimeoutMs: 45000, RebalanceTimeoutMs: 300000,
				Protocols: []Protocol{
					{Name: "cooperative-sticky", Metadata: []byte{0, 3, 0, 0, 0, 1, 0, 1, 't'}},
					{Name: "range", Metadata: []byte{0, 1}},
				},
				Assignment: []byte{0, 3, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 0},
			},
			{
				ID: "m-2", ClientID: "client-b", ClientHost: "/10.0.0.2",
				SessionTimeoutMs: 45000, RebalanceTimeoutMs: 300000,
				Protocols: []Protocol{{Name: "cooperative-sticky", Metadata: []byte{0xff, 0x00, 0xfe}}},
			},
		},
	}
}

func fixtureTopic() Topic {
	return Topic{
		Name: "events.ünïcode", ID: [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0xff},
		Partitions: 12, ReplicationFactor: 3,
		Configs: map[string]string{"retention.ms": "604800000", "cleanup.policy": "compact"},
	}
}

func v1Commands() []v1Command {
	commit := &OffsetCommit{GroupID: "grüße-☃", Timestamp: 1700000000456, Offsets: []OffsetCommitPartition{
		{Topic: "events.ünïcode", Partition: 0, Offset: Offset{Offset: 1000, LeaderEpoch: 4, Metadata: "meta <&>", CommitTimestamp: 1700000000456, ExpireTimestamp: -1}},
		{Topic: "events.ünïcode", Partition: 11, Offset: Offset{Offset: 0, LeaderEpoch: -1, CommitTimestamp: 1700000000456, ExpireTimestamp: 1700600000456}},
	}}
	// The JSON release replaced invalid UTF-8 with U+FFFD before the entry
	// reached the log; every replica applied the replaced id, so replaying
	// it must give the replaced id too.
	lossyWritten := &OffsetCommit{GroupID: "x-a\xfe", Timestamp: 1, Offsets: []OffsetCommitPartition{
		{Topic: "t\xff", Partition: 1, Offset: Offset{Offset: 1000, LeaderEpoch: -1, Metadata: "\xed\xa0\x80", CommitTimestamp: 1, ExpireTimestamp: -1}},
	}}
	lossyDecoded := &OffsetCommit{GroupID: "x-a\uFFFD", Timestamp: 1, Offsets: []OffsetCommitPartition{
		{Topic: "t\uFFFD", Partition: 1, Offset: Offset{Offset: 1000, LeaderEpoch: -1, Metadata: "\uFFFD\uFFFD\uFFFD", CommitTimestamp: 1, ExpireTimestamp: -1}},
	}}
	g := fixtureGroup()
	return []v1Command{
		{file: "command-1-GroupPut.bin", written: &GroupPut{Group: g}, decoded: &GroupPut{Group: g}},
		{file: "command-2-GroupDelete.bin", written: &GroupDelete{GroupID: "old-group"}, decoded: &GroupDelete{GroupID: "old-group"}},
		{file: "command-3-OffsetCommit.bin", written: commit, decoded: commit},
		{file: "command-3-OffsetCommit-invalid-utf8.bin", written: lossyWritten, decoded: lossyDecoded},
		{file: "command-4-OffsetDelete.bin",
			written: &OffsetDelete{GroupID: "grüße-☃", Partitions: []TopicPartition{{Topic: "events.ünïcode", Partition: 11}}},
			decoded: &OffsetDelete{GroupID: "grüße-☃", Partitions: []TopicPartition{{Topic: "events.ünïcode", Partition: 11}}}},
		{file: "command-5-TopicCreate.bin", written: &TopicCreate{Topic: fixtureTopic()}, decoded: &TopicCreate{Topic: fixtureTopic()}},
		{file: "command-6-TopicDelete.bin", written: &TopicDelete{Name: "old-topic"}, decoded: &TopicDelete{Name: "old-topic"}},
	}
}

func fixtureShardSnapshotV1() shardSnapshotV1 {
	return shardSnapshotV1{
		Groups: []Group{fixtureGroup(), {ID: "simple", State: StateEmpty, StateTimestamp: 1700000000789}},
		Offsets: []snapshotOffsetV1{
			{Group: "grüße-☃", TopicPartition: TopicPartition{Topic: "events.ünïcode", Partition: 0},
				Offset: Offset{Offset: 1000, LeaderEpoch: 4, Metadata: "meta", CommitTimestamp: 1700000000456, ExpireTimestamp: -1}},
			{Group: "simple", TopicPartition: TopicPartition{Topic: "other", Partition: 3},
				Offset: Offset{Offset: 42, LeaderEpoch: -1, CommitTimestamp: 1700000000789, ExpireTimestamp: -1}},
		},
	}
}

func fixtureMetaSnapshotV1() metaSnapshotV1 {
	return metaSnapshotV1{Topics: []Topic{fixtureTopic(), {Name: "plain", Partitions: 1, ReplicationFactor: 1}}}
}

// v1Fixtures returns every fixture file's name and the bytes the JSON
// release wrote for it.
func v1Fixtures(t *testing.T) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	for _, c := range v1Commands() {
		b, err := encodeV1(c.written)
		if err != nil {
			t.Fatal(err)
		}
		out[c.file] = b
	}
	var err error
	if out["shard-snapshot.bin"], err = snapshotV1(fixtureShardSnapshotV1()); err != nil {
		t.Fatal(err)
	}
	if out["meta-snapshot.bin"], err = snapshotV1(fixtureMetaSnapshotV1()); err != nil {
		t.Fatal(err)
	}
	return out
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "v1", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestV1FixturesAreTheOldFormat checks that the checked-in files are what the
// v1 encoders write (and, with -update-fixtures, writes them).
func TestV1FixturesAreTheOldFormat(t *testing.T) {
	for name, want := range v1Fixtures(t) {
		if *updateFixtures {
			if err := os.WriteFile(filepath.Join("testdata", "v1", name), want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := readFixture(t, name); !bytes.Equal(got, want) {
			t.Errorf("%s: checked-in bytes differ from the v1 encoding:\n got %q\nwant %q", name, got, want)
		}
	}
}

func TestV1EntriesStillDecode(t *testing.T) {
	for _, c := range v1Commands() {
		got, err := Decode(readFixture(t, c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if !reflect.DeepEqual(got, c.decoded) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.file, got, c.decoded)
		}
	}
}

// TestV1LogStillReplays applies the v1 entries as a log written by the JSON
// release, then upgrades through a snapshot of the new format.
func TestV1LogStillReplays(t *testing.T) {
	shard, meta := NewShardFSM(0, nil), NewMetaFSM(nil)
	for i, c := range v1Commands() {
		var f raft.FSM = shard
		if c.written.CommandType() == TopicCreateType || c.written.CommandType() == TopicDeleteType {
			f = meta
		}
		resp := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: readFixture(t, c.file)})
		if err, _ := resp.(error); err != nil && !errors.Is(err, ErrGroupNotFound) && !errors.Is(err, ErrTopicNotFound) {
			t.Fatalf("%s: %v", c.file, err)
		}
	}
	check := func(t *testing.T, shard *ShardFSM, meta *MetaFSM) {
		t.Helper()
		if g, ok := shard.Group("grüße-☃"); !ok || !reflect.DeepEqual(g, fixtureGroup()) {
			t.Errorf("group: %+v %v", g, ok)
		}
		want := map[TopicPartition]Offset{{Topic: "events.ünïcode", Partition: 0}: v1Commands()[2].decoded.(*OffsetCommit).Offsets[0].Offset}
		if got := shard.Offsets("grüße-☃"); !reflect.DeepEqual(got, want) {
			t.Errorf("offsets: %+v, want %+v", got, want)
		}
		if o, ok := shard.Offset("x-a\uFFFD", TopicPartition{Topic: "t\uFFFD", Partition: 1}); !ok || o.Offset != 1000 {
			t.Errorf("the v1 entry's replaced id: %+v %v", o, ok)
		}
		if got := meta.Topics(); !reflect.DeepEqual(got, []Topic{fixtureTopic()}) {
			t.Errorf("topics: %+v", got)
		}
	}
	check(t, shard, meta)
	shard2, meta2 := NewShardFSM(0, nil), NewMetaFSM(nil)
	roundTrip(t, shard, shard2)
	roundTrip(t, meta, meta2)
	check(t, shard2, meta2)
}

func TestV1ShardSnapshotStillRestores(t *testing.T) {
	f := NewShardFSM(0, nil)
	apply(t, f, 1, &ClusterStamp{ID: "stale"})
	if err := f.Restore(io.NopCloser(bytes.NewReader(readFixture(t, "shard-snapshot.bin")))); err != nil {
		t.Fatal(err)
	}
	doc := fixtureShardSnapshotV1()
	if got := f.Groups(); !reflect.DeepEqual(got, doc.Groups) {
		t.Errorf("groups:\n got %+v\nwant %+v", got, doc.Groups)
	}
	for _, o := range doc.Offsets {
		if got, ok := f.Offset(o.Group, o.TopicPartition); !ok || got != o.Offset {
			t.Errorf("offset %s %+v: %+v %v, want %+v", o.Group, o.TopicPartition, got, ok, o.Offset)
		}
	}
	if n := len(f.Offsets("grüße-☃")) + len(f.Offsets("simple")); n != len(doc.Offsets) {
		t.Errorf("%d offsets, want %d", n, len(doc.Offsets))
	}
	if id := f.ClusterID(); id != "" {
		t.Errorf("a v1 snapshot has no cluster id; restored %q", id)
	}
}

func TestV1MetaSnapshotStillRestores(t *testing.T) {
	f := NewMetaFSM(nil)
	apply(t, f, 1, &ClusterStamp{ID: "stale"})
	if err := f.Restore(io.NopCloser(bytes.NewReader(readFixture(t, "meta-snapshot.bin")))); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Topics(), fixtureMetaSnapshotV1().Topics; !reflect.DeepEqual(got, want) {
		t.Errorf("topics:\n got %+v\nwant %+v", got, want)
	}
	if id := f.ClusterID(); id != "" {
		t.Errorf("a v1 snapshot has no cluster id; restored %q", id)
	}
}
