package assignors

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Registry maps strategy names to assignors, so that a strategy can be
// chosen by name (partition.assignment.strategy) and custom ones plugged
// in. It is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]Assignor
}

// javaNames are the class names of Kafka's built-in assignors, as
// partition.assignment.strategy lists them.
var javaNames = map[string]string{
	"org.apache.kafka.clients.consumer.RangeAssignor":             "range",
	"org.apache.kafka.clients.consumer.RoundRobinAssignor":        "roundrobin",
	"org.apache.kafka.clients.consumer.StickyAssignor":            "sticky",
	"org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

// DefaultStrategy is Kafka's default partition.assignment.strategy (since
// 3.0): range, with cooperative-sticky for a later upgrade.
const DefaultStrategy = "range,cooperative-sticky"

// NewRegistry returns a registry holding the built-in assignors: range,
// roundrobin, sticky and cooperative-sticky.
func NewRegistry() *Registry {
	r := &Registry{byName: make(map[string]Assignor)}
	for _, a := range []Assignor{Range(), RoundRobin(), Sticky(), CooperativeSticky()} {
		r.byName[a.Name()] = a
	}
	return r
}

// Register adds a under its name. Names must be non-empty and free of
// commas and spaces; a name can be registered once.
func (r *Registry) Register(a Assignor) error {
	name := a.Name()
	if name == "" || strings.ContainsAny(name, ", \t\n") {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateAssignor, name)
	}
	r.byName[name] = a
	return nil
}

// Lookup returns the assignor registered under name, which may also be the
// Java class name of a Kafka built-in.
func (r *Registry) Lookup(name string) (Assignor, error) {
	if short, ok := javaNames[name]; ok {
		name = short
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownAssignor, name)
	}
	return a, nil
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.byName))
	for name := range r.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Strategy resolves a partition.assignment.strategy value, a comma
// separated list of names in order of preference, to its assignors. An
// empty value is DefaultStrategy.
func (r *Registry) Strategy(value string) ([]Assignor, error) {
	if strings.TrimSpace(value) == "" {
		value = DefaultStrategy
	}
	var out []Assignor
	for _, name := range strings.Split(value, ",") {
		a, err := r.Lookup(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
