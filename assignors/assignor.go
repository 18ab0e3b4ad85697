package assignors

// Assignor decides which member of a consumer group consumes which
// partition. It is Kafka's ConsumerPartitionAssignor:
//
//   - every member calls SubscriptionUserData when it joins and sends the
//     bytes in its subscription;
//   - the member the coordinator elects leader calls Assign with every
//     member's subscription;
//   - every member calls OnAssignment with the assignment it received.
//
// Implementations must be safe for concurrent use and deterministic: Assign
// given the same group returns the same plan.
type Assignor interface {
	// Name is the protocol name members advertise in JoinGroup, the name
	// partition.assignment.strategy uses ("range", "cooperative-sticky").
	Name() string

	// Protocol is the rebalance protocol the assignor needs.
	Protocol() RebalanceProtocol

	// SubscriptionUserData returns the user data a member sends with its
	// subscription, given what it knows when it joins. It may be nil.
	SubscriptionUserData(s JoinState) []byte

	// Assign returns one assignment per member of g, in the order of
	// g.Members. Every partition it assigns belongs to a topic in g.Topics
	// that its member subscribes to, and no partition is assigned twice.
	Assign(g *Group) ([]Assignment, error)

	// OnAssignment tells the assignor what this member was assigned in the
	// given generation (-1 when the caller does not know it, as with
	// franz-go, which hands balancers the assignment alone).
	OnAssignment(a Assignment, generation int32)
}

// RebalanceProtocol is how a group hands a partition from one member to
// another (Kafka's ConsumerPartitionAssignor.RebalanceProtocol).
type RebalanceProtocol int8

const (
	// Eager: every member gives up everything it owns before each
	// rebalance, and gets its whole assignment anew.
	Eager RebalanceProtocol = iota

	// Cooperative (KIP-429): members keep consuming through a rebalance.
	// A partition changing owner is revoked from its old owner in one
	// generation and assigned to the new one in the next.
	Cooperative
)

func (p RebalanceProtocol) String() string {
	if p == Cooperative {
		return "COOPERATIVE"
	}
	return "EAGER"
}

// TopicPartitions are partitions of one topic.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// Subscription is what a member sends when it joins: the consumer
// protocol's ConsumerMemberMetadata.
type Subscription struct {
	// Topics the member wants to consume.
	Topics []string
	// UserData is the assignor's SubscriptionUserData.
	UserData []byte
	// Owned are the partitions the member owns (v1+; cooperative members
	// keep owning them through a rebalance).
	Owned []TopicPartitions
	// Generation is the generation Owned was assigned in (v2+, KIP-792),
	// or -1.
	Generation int32
	// Rack is the member's rack (v3+, KIP-881), or "".
	Rack string
}

// Member is one member of the group being assigned.
type Member struct {
	ID string
	// InstanceID is the static member id (KIP-345), or "".
	InstanceID string
	Subscription
}

// Group is what the leader assigns.
type Group struct {
	// Topics maps every topic members may subscribe to to its number of
	// partitions. Subscribed topics missing here get no assignment.
	Topics map[string]int32
	// Racks optionally maps a topic to the racks of each partition's
	// replicas: Racks[topic][partition]. With racks given here and on
	// members, assignors that support KIP-881 prefer members in the rack
	// of a partition's replica.
	Racks map[string][][]string
	// Members of the group.
	Members []Member
}

// Assignment is what one member receives: the consumer protocol's
// ConsumerMemberAssignment.
type Assignment struct {
	// Partitions, sorted by topic, each topic's partitions ascending.
	Partitions []TopicPartitions
	// UserData is opaque data for the member's assignor.
	UserData []byte
}

// JoinState is what a member knows of itself when it joins a group; clients
// pass it to SubscriptionUserData.
type JoinState struct {
	// Topics the member subscribes to, sorted.
	Topics []string
	// Owned are the partitions it owns, sorted by topic.
	Owned []TopicPartitions
	// Generation is the generation it last synced in, or -1.
	Generation int32
}

// NumPartitions returns how many partitions the assignment holds.
func (a Assignment) NumPartitions() int {
	n := 0
	for _, tp := range a.Partitions {
		n += len(tp.Partitions)
	}
	return n
}
