package assignors_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/kcoord/kcoord/assignors"
)

// member returns a member subscribed to topics.
func member(id string, topics ...string) assignors.Member {
	return assignors.Member{ID: id, Subscription: assignors.Subscription{Topics: topics, Generation: -1}}
}

// plan renders assignments as member → "topic:partitions ...", sorted.
func plan(t *testing.T, a assignors.Assignor, g *assignors.Group) map[string]string {
	t.Helper()
	out, err := a.Assign(g)
	if err != nil {
		t.Fatal(err)
	}
	owners(t, g, out)
	m := make(map[string]string, len(out))
	for i, as := range out {
		s := ""
		for _, tps := range as.Partitions {
			if s != "" {
				s += " "
			}
			s += fmt.Sprintf("%s:%v", tps.Topic, tps.Partitions)
		}
		m[g.Members[i].ID] = s
	}
	return m
}

func checkPlan(t *testing.T, a assignors.Assignor, g *assignors.Group, want map[string]string) {
	t.Helper()
	if got := plan(t, a, g); !reflect.DeepEqual(got, want) {
		t.Errorf("%s plan:\n got %v\nwant %v", a.Name(), got, want)
	}
}

func TestRangeClassicExamples(t *testing.T) {
	for _, tc := range []struct {
		partitions, consumers int32
		want                  []string
	}{
		{4, 2, []string{"t:[0 1]", "t:[2 3]"}},
		{3, 2, []string{"t:[0 1]", "t:[2]"}},
		{10, 3, []string{"t:[0 1 2 3]", "t:[4 5 6]", "t:[7 8 9]"}},
		{7, 3, []string{"t:[0 1 2]", "t:[3 4]", "t:[5 6]"}},
		{1, 2, []string{"t:[0]", ""}},
		{3, 1, []string{"t:[0 1 2]"}},
	} {
		t.Run(fmt.Sprintf("%d_over_%d", tc.partitions, tc.consumers), func(t *testing.T) {
			g := &assignors.Group{Topics: map[string]int32{"t": tc.partitions}}
			want := map[string]string{}
			// Members arrive in any order; Range sorts them.
			for i := tc.consumers - 1; i >= 0; i-- {
				id := fmt.Sprintf("c%d", i)
				g.Members = append(g.Members, member(id, "t"))
				want[id] = tc.want[i]
			}
			checkPlan(t, assignors.Range(), g, want)
		})
	}
}

// TestRangeKafkaExamples are results of Kafka's RangeAssignorTest.
func TestRangeKafkaExamples(t *testing.T) {
	t.Run("mixed topics", func(t *testing.T) {
		g := &assignors.Group{Topics: map[string]int32{"topic1": 3, "topic2": 2}, Members: []assignors.Member{
			member("consumer1", "topic1"), member("consumer2", "topic1", "topic2"), member("consumer3", "topic1"),
		}}
		checkPlan(t, assignors.Range(), g, map[string]string{
			"consumer1": "topic1:[0]", "consumer2": "topic1:[1] topic2:[0 1]", "consumer3": "topic1:[2]",
		})
	})
	t.Run("two topics six partitions", func(t *testing.T) {
		g := &assignors.Group{Topics: map[string]int32{"topic1": 3, "topic2": 3}, Members: []assignors.Member{
			member("consumer1", "topic1", "topic2"), member("consumer2", "topic1", "topic2"),
		}}
		checkPlan(t, assignors.Range(), g, map[string]string{
			"consumer1": "topic1:[0 1] topic2:[0 1]", "consumer2": "topic1:[2] topic2:[2]",
		})
	})
	t.Run("static members sort by instance id first", func(t *testing.T) {
		// consumer-b has instance id "a", so it comes before the
		// dynamic consumer-a, as Kafka's MemberInfo orders them.
		static := member("consumer-b", "t")
		static.InstanceID = "a"
		g := &assignors.Group{Topics: map[string]int32{"t": 3}, Members: []assignors.Member{member("consumer-a", "t"), static}}
		checkPlan(t, assignors.Range(), g, map[string]string{"consumer-b": "t:[0 1]", "consumer-a": "t:[2]"})
	})
	t.Run("nothing to assign", func(t *testing.T) {
		g := &assignors.Group{Topics: map[string]int32{"t": 3}, Members: []assignors.Member{
			member("c0"), member("c1", "missing"),
		}}
		checkPlan(t, assignors.Range(), g, map[string]string{"c0": "", "c1": ""})
	})
}

// racked returns a topic whose partition p has replicas on racks[p%len].
func racked(partitions int, racks ...[]string) [][]string {
	out := make([][]string, partitions)
	for p := range out {
		out[p] = racks[p%len(racks)]
	}
	return out
}

func inRack(m assignors.Member, rack string) assignors.Member {
	m.Rack = rack
	return m
}

// TestRangeRackAware follows Kafka's rack-aware RangeAssignor (KIP-881).
func TestRangeRackAware(t *testing.T) {
	members := []assignors.Member{
		inRack(member("c0", "a", "b"), "r0"), inRack(member("c1", "a", "b"), "r1"), inRack(member("c2", "a", "b"), "r2"),
	}
	r0, r1, r2 := []string{"r0"}, []string{"r1"}, []string{"r2"}
	t.Run("rack-local ranges", func(t *testing.T) {
		g := &assignors.Group{
			Topics:  map[string]int32{"a": 6},
			Racks:   map[string][][]string{"a": racked(6, r0, r1, r2)},
			Members: members,
		}
		checkPlan(t, assignors.Range(), g, map[string]string{"c0": "a:[0 3]", "c1": "a:[1 4]", "c2": "a:[2 5]"})
	})
	t.Run("co-partitioned topics stay together", func(t *testing.T) {
		g := &assignors.Group{
			Topics:  map[string]int32{"a": 6, "b": 6},
			Racks:   map[string][][]string{"a": racked(6, r0, r1, r2), "b": racked(6, r0, r1, r2)},
			Members: members,
		}
		checkPlan(t, assignors.Range(), g, map[string]string{
			"c0": "a:[0 3] b:[0 3]", "c1": "a:[1 4] b:[1 4]", "c2": "a:[2 5] b:[2 5]",
		})
	})
	t.Run("co-partitioned topics on different racks fall back to ranges", func(t *testing.T) {
		g := &assignors.Group{
			Topics:  map[string]int32{"a": 6, "b": 6},
			Racks:   map[string][][]string{"a": racked(6, r0, r1, r2), "b": racked(6, r1, r2, r0)},
			Members: members,
		}
		checkPlan(t, assignors.Range(), g, map[string]string{
			"c0": "a:[0 1] b:[0 1]", "c1": "a:[2 3] b:[2 3]", "c2": "a:[4 5] b:[4 5]",
		})
	})
	t.Run("replicas on every rack need no rack matching", func(t *testing.T) {
		g := &assignors.Group{
			Topics:  map[string]int32{"a": 6},
			Racks:   map[string][][]string{"a": racked(6, []string{"r0", "r1", "r2"})},
			Members: members,
		}
		checkPlan(t, assignors.Range(), g, map[string]string{"c0": "a:[0 1]", "c1": "a:[2 3]", "c2": "a:[4 5]"})
	})
	t.Run("members without racks get plain ranges", func(t *testing.T) {
		g := &assignors.Group{
			Topics:  map[string]int32{"a": 6},
			Racks:   map[string][][]string{"a": racked(6, r0, r1, r2)},
			Members: []assignors.Member{member("c0", "a"), member("c1", "a"), member("c2", "a")},
		}
		checkPlan(t, assignors.Range(), g, map[string]string{"c0": "a:[0 1]", "c1": "a:[2 3]", "c2": "a:[4 5]"})
	})
	t.Run("an uneven share still goes rack-local first", func(t *testing.T) {
		// 7 partitions over 3: shares 3, 2, 2. c0 takes its rack's
		// 0, 3, 6; c1 1, 4; c2 2, 5.
		g := &assignors.Group{
			Topics:  map[string]int32{"a": 7},
			Racks:   map[string][][]string{"a": racked(7, r0, r1, r2)},
			Members: members,
		}
		checkPlan(t, assignors.Range(), g, map[string]string{"c0": "a:[0 3 6]", "c1": "a:[1 4]", "c2": "a:[2 5]"})
	})
}

func TestRoundRobinKafkaExamples(t *testing.T) {
	t.Run("two topics six partitions", func(t *testing.T) {
		g := &assignors.Group{Topics: map[string]int32{"topic1": 3, "topic2": 3}, Members: []assignors.Member{
			member("consumer2", "topic1", "topic2"), member("consumer1", "topic1", "topic2"),
		}}
		checkPlan(t, assignors.RoundRobin(), g, map[string]string{
			"consumer1": "topic1:[0 2] topic2:[1]", "consumer2": "topic1:[1] topic2:[0 2]",
		})
	})
	t.Run("skips members not subscribed", func(t *testing.T) {
		g := &assignors.Group{Topics: map[string]int32{"topic1": 3, "topic2": 2}, Members: []assignors.Member{
			member("consumer1", "topic1"), member("consumer2", "topic1", "topic2"), member("consumer3", "topic1"),
		}}
		checkPlan(t, assignors.RoundRobin(), g, map[string]string{
			"consumer1": "topic1:[0]", "consumer2": "topic1:[1] topic2:[0 1]", "consumer3": "topic1:[2]",
		})
	})
	t.Run("static members", func(t *testing.T) {
		a, b := member("consumer-z", "t"), member("consumer-a", "t")
		a.InstanceID, b.InstanceID = "instance-1", "instance-2"
		g := &assignors.Group{Topics: map[string]int32{"t": 5}, Members: []assignors.Member{b, a, member("consumer-0", "t")}}
		checkPlan(t, assignors.RoundRobin(), g, map[string]string{
			"consumer-z": "t:[0 3]", "consumer-a": "t:[1 4]", "consumer-0": "t:[2]",
		})
	})
	t.Run("identical subscriptions end at most one apart", func(t *testing.T) {
		g := &assignors.Group{Topics: map[string]int32{"a": 7, "b": 5, "c": 1}}
		for i := range 4 {
			g.Members = append(g.Members, member(fmt.Sprintf("m%d", i), "a", "b", "c"))
		}
		out, err := assignors.RoundRobin().Assign(g)
		if err != nil {
			t.Fatal(err)
		}
		own := owners(t, g, out)
		checkComplete(t, g, own)
		checkEvenPerSubscription(t, g, own)
	})
}

func TestRangeAndRoundRobinAssignEverything(t *testing.T) {
	for _, a := range []assignors.Assignor{assignors.Range(), assignors.RoundRobin()} {
		for seed := range 50 {
			g := randomGroup(newRand(uint64(seed)), 12, 6, 9, 4)
			out, err := a.Assign(g)
			if err != nil {
				t.Fatal(err)
			}
			checkComplete(t, g, owners(t, g, out))
		}
	}
}
