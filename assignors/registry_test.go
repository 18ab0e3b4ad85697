package assignors_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/kcoord/kcoord/assignors"
)

func TestRegistryBuiltins(t *testing.T) {
	r := assignors.NewRegistry()
	if got, want := r.Names(), []string{"cooperative-sticky", "range", "roundrobin", "sticky"}; !slices.Equal(got, want) {
		t.Fatalf("names %v, want %v", got, want)
	}
	for name, protocol := range map[string]assignors.RebalanceProtocol{
		"range": assignors.Eager, "roundrobin": assignors.Eager, "sticky": assignors.Eager, "cooperative-sticky": assignors.Cooperative,
	} {
		a, err := r.Lookup(name)
		if err != nil || a.Name() != name || a.Protocol() != protocol {
			t.Errorf("%s: %v, %v", name, a, err)
		}
	}
	if _, err := r.Lookup("fair"); !errors.Is(err, assignors.ErrUnknownAssignor) {
		t.Errorf("unknown name: %v", err)
	}
}

// TestRegistryStrategy resolves partition.assignment.strategy values, with
// Kafka's class names for the built-ins.
func TestRegistryStrategy(t *testing.T) {
	r := assignors.NewRegistry()
	names := func(as []assignors.Assignor) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.Name())
		}
		return out
	}
	for value, want := range map[string][]string{
		"":                 {"range", "cooperative-sticky"},
		"roundrobin":       {"roundrobin"},
		" sticky , range ": {"sticky", "range"},
		"org.apache.kafka.clients.consumer.RangeAssignor,org.apache.kafka.clients.consumer.CooperativeStickyAssignor": {"range", "cooperative-sticky"},
		"org.apache.kafka.clients.consumer.RoundRobinAssignor":                                                        {"roundrobin"},
		"org.apache.kafka.clients.consumer.StickyAssignor":                                                            {"sticky"},
	} {
		got, err := r.Strategy(value)
		if err != nil || !slices.Equal(names(got), want) {
			t.Errorf("%q: %v, %v; want %v", value, names(got), err, want)
		}
	}
	if _, err := r.Strategy("range,fair"); !errors.Is(err, assignors.ErrUnknownAssignor) {
		t.Errorf("unknown strategy: %v", err)
	}
}

func TestRegistryCustom(t *testing.T) {
	r := assignors.NewRegistry()
	if err := r.Register(assignors.Random(1)); err != nil {
		t.Fatal(err)
	}
	if a, err := r.Lookup("random"); err != nil || a.Name() != "random" {
		t.Fatalf("lookup: %v, %v", a, err)
	}
	if err := r.Register(assignors.Random(2)); !errors.Is(err, assignors.ErrDuplicateAssignor) {
		t.Errorf("duplicate: %v", err)
	}
	if err := r.Register(assignors.Range()); !errors.Is(err, assignors.ErrDuplicateAssignor) {
		t.Errorf("built-in name: %v", err)
	}
	for _, name := range []string{"", "a,b", "a b"} {
		if err := r.Register(named{assignors.Random(1), name}); !errors.Is(err, assignors.ErrInvalidName) {
			t.Errorf("name %q: %v", name, err)
		}
	}
}

// named renames an assignor.
type named struct {
	assignors.Assignor
	name string
}

func (n named) Name() string { return n.name }
