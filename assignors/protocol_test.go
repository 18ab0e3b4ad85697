package assignors_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/assignors"
)

func TestSubscriptionRoundTrip(t *testing.T) {
	s := assignors.Subscription{
		Topics:     []string{"a", "b"},
		UserData:   []byte{1, 2, 3},
		Owned:      []assignors.TopicPartitions{{Topic: "a", Partitions: []int32{0, 2}}},
		Generation: 9,
		Rack:       "rack-1",
	}
	got, err := assignors.DecodeSubscription(assignors.EncodeSubscription(s))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip: got %+v, want %+v", got, s)
	}
}

// TestSubscriptionVersions decodes every ConsumerMemberMetadata version;
// fields a version lacks take their defaults.
func TestSubscriptionVersions(t *testing.T) {
	for v := int16(0); v <= 3; v++ {
		m := kmsg.NewConsumerMemberMetadata()
		m.Version = v
		m.Topics = []string{"t"}
		m.UserData = []byte("ud")
		m.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: []int32{1}}}
		m.Generation = 4
		m.Rack = kmsg.StringPtr("r")
		got, err := assignors.DecodeSubscription(m.AppendTo(nil))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		want := assignors.Subscription{Topics: []string{"t"}, UserData: []byte("ud"), Generation: -1}
		if v >= 1 {
			want.Owned = []assignors.TopicPartitions{{Topic: "t", Partitions: []int32{1}}}
		}
		if v >= 2 {
			want.Generation = 4
		}
		if v >= 3 {
			want.Rack = "r"
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("v%d: got %+v, want %+v", v, got, want)
		}
	}
}

// TestSubscriptionV1WithoutOwned: some clients announce v1 and send v0's
// fields; Kafka's and franz-go's clients read those as v0, and so do we.
func TestSubscriptionV1WithoutOwned(t *testing.T) {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = []string{"t"}
	b := m.AppendTo(nil)
	b[1] = 1
	got, err := assignors.DecodeSubscription(b)
	if err != nil || !slices.Equal(got.Topics, []string{"t"}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if b[1] != 1 {
		t.Fatal("decoding modified its input")
	}
}

func TestMalformed(t *testing.T) {
	for _, b := range [][]byte{{0}, {0, 3, 0, 0, 0, 9}, {0, 0, 0, 0, 0, 1, 0, 5, 'a'}} {
		if _, err := assignors.DecodeSubscription(b); !errors.Is(err, assignors.ErrMalformedMetadata) {
			t.Errorf("subscription %v: %v", b, err)
		}
		if _, err := assignors.DecodeAssignment(b); !errors.Is(err, assignors.ErrMalformedMetadata) {
			t.Errorf("assignment %v: %v", b, err)
		}
	}
	bl := assignors.Balancer(assignors.CooperativeSticky())
	if _, _, err := bl.MemberBalancer([]kmsg.JoinGroupResponseMember{{MemberID: "m", ProtocolMetadata: []byte{0, 2}}}); !errors.Is(err, assignors.ErrMalformedMetadata) {
		t.Errorf("member balancer: %v", err)
	}
}

func TestAssignmentRoundTrip(t *testing.T) {
	a := assignors.Assignment{
		Partitions: []assignors.TopicPartitions{{Topic: "a", Partitions: []int32{0, 3}}, {Topic: "b", Partitions: []int32{1}}},
		UserData:   []byte("x"),
	}
	got, err := assignors.DecodeAssignment(assignors.EncodeAssignment(a))
	if err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if got, err := assignors.DecodeAssignment(nil); err != nil || got.NumPartitions() != 0 {
		t.Fatalf("empty assignment: %+v, %v", got, err)
	}
	// franz-go reads what we encode.
	m, err := kgo.ParseConsumerSyncAssignment(assignors.EncodeAssignment(a))
	if err != nil || !reflect.DeepEqual(m, map[string][]int32{"a": {0, 3}, "b": {1}}) {
		t.Fatalf("franz-go parsed %v, %v", m, err)
	}
}

// TestJoinGroupMetadataLikeFranz: our balancers' JoinGroup metadata says
// what franz-go's say, so either can lead a group of both.
func TestJoinGroupMetadataLikeFranz(t *testing.T) {
	topics := []string{"a", "b"}
	current := map[string][]int32{"b": {2}, "a": {0, 1}}
	for _, tc := range []struct {
		ours   assignors.Assignor
		theirs kgo.GroupBalancer
	}{
		{assignors.Range(), kgo.RangeBalancer()},
		{assignors.RoundRobin(), kgo.RoundRobinBalancer()},
		{assignors.Sticky(), kgo.StickyBalancer()},
		{assignors.CooperativeSticky(), kgo.CooperativeStickyBalancer()},
	} {
		ours, err := assignors.DecodeSubscription(assignors.Balancer(tc.ours).JoinGroupMetadata(topics, current, 7))
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := assignors.DecodeSubscription(tc.theirs.JoinGroupMetadata(topics, current, 7))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ours, theirs) {
			t.Errorf("%s: ours %+v, franz-go's %+v", tc.ours.Name(), ours, theirs)
		}
		if got := assignors.Balancer(tc.ours).IsCooperative(); got != tc.theirs.IsCooperative() {
			t.Errorf("%s: cooperative %v", tc.ours.Name(), got)
		}
	}
}

// leader balances members' JoinGroup metadata as a group leader would.
func leader(t *testing.T, b kgo.GroupBalancer, topics map[string]int32, members ...kmsg.JoinGroupResponseMember) map[string]map[string][]int32 {
	t.Helper()
	mb, _, err := b.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]int32{}
	for _, s := range into.IntoSyncAssignment() {
		m, err := b.ParseSyncAssignment(s.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		out[s.MemberID] = m
	}
	return out
}

func joined(id string, metadata []byte) kmsg.JoinGroupResponseMember {
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID, m.ProtocolMetadata = id, metadata
	return m
}

// TestMixedGroupsKeepOwnership: whichever client leads, members keep what
// they own. franz-go leads members whose metadata we wrote, we lead members
// whose metadata franz-go wrote.
func TestMixedGroupsKeepOwnership(t *testing.T) {
	topics := map[string]int32{"t": 6}
	owned := []map[string][]int32{{"t": {1, 4}}, {"t": {0, 5}}, {"t": {2, 3}}}
	for _, tc := range []struct {
		name           string
		writer, reader kgo.GroupBalancer
	}{
		{"franz leads kcoord cooperative", assignors.Balancer(assignors.CooperativeSticky()), kgo.CooperativeStickyBalancer()},
		{"kcoord leads franz cooperative", kgo.CooperativeStickyBalancer(), assignors.Balancer(assignors.CooperativeSticky())},
		{"franz leads kcoord sticky", assignors.Balancer(assignors.Sticky()), kgo.StickyBalancer()},
		{"kcoord leads franz sticky", kgo.StickyBalancer(), assignors.Balancer(assignors.Sticky())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var members []kmsg.JoinGroupResponseMember
			for i, o := range owned {
				members = append(members, joined(string(rune('a'+i)), tc.writer.JoinGroupMetadata([]string{"t"}, o, 3)))
			}
			got := leader(t, tc.reader, topics, members...)
			for i, o := range owned {
				if id := string(rune('a' + i)); !reflect.DeepEqual(got[id], o) {
					t.Errorf("%s got %v, owned %v", id, got[id], o)
				}
			}
		})
	}
}

// TestJavaCooperativeUserData: Java's CooperativeStickyAssignor members on
// ConsumerMemberMetadata v1 carry their generation as the whole user data.
// A member in generation 5 keeps a partition a member of generation 4 also
// claims.
func TestJavaCooperativeUserData(t *testing.T) {
	v1 := func(gen int32, parts ...int32) []byte {
		m := kmsg.NewConsumerMemberMetadata()
		m.Version = 1
		m.Topics = []string{"t"}
		m.UserData = kbin.AppendInt32(nil, gen)
		m.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: parts}}
		return m.AppendTo(nil)
	}
	got := leader(t, assignors.Balancer(assignors.CooperativeSticky()), map[string]int32{"t": 2},
		joined("old", v1(4, 0, 1)), joined("new", v1(5, 0)))
	if !reflect.DeepEqual(got["new"], map[string][]int32{"t": {0}}) {
		t.Errorf("new member got %v, want t/0 it owns in the newer generation", got["new"])
	}
	if slices.Contains(got["old"]["t"], 0) {
		t.Errorf("the member of the older generation got t/0: %v", got["old"])
	}
}

// TestJavaStickyUserDataV0: Java's StickyAssignor before KIP-341 sent its
// assignment without a generation.
func TestJavaStickyUserDataV0(t *testing.T) {
	ud := kmsg.NewStickyMemberMetadata() // generation -1 encodes as v0
	ud.CurrentAssignment = []kmsg.StickyMemberMetadataCurrentAssignment{{Topic: "t", Partitions: []int32{3, 2}}}
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	meta.UserData = ud.AppendTo(nil)
	fresh := kmsg.NewConsumerMemberMetadata()
	fresh.Topics = []string{"t"}
	got := leader(t, assignors.Balancer(assignors.Sticky()), map[string]int32{"t": 4},
		joined("a", fresh.AppendTo(nil)), joined("b", meta.AppendTo(nil)))
	if !reflect.DeepEqual(got["b"], map[string][]int32{"t": {2, 3}}) {
		t.Errorf("b got %v, want the t/2 and t/3 it had", got["b"])
	}
}

// TestIdenticalMetadata: members sending the same bytes, claims included,
// are still separate members; claims two members make in the same
// generation do not stand (no stickiness), but either may be given the
// partition: neither has to revoke it first.
func TestIdenticalMetadata(t *testing.T) {
	meta := assignors.Balancer(assignors.CooperativeSticky()).JoinGroupMetadata([]string{"t"}, map[string][]int32{"t": {0, 1}}, 4)
	static := joined("c", meta)
	static.InstanceID = kmsg.StringPtr("instance")
	got := leader(t, assignors.Balancer(assignors.CooperativeSticky()), map[string]int32{"t": 6},
		joined("a", meta), joined("b", meta), static)
	n := 0
	for id, m := range got {
		if len(m["t"]) != 2 {
			t.Errorf("%s got %v, want 2 of 6", id, m)
		}
		n += len(m["t"])
	}
	if n != 6 {
		t.Errorf("%d of 6 partitions assigned: %v", n, got)
	}
}
