package fsm

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
)

// Groups go to the table or the map of whole ones by their content, and
// every read gives back exactly the Group last put, as a map of Groups
// would, through every move between the two.
func TestClassicGroupsBehaveAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	c := newClassicGroups(newGroupTable())
	model := map[string]Group{}
	kinds := []func(id string, step int) Group{
		func(id string, step int) Group { return Group{ID: id, State: StateEmpty, StateTimestamp: int64(step)} },
		func(id string, step int) Group {
			return Group{ID: id, ProtocolType: "consumer", Protocol: "range", Generation: int32(step), Leader: "m", State: StateStable,
				StateTimestamp: int64(step), Members: []Member{{ID: "m", ClientID: "c", Protocols: []Protocol{{Name: "range"}}}}}
		},
		// Empty after rebalances: a generation and a protocol type.
		func(id string, step int) Group {
			return Group{ID: id, ProtocolType: "consumer", Generation: 3, State: StateEmpty, StateTimestamp: int64(step)}
		},
		// Empty with members that are an empty slice, not nil.
		func(id string, step int) Group {
			return Group{ID: id, State: StateEmpty, StateTimestamp: int64(step), Members: []Member{}}
		},
		func(id string, step int) Group { return Group{ID: id, State: StateStable, StateTimestamp: int64(step)} },
		// Empty with one field beyond the simple ones: each keeps it.
		func(id string, step int) Group {
			return Group{ID: id, State: StateEmpty, StateTimestamp: int64(step), ProtocolType: "consumer"}
		},
		func(id string, step int) Group {
			return Group{ID: id, State: StateEmpty, StateTimestamp: int64(step), Protocol: "range"}
		},
		func(id string, step int) Group {
			return Group{ID: id, State: StateEmpty, StateTimestamp: int64(step), Generation: 1}
		},
		func(id string, step int) Group {
			return Group{ID: id, State: StateEmpty, StateTimestamp: int64(step), Leader: "m"}
		},
	}
	for step := range 5000 {
		id := fmt.Sprint("g", rng.IntN(50))
		if rng.IntN(4) == 0 {
			c.delete(id)
			delete(model, id)
		} else {
			g := kinds[rng.IntN(len(kinds))](id, step)
			c.put(g)
			model[id] = g
		}
		got, ok := c.get(id)
		want, wantOK := model[id]
		if ok != wantOK || !reflect.DeepEqual(got, want) || c.has(id) != wantOK {
			t.Fatalf("step %d: get(%s) = %+v %v, want %+v %v", step, id, got, ok, want, wantOK)
		}
		_, inFull := c.full[id]
		if _, inSimple := simpleGroup(c.table, id); inFull && inSimple {
			t.Fatalf("step %d: %s is both full and simple", step, id)
		}
	}
	if c.len() != len(model) {
		t.Fatalf("len %d, want %d", c.len(), len(model))
	}
	seen := map[string]bool{}
	c.each(func(g Group) {
		if seen[g.ID] || !reflect.DeepEqual(g, model[g.ID]) {
			t.Errorf("each: %+v (seen before: %v), want %+v", g, seen[g.ID], model[g.ID])
		}
		seen[g.ID] = true
	})
	if len(seen) != len(model) {
		t.Errorf("each visited %d, want %d", len(seen), len(model))
	}
}

// A group a commit made keeps its state timestamp beside its id only.
// Reports heap bytes a group for 100 k of them, in classicGroups beside a
// map of whole Groups.
//
//	go test ./fsm -run '^$' -bench ClassicGroupsMemory -benchtime 1x
func BenchmarkClassicGroupsMemory(b *testing.B) {
	const groups = 100_000
	ids := make([]string, groups)
	for i := range ids {
		ids[i] = fmt.Sprint("group-", i)
	}
	b.Run("classicGroups", func(b *testing.B) {
		for b.Loop() {
			before := heapAfterGC()
			c := newClassicGroups(newGroupTable())
			for i, id := range ids {
				c.put(Group{ID: id, State: StateEmpty, StateTimestamp: int64(i)})
			}
			b.ReportMetric(float64(heapAfterGC()-before)/groups, "B/group")
			runtime.KeepAlive(c)
		}
	})
	b.Run("map-of-groups", func(b *testing.B) {
		for b.Loop() {
			before := heapAfterGC()
			m := make(map[string]Group)
			for i, id := range ids {
				m[id] = Group{ID: id, State: StateEmpty, StateTimestamp: int64(i)}
			}
			b.ReportMetric(float64(heapAfterGC()-before)/groups, "B/group")
			runtime.KeepAlive(m)
		}
	})
}
