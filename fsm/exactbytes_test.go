package fsm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Kafka compares ids as Java strings built from the bytes a client sent, so
// every id and string the FSM stores must keep its exact bytes.

// awkwardStrings are strings that a text encoding could rewrite: invalid
// UTF-8, unpaired surrogates as CESU-8 bytes, NUL, Java's modified-UTF-8 NUL,
// a literal U+FFFD and a 32 KiB id of arbitrary bytes.
func awkwardStrings() map[string]string {
	r := rand.New(rand.NewPCG(8, 8))
	big := make([]byte, 32<<10)
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	return map[string]string{
		"invalid utf8":        "x-a\xfe",
		"lone continuation":   "\x80\xbf",
		"truncated rune":      "caf\xc3",
		"high surrogate cesu": "\xed\xa0\x80",
		"low surrogate cesu":  "\xed\xbf\xbf",
		"surrogate pair cesu": "\xed\xa0\xbd\xed\xb8\x80",
		"nul":                 "a\x00b",
		"only nul":            "\x00",
		"modified utf8 nul":   "\xc0\x80",
		"literal fffd":        "x-a\uFFFD",
		"every byte value":    everyByte(),
		"32 KiB":              string(big),
	}
}

func everyByte() string {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return string(b)
}

// groupWith puts s into every string field of a group, member and protocol,
// each with a distinct suffix so fields cannot be swapped unnoticed.
func groupWith(s string) Group {
	return Group{
		ID: s, ProtocolType: s + "/pt", Protocol: s + "/proto", Generation: 5, Leader: s + "/m1",
		State: StateStable, StateTimestamp: 1700000000000,
		Members: []Member{
			{
				ID: s + "/m1", InstanceID: s + "/i1", ClientID: s + "/c1", ClientHost: s + "/h1",
				SessionTimeoutMs: 10000, RebalanceTimeoutMs: 60000,
				Protocols:  []Protocol{{Name: s + "/proto", Metadata: []byte(s)}, {Name: s + "/other", Metadata: []byte{0}}},
				Assignment: []byte(s + "/assignment"),
			},
			{ID: s + "/m2", ClientID: s + "/c2", ClientHost: s + "/h2", Protocols: []Protocol{{Name: s + "/proto", Metadata: []byte{1}}}},
		},
	}
}

func commitWith(s string, offset int64) *OffsetCommit {
	return &OffsetCommit{GroupID: s, Timestamp: 1700000000001, Offsets: []OffsetCommitPartition{
		{Topic: s, Partition: 0, Offset: Offset{Offset: offset, LeaderEpoch: 3, Metadata: s + "/meta", CommitTimestamp: 1700000000001, ExpireTimestamp: -1}},
		{Topic: s + "/t2", Partition: 7, Offset: Offset{Offset: offset + 1, LeaderEpoch: -1, Metadata: s, CommitTimestamp: 1700000000001, ExpireTimestamp: -1}},
	}}
}

func topicWith(s string) Topic {
	return Topic{Name: s, ID: [16]byte{0xff, 0xfe, 0, 1}, Partitions: 3, ReplicationFactor: 3,
		Configs: map[string]string{s: s + "/v", "plain": s}}
}

func TestCommandsKeepEveryByteThroughEncodeAndDecode(t *testing.T) {
	for name, s := range awkwardStrings() {
		t.Run(name, func(t *testing.T) {
			for _, cmd := range []Command{
				&GroupPut{Group: groupWith(s)},
				&GroupDelete{GroupID: s},
				commitWith(s, 1000),
				&OffsetDelete{GroupID: s, Partitions: []TopicPartition{{Topic: s, Partition: 1}, {Topic: s + "/t2", Partition: 7}}},
				&TopicCreate{Topic: topicWith(s)},
				&TopicDelete{Name: s},
			} {
				b, err := Encode(cmd)
				if err != nil {
					t.Fatalf("%s: %v", cmd.CommandType(), err)
				}
				got, err := Decode(b)
				if err != nil {
					t.Fatalf("%s: %v", cmd.CommandType(), err)
				}
				if !reflect.DeepEqual(got, cmd) {
					t.Fatalf("%s lost bytes:\n got %s\nwant %s", cmd.CommandType(), short(got), short(cmd))
				}
			}
		})
	}
}

func TestShardStateKeepsEveryByteThroughApplySnapshotAndRestore(t *testing.T) {
	strs := awkwardStrings()
	f := NewShardFSM(0, nil)
	var index uint64
	for _, s := range strs {
		index++
		apply(t, f, index, &GroupPut{Group: groupWith(s)})
		index++
		apply(t, f, index, commitWith(s, 1000))
	}
	check := func(t *testing.T, f *ShardFSM) {
		t.Helper()
		if n := len(f.Groups()); n != len(strs) {
			t.Fatalf("%d groups, want %d", n, len(strs))
		}
		for name, s := range strs {
			g, ok := f.Group(s)
			if !ok {
				t.Fatalf("%s: group not found by its own id", name)
			}
			if want := groupWith(s); !reflect.DeepEqual(g, want) {
				t.Fatalf("%s: group lost bytes:\n got %s\nwant %s", name, short(g), short(want))
			}
			want := map[TopicPartition]Offset{}
			for _, o := range commitWith(s, 1000).Offsets {
				want[TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
			}
			if got := f.Offsets(s); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: offsets lost bytes:\n got %s\nwant %s", name, short(got), short(want))
			}
		}
	}
	check(t, f)
	restored := NewShardFSM(0, nil)
	roundTrip(t, f, restored)
	check(t, restored)

	// Deletes find what they must delete by the exact bytes.
	for _, s := range strs {
		index++
		apply(t, restored, index, &OffsetDelete{GroupID: s, Partitions: []TopicPartition{{Topic: s, Partition: 0}, {Topic: s + "/t2", Partition: 7}}})
		if restored.HasOffsets(s) {
			t.Fatalf("%s: OffsetDelete missed the offsets", short(s))
		}
		index++
		apply(t, restored, index, &GroupPut{Group: Group{ID: s, State: StateEmpty}})
		index++
		if r := apply(t, restored, index, &GroupDelete{GroupID: s}); r != nil {
			t.Fatalf("%s: GroupDelete: %v", short(s), r)
		}
	}
	if n := len(restored.Groups()); n != 0 {
		t.Fatalf("%d groups left after deleting all", n)
	}
}

func TestTopicRegistryKeepsEveryByteThroughApplySnapshotAndRestore(t *testing.T) {
	strs := awkwardStrings()
	f := NewMetaFSM(nil)
	var index uint64
	for name, s := range strs {
		index++
		if r := apply(t, f, index, &TopicCreate{Topic: topicWith(s)}); r != nil {
			t.Fatalf("%s: %v", name, r)
		}
	}
	check := func(t *testing.T, f *MetaFSM) {
		t.Helper()
		if n := len(f.Topics()); n != len(strs) {
			t.Fatalf("%d topics, want %d", n, len(strs))
		}
		for name, s := range strs {
			if got, ok := f.Topic(s); !ok || !reflect.DeepEqual(got, topicWith(s)) {
				t.Fatalf("%s: topic lost bytes (found %v):\n got %s\nwant %s", name, ok, short(got), short(topicWith(s)))
			}
		}
	}
	check(t, f)
	restored := NewMetaFSM(nil)
	roundTrip(t, f, restored)
	check(t, restored)
	for _, s := range strs {
		index++
		if r := apply(t, restored, index, &TopicDelete{Name: s}); r != nil {
			t.Fatalf("%s: TopicDelete: %v", short(s), r)
		}
	}
}

// The ids of the bug report: distinct byte strings that a text encoding
// maps onto the one string "x-a\uFFFD".
var fffdEqualIDs = []string{"x-a\xfe", "x-a\xff", "x-a\uFFFD"}

func TestInvalidUTF8GroupIDsKeepTheirOwnOffsets(t *testing.T) {
	f := NewShardFSM(0, nil)
	for i, id := range fffdEqualIDs {
		apply(t, f, uint64(i+1), &OffsetCommit{GroupID: id, Timestamp: 1, Offsets: []OffsetCommitPartition{
			{Topic: "t", Partition: 0, Offset: Offset{Offset: int64(1000 * (i + 1)), LeaderEpoch: -1, ExpireTimestamp: -1}},
		}})
	}
	check := func(t *testing.T, f *ShardFSM) {
		t.Helper()
		if n := len(f.Groups()); n != len(fffdEqualIDs) {
			t.Errorf("%d groups, want %d: %q", n, len(fffdEqualIDs), groupIDs(f))
		}
		for i, id := range fffdEqualIDs {
			o, ok := f.Offset(id, TopicPartition{Topic: "t", Partition: 0})
			if want := int64(1000 * (i + 1)); !ok || o.Offset != want {
				t.Errorf("group %q: offset %d (found %v), want %d", id, o.Offset, ok, want)
			}
		}
	}
	check(t, f)
	restored := NewShardFSM(0, nil)
	roundTrip(t, f, restored)
	check(t, restored)
}

func TestInvalidUTF8TopicsKeepTheirOwnOffsets(t *testing.T) {
	f := NewShardFSM(0, nil)
	var offsets []OffsetCommitPartition
	for i, topic := range fffdEqualIDs {
		offsets = append(offsets, OffsetCommitPartition{Topic: topic, Partition: 0, Offset: Offset{Offset: int64(i + 1), ExpireTimestamp: -1}})
	}
	apply(t, f, 1, &OffsetCommit{GroupID: "g", Timestamp: 1, Offsets: offsets})
	restored := NewShardFSM(0, nil)
	roundTrip(t, f, restored)
	for _, s := range []*ShardFSM{f, restored} {
		if n := len(s.Offsets("g")); n != len(fffdEqualIDs) {
			t.Errorf("%d offsets, want %d", n, len(fffdEqualIDs))
		}
		for i, topic := range fffdEqualIDs {
			if o, ok := s.Offset("g", TopicPartition{Topic: topic, Partition: 0}); !ok || o.Offset != int64(i+1) {
				t.Errorf("topic %q: offset %d (found %v), want %d", topic, o.Offset, ok, i+1)
			}
		}
	}
}

func TestInvalidUTF8TopicNamesAreDistinctTopics(t *testing.T) {
	f := NewMetaFSM(nil)
	for i, name := range fffdEqualIDs {
		if r := apply(t, f, uint64(i+1), &TopicCreate{Topic: Topic{Name: name, Partitions: int32(i + 1)}}); r != nil {
			if err, _ := r.(error); errors.Is(err, ErrTopicExists) {
				t.Errorf("creating %q: %v", name, err)
				continue
			}
			t.Fatal(r)
		}
	}
	restored := NewMetaFSM(nil)
	roundTrip(t, f, restored)
	for _, m := range []*MetaFSM{f, restored} {
		for i, name := range fffdEqualIDs {
			if tp, ok := m.Topic(name); !ok || tp.Name != name || tp.Partitions != int32(i+1) {
				t.Errorf("topic %q: got %q with %d partitions (found %v)", name, tp.Name, tp.Partitions, ok)
			}
		}
	}
}

func TestEmptyAndNilByteFieldsMeanTheSame(t *testing.T) {
	for _, b := range [][]byte{nil, {}} {
		g := Group{ID: "g", State: StateStable, Members: []Member{{ID: "m", Protocols: []Protocol{{Name: "p", Metadata: b}}, Assignment: b}}}
		enc, err := Encode(&GroupPut{Group: g})
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		m := cmd.(*GroupPut).Group.Members[0]
		if len(m.Assignment) != 0 || len(m.Protocols[0].Metadata) != 0 {
			t.Fatalf("%#v came back as %#v / %#v", b, m.Assignment, m.Protocols[0].Metadata)
		}
	}
}

func groupIDs(f *ShardFSM) []string {
	var out []string
	for _, g := range f.Groups() {
		out = append(out, g.ID)
	}
	return out
}

// short formats v for a failure message, eliding the 32 KiB strings.
func short(v any) string {
	s := fmt.Sprintf("%+q", v)
	if len(s) > 400 {
		return s[:200] + " … " + s[len(s)-200:]
	}
	return strings.ToValidUTF8(s, "?")
}

// TestByteFieldsStayBytesAndStringsStayStrings reads an entry's body without
// the Go types: []byte fields are msgpack bin, string fields msgpack str
// with the exact bytes.
func TestByteFieldsStayBytesAndStringsStayStrings(t *testing.T) {
	b, err := Encode(&GroupPut{Group: Group{ID: "x-a\xfe", State: StateStable, Members: []Member{{
		ID: "\xed\xa0\x80", Protocols: []Protocol{{Name: "p\x00", Metadata: []byte("x-a\xfe")}}, Assignment: []byte{0xff},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := codec.NewDecoderBytes(b[2:], msgpack).Decode(&body); err != nil {
		t.Fatal(err)
	}
	group := body["group"].(map[any]any)
	member := group["members"].([]any)[0].(map[any]any)
	protocol := member["protocols"].([]any)[0].(map[any]any)
	for _, c := range []struct {
		field string
		got   any
		want  any
	}{
		{"group id", group["id"], "x-a\xfe"},
		{"member id", member["id"], "\xed\xa0\x80"},
		{"protocol name", protocol["name"], "p\x00"},
		{"metadata", protocol["metadata"], []byte("x-a\xfe")},
		{"assignment", member["assignment"], []byte{0xff}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %T %+q, want %T %+q", c.field, c.got, c.got, c.want, c.want)
		}
	}
}

// FuzzCommandsKeepTheirBytes: any string, in any string field, comes back
// with the bytes it went in with.
func FuzzCommandsKeepTheirBytes(f *testing.F) {
	for _, s := range awkwardStrings() {
		f.Add(s, []byte(s))
	}
	f.Fuzz(func(t *testing.T, s string, b []byte) {
		g := groupWith(s)
		g.Members[0].Assignment = b
		for _, cmd := range []Command{&GroupPut{Group: g}, commitWith(s, 1), &TopicCreate{Topic: topicWith(s)}, &ClusterStamp{ID: s}} {
			entry, err := Encode(cmd)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(entry)
			if err != nil {
				t.Fatal(err)
			}
			// Nil and empty slices mean the same (an empty one may come
			// back nil).
			if !reflect.DeepEqual(emptyToNil(got), emptyToNil(cmd)) {
				t.Fatalf("%s lost bytes:\n got %s\nwant %s", cmd.CommandType(), short(got), short(cmd))
			}
		}
	})
}

// FuzzDecodeNeverPanics: Decode answers any entry with a command or an
// error (Apply turns the error into its panic; Decode itself must not).
func FuzzDecodeNeverPanics(f *testing.F) {
	for _, c := range v1Commands() {
		b, _ := encodeV1(c.written)
		f.Add(b)
		b, _ = Encode(c.written)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Decode(b)
	})
}

// emptyToNil returns a copy of the command cmd points to with every empty
// slice and map replaced by nil.
func emptyToNil(cmd Command) any {
	v := reflect.New(reflect.TypeOf(cmd).Elem())
	v.Elem().Set(reflect.ValueOf(cmd).Elem())
	clearEmpty(v.Elem())
	return v.Interface()
}

func clearEmpty(v reflect.Value) {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct {
			c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(c, v)
			for i := range c.Len() {
				clearEmpty(c.Index(i))
			}
			v.Set(c)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			clearEmpty(v.Field(i))
		}
	}
}
