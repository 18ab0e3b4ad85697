package groups

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/kcoord/kcoord/assignors"
)

func mustBuildTarget(t *testing.T, b targetBuild) targetResult {
	t.Helper()
	res, err := buildTarget(b)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func countPartitions(tp topicPartitions) int {
	n := 0
	for _, ps := range tp {
		n += len(ps)
	}
	return n
}

// TestTargetFollowsMembership: three members share a 12-partition topic;
// one leaves and the others take over only its partitions; a static member
// that comes back under a new member id starts from the departed one's
// target and gets it all back, and nobody else changes.
func TestTargetFollowsMembership(t *testing.T) {
	topics := map[string]registeredTopic{"orders": {id: topicA, partitions: 12}}
	members := []targetMember{
		{id: "m1", instanceID: "i-1", topics: []string{"orders"}},
		{id: "m2", topics: []string{"orders"}},
		{id: "m3", topics: []string{"orders"}},
	}
	res := mustBuildTarget(t, targetBuild{assignor: assignors.Uniform(), members: members, topics: topics})
	for _, m := range members {
		if n := countPartitions(res.target[m.id]); n != 4 {
			t.Fatalf("%s got %d partitions, want 4: %v", m.id, n, res.target)
		}
	}
	if !slices.Equal(res.changed, []string{"m1", "m2", "m3"}) || len(res.removed) != 0 {
		t.Fatalf("changed %v removed %v, want every member changed and none removed", res.changed, res.removed)
	}
	first := res.target

	// m1 (static) leaves for good: m2 and m3 split its partitions and keep theirs.
	res = mustBuildTarget(t, targetBuild{assignor: assignors.Uniform(), members: members[1:], current: first, topics: topics})
	if !slices.Equal(res.removed, []string{"m1"}) || !slices.Equal(res.changed, []string{"m2", "m3"}) {
		t.Fatalf("changed %v removed %v after m1 left", res.changed, res.removed)
	}
	for _, id := range []string{"m2", "m3"} {
		for _, p := range first[id][topicA] {
			if !res.target[id].contains(topicA, p) {
				t.Fatalf("%s lost partition %d when m1 left", id, p)
			}
		}
	}

	// Instead, m1 restarts as m1b with the same instance id.
	back := slices.Clone(members)
	back[0].id = "m1b"
	res = mustBuildTarget(t, targetBuild{assignor: assignors.Uniform(), members: back, current: first,
		replaces: map[string]string{"m1b": "m1"}, topics: topics})
	if !sameTopicPartitions(res.target["m1b"], first["m1"]) {
		t.Fatalf("m1b got %v, want m1's %v", res.target["m1b"], first["m1"])
	}
	if !slices.Equal(res.changed, []string{"m1b"}) || !slices.Equal(res.removed, []string{"m1"}) {
		t.Fatalf("changed %v removed %v after the static member came back", res.changed, res.removed)
	}

	// m1 comes back as m1b while m4 joins: m1b gives up one of m1's
	// partitions and keeps the rest, rather than starting from nothing.
	withNew := append(slices.Clone(back), targetMember{id: "m4", topics: []string{"orders"}})
	res = mustBuildTarget(t, targetBuild{assignor: assignors.Uniform(), members: withNew, current: first,
		replaces: map[string]string{"m1b": "m1"}, topics: topics})
	kept := 0
	for _, p := range res.target["m1b"][topicA] {
		if first["m1"].contains(topicA, p) {
			kept++
		}
	}
	if kept != 3 || countPartitions(res.target["m1b"]) != 3 {
		t.Fatalf("m1b got %v of m1's %v: want 3 of them and nothing else", res.target["m1b"], first["m1"])
	}

	// Nothing changed, nothing changes.
	res = mustBuildTarget(t, targetBuild{assignor: assignors.Uniform(), members: members, current: first, topics: topics})
	if len(res.changed) != 0 || len(res.removed) != 0 {
		t.Fatalf("an unchanged group changed %v and removed %v", res.changed, res.removed)
	}
}

// TestTargetResolvesSubscriptions: a regular expression matches whole
// registered names; a named topic that does not exist gets nothing until
// it is created; a topic deleted and created again under a new id is not
// kept from the old target.
func TestTargetResolvesSubscriptions(t *testing.T) {
	re, err := compileSubscriptionRegex(`orders-.*`)
	if err != nil {
		t.Fatal(err)
	}
	topics := map[string]registeredTopic{
		"orders-eu":  {id: topicID{1}, partitions: 2},
		"orders-us":  {id: topicID{2}, partitions: 2},
		"xorders-eu": {id: topicID{3}, partitions: 2},
		"payments":   {id: topicID{4}, partitions: 2},
	}
	m := targetMember{id: "m", topics: []string{"payments", "refunds"}, regex: re}
	if got, want := subscribedTopics(&m, topics), []string{"orders-eu", "orders-us", "payments"}; !slices.Equal(got, want) {
		t.Fatalf("subscribed to %v, want %v", got, want)
	}

	res := mustBuildTarget(t, targetBuild{assignor: assignors.Uniform(), members: []targetMember{m}, topics: topics})
	want := tps(topicID{1}, []int32{0, 1}, topicID{2}, []int32{0, 1}, topicID{4}, []int32{0, 1})
	if !reflect.DeepEqual(res.target["m"], want) {
		t.Fatalf("target %v, want %v", res.target["m"], want)
	}

	// refunds is created: the member gets it at the next target.
	topics["refunds"] = registeredTopic{id: topicID{5}, partitions: 1}
	res = mustBuildTarget(t, targetBuild{assignor: assignors.Uniform(), members: []targetMember{m}, current: res.target, topics: topics})
	if !res.target["m"].contains(topicID{5}, 0) || !slices.Equal(res.changed, []string{"m"}) {
		t.Fatalf("after refunds was created: target %v, changed %v", res.target["m"], res.changed)
	}

	for _, expr := range []string{`orders-(`, `foo)|(.*`, `x)|(?:y`, `a\`} {
		if _, err := compileSubscriptionRegex(expr); err == nil {
			t.Errorf("%q compiled; Kafka refuses it as INVALID_REGULAR_EXPRESSION", expr)
		}
	}
	alt, err := compileSubscriptionRegex(`eu|us`)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"eu": true, "us": true, "eu-1": false, "x-us": false, "": false} {
		if got := alt.MatchString(name); got != want {
			t.Errorf("eu|us matching %q: %v, want %v (the whole name, as Kafka matches)", name, got, want)
		}
	}
}

// TestTargetDropsTopicsNoLongerRegistered: a topic deleted and created
// again under the same name has a new id, and the partitions a target held
// under the old id are not kept: with two members, the one whose target
// held only the old id's partitions gets its share of the new topic like
// a member that held nothing, and no target names an id that is not
// registered.
func TestTargetDropsTopicsNoLongerRegistered(t *testing.T) {
	oldID, newID := topicID{9}, topicID{4}
	topics := map[string]registeredTopic{"payments": {id: newID, partitions: 4}}
	members := []targetMember{{id: "a", topics: []string{"payments"}}, {id: "b", topics: []string{"payments"}}}
	current := map[string]topicPartitions{
		"a": tps(oldID, []int32{0, 1, 2, 3}),
		"b": tps(newID, []int32{0, 1}),
	}
	res := mustBuildTarget(t, targetBuild{assignor: assignors.Uniform(), members: members, current: current, topics: topics})
	for id, tp := range res.target {
		for topic := range tp {
			if topic != newID {
				t.Fatalf("%s's target names topic id %v, which is not registered", id, topic)
			}
		}
	}
	if want := tps(newID, []int32{0, 1}); !reflect.DeepEqual(res.target["b"], want) {
		t.Fatalf("b got %v, want to keep %v", res.target["b"], want)
	}
	if want := tps(newID, []int32{2, 3}); !reflect.DeepEqual(res.target["a"], want) {
		t.Fatalf("a got %v, want the rest, %v", res.target["a"], want)
	}
}

// TestTargetWithRange: the range assignor through the same build gives
// co-partitioned ranges in member order.
func TestTargetWithRange(t *testing.T) {
	topics := map[string]registeredTopic{"left": {id: topicA, partitions: 4}, "right": {id: topicB, partitions: 4}}
	res := mustBuildTarget(t, targetBuild{assignor: assignors.ServerRange(), topics: topics, members: []targetMember{
		{id: "b", topics: []string{"left", "right"}},
		{id: "a", topics: []string{"left", "right"}},
	}})
	if want := tps(topicA, []int32{0, 1}, topicB, []int32{0, 1}); !reflect.DeepEqual(res.target["a"], want) {
		t.Fatalf("a got %v, want %v", res.target["a"], want)
	}
	if want := tps(topicA, []int32{2, 3}, topicB, []int32{2, 3}); !reflect.DeepEqual(res.target["b"], want) {
		t.Fatalf("b got %v, want %v", res.target["b"], want)
	}
}

func TestPreferredAssignor(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, "uniform"},
		{[]string{"", ""}, "uniform"},
		{[]string{"range", "", "uniform", "range"}, "range"},
		{[]string{"uniform", "range"}, "range"}, // a tie: the first name
		{[]string{"", "range"}, "range"},
	} {
		if got := preferredAssignor(tc.names, "uniform"); got != tc.want {
			t.Errorf("preferredAssignor(%q) = %s, want %s", tc.names, got, tc.want)
		}
	}
}

// TestSubscriptionMetadataHash: the hash moves when a subscribed topic is
// created, recreated under a new id or grows, and only then.
func TestSubscriptionMetadataHash(t *testing.T) {
	topics := map[string]registeredTopic{"a": {id: topicID{1}, partitions: 3}, "b": {id: topicID{2}, partitions: 1}}
	base := subscriptionMetadataHash(topics, []string{"a", "missing"})
	if again := subscriptionMetadataHash(topics, []string{"missing", "a", "a"}); again != base {
		t.Fatal("the hash depends on the order or repeats of the subscriptions")
	}
	// Pinned: the hash is stored in the log, so it must not change.
	if base != 0x6c145822394b4811 {
		t.Fatalf("the hash of the same metadata changed: %#x", base)
	}
	topics["b"] = registeredTopic{id: topicID{2}, partitions: 9}
	if subscriptionMetadataHash(topics, []string{"a", "missing"}) != base {
		t.Fatal("a topic the group does not subscribe to moved the hash")
	}
	for name, change := range map[string]func(map[string]registeredTopic){
		"a subscribed topic created": func(m map[string]registeredTopic) { m["missing"] = registeredTopic{id: topicID{7}, partitions: 1} },
		"partitions added":           func(m map[string]registeredTopic) { m["a"] = registeredTopic{id: topicID{1}, partitions: 4} },
		"recreated under a new id":   func(m map[string]registeredTopic) { m["a"] = registeredTopic{id: topicID{8}, partitions: 3} },
		"a subscribed topic deleted": func(m map[string]registeredTopic) { delete(m, "a") },
	} {
		m := maps.Clone(topics)
		change(m)
		if subscriptionMetadataHash(m, []string{"a", "missing"}) == base {
			t.Errorf("%s: the hash did not move", name)
		}
	}
}
