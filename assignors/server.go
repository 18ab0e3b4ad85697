package assignors

import "fmt"

// ServerAssignor computes a consumer group's target assignment on the
// coordinator, for groups of the consumer protocol (KIP-848). It is Kafka's
// ConsumerGroupPartitionAssignor: members name the one they want in
// ConsumerGroupHeartbeat's ServerAssignor, and the coordinator runs it
// whenever the group's epoch moves past the epoch of its target
// assignment. Members then reconcile towards the target one partition at a
// time (revoked before it is assigned elsewhere), so an assignor is free to
// move any partition; the built-in ones move as few as balance allows.
//
// Implementations must be safe for concurrent use and deterministic: Target
// given the same group returns the same plan. The coordinator calls Target
// on the goroutine that writes the group's new target, so it must not
// block on anything but the CPU.
type ServerAssignor interface {
	// Name is the name members give in ConsumerGroupHeartbeat's
	// ServerAssignor and that group.consumer.assignors lists.
	Name() string

	// Target returns one assignment per member of g, in the order of
	// g.Members. Every partition it assigns belongs to a topic of g.Topics
	// that its member subscribes to, and no partition is assigned twice.
	// An error fails the epoch's assignment (Kafka's
	// PartitionAssignorException): the group keeps its current target.
	Target(g *TargetGroup) ([]Assignment, error)
}

// TargetGroup is a consumer-protocol group as its assignor sees it: Kafka's
// GroupSpec with its SubscribedTopicDescriber.
type TargetGroup struct {
	// Topics maps every topic that exists to its number of partitions.
	// Subscribed topics missing here (not created yet, or deleted) get no
	// assignment, as Kafka leaves out topic names it cannot resolve.
	Topics map[string]int32
	// Members of the group.
	Members []TargetMember
}

// TargetMember is one member of a TargetGroup: Kafka's MemberSubscription
// with the member's part of the current target assignment.
type TargetMember struct {
	// ID is the member id; InstanceID the static member's instance id, or "".
	ID, InstanceID string
	// Rack is the member's rack, or "". The built-in server assignors do
	// not use it, as Kafka's do not (see Uniform).
	Rack string
	// Topics the member subscribes to, with its regular expression (if any)
	// already resolved to topic names.
	Topics []string
	// Target is the member's part of the group's current target assignment
	// (not what it owns right now: a member may still be reconciling). The
	// sticky assignor keeps as much of it as balance allows.
	Target []TopicPartitions
}

// DefaultServerAssignor is what a consumer-protocol group uses when its
// members name no assignor: the first of Kafka's group.consumer.assignors
// default (uniform, range).
const DefaultServerAssignor = "uniform"

// Uniform returns Kafka's UniformAssignor ("uniform", the default): the most
// even assignment the subscriptions allow, and among those the one that
// keeps the most partitions in their members' current targets.
//
// Kafka's homogeneous builder (every member subscribes alike) gives the
// extra partitions of an uneven split to the first members it iterates;
// this one gives them to the members whose targets hold the most, which
// moves fewer partitions and is balanced just as well. For mixed
// subscriptions Kafka's heterogeneous builder balances by at most sixteen
// rounds of moves; this one settles the balance exactly (the sticky
// planner's flows over classes of members, see the package doc), so a
// group Kafka leaves uneven comes out even here. Neither uses racks: Kafka
// 4.0 dropped rack awareness from its server assignors (both ignore
// MemberSubscription.rackId).
func Uniform() ServerAssignor { return uniformAssignor{} }

type uniformAssignor struct{}

func (uniformAssignor) Name() string { return "uniform" }

func (uniformAssignor) Target(g *TargetGroup) ([]Assignment, error) {
	in, err := buildTargetGroup(g, claimsTarget)
	if err != nil {
		return nil, err
	}
	return in.assignments((&sticky{}).plan(in)), nil
}

// ServerRange returns Kafka's server-side RangeAssignor ("range"): each
// topic's partitions split into consecutive ranges over the members that
// subscribe to it, in Kafka's member order (static members first by
// instance id, then the others by member id), the first members of that
// order getting one more when the split is uneven. Members that subscribe
// alike to topics of equal size get the same ranges of each
// (co-partitioning, which joins across topics rely on). It does not look at
// current targets, as Kafka's does not: a member joining shifts the ranges
// of the members after it.
func ServerRange() ServerAssignor { return serverRange{} }

type serverRange struct{}

func (serverRange) Name() string { return "range" }

func (serverRange) Target(g *TargetGroup) ([]Assignment, error) {
	in, err := buildTargetGroup(g, claimsNone)
	if err != nil {
		return nil, err
	}
	return in.assignments(rangeAssignor{}.plan(in)), nil
}

// ServerAssignorNamed returns the built-in server assignor of that name
// ("" is DefaultServerAssignor's), or ErrUnknownServerAssignor, which the
// coordinator answers as Kafka's UNSUPPORTED_ASSIGNOR.
func ServerAssignorNamed(name string) (ServerAssignor, error) {
	switch name {
	case "", "uniform":
		return Uniform(), nil
	case "range":
		return ServerRange(), nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownServerAssignor, name)
}

// buildTargetGroup makes the input of a TargetGroup. Every current target
// counts alike (one generation): a target assignment never holds a
// partition twice, and if a caller's did, neither claim would stand.
func buildTargetGroup(g *TargetGroup, mode claimMode) (*input, error) {
	b := newBuilder(mode, len(g.Members))
	for i := range g.Members {
		m := &g.Members[i]
		idx := b.member(m.ID, m.InstanceID, m.Topics, "")
		if mode == claimsTarget {
			b.members[idx].gen = 0
			for _, tp := range m.Target {
				b.claim(idx, tp.Topic, tp.Partitions)
			}
		}
	}
	return b.finish(g.Topics, nil)
}
