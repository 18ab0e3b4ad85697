package assignors_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/assignors"
)

// TestRandomIsDeterministic: the same seed and group give the same plan,
// whatever order members come in; every partition goes to a subscriber.
func TestRandomIsDeterministic(t *testing.T) {
	for seed := range 20 {
		g := randomGroup(newRand(uint64(seed)), 9, 5, 12, 3)
		a, err := assignors.Random(uint64(seed)).Assign(g)
		if err != nil {
			t.Fatal(err)
		}
		checkComplete(t, g, owners(t, g, a))
		reversed := &assignors.Group{Topics: g.Topics, Members: slices.Clone(g.Members)}
		slices.Reverse(reversed.Members)
		b, err := assignors.Random(uint64(seed)).Assign(reversed)
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: member order changed the plan", seed)
		}
	}
}

// TestBalancerCustom runs a custom assignor through the franz-go adapter.
func TestBalancerCustom(t *testing.T) {
	b := assignors.Balancer(assignors.Random(3))
	var members []kmsg.JoinGroupResponseMember
	for i := range 4 {
		members = append(members, joined(fmt.Sprintf("m%d", i), b.JoinGroupMetadata([]string{"t"}, nil, -1)))
	}
	got := leader(t, b, map[string]int32{"t": 20}, members...)
	n := 0
	for _, m := range got {
		n += len(m["t"])
	}
	if n != 20 || b.ProtocolName() != "random" || b.IsCooperative() {
		t.Fatalf("custom balancer assigned %d of 20 partitions: %v", n, got)
	}

	bad := assignors.Balancer(short{assignors.Random(1)})
	mb, _, err := bad.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"t": 20}); !errors.Is(err, assignors.ErrInvalidPlan) {
		t.Errorf("a plan missing members: %v", err)
	}
}

// short drops the last member's assignment.
type short struct{ assignors.Assignor }

func (s short) Assign(g *assignors.Group) ([]assignors.Assignment, error) {
	out, err := s.Assignor.Assign(g)
	return out[:len(out)-1], err
}
