package fsm

import (
	"cmp"
	"fmt"
	"slices"
)

// ConsumerGroup is a consumer-protocol group (KIP-848) as a shard stores it:
// the group epoch, the epoch of its target assignment, and its members,
// each with its subscription, its part of the target and where its
// reconciliation stands. It is what Kafka keeps in its ConsumerGroup*
// records; the coordinator derives everything else (timers, the inverted
// assignment) from it when it loads the shard.
type ConsumerGroup struct {
	ID string `codec:"id"`
	// Epoch is the group epoch, raised by every change of membership or
	// subscription; TargetEpoch the group epoch the target was computed at.
	Epoch       int32 `codec:"epoch"`
	TargetEpoch int32 `codec:"target_epoch"`
	// MetadataHash is the coordinator's hash of the subscribed topics'
	// metadata (ids, partition counts) at Epoch: when the topics change
	// under the group (partitions added, a topic created that a
	// subscription names or matches), the hash no longer matches and the
	// group needs a new epoch. It goes with the group epoch, not the
	// target's, as Kafka 4.1 keeps it (ConsumerGroupMetadataValue,
	// KIP-1101): a target that failed to compute leaves the epoch ahead
	// of the target, to be retried, not a hash that never matches.
	MetadataHash uint64 `codec:"metadata_hash,omitempty"`
	// StateTimestamp is when membership last changed, in Unix milliseconds
	// (offset retention of an empty group counts from it).
	StateTimestamp int64 `codec:"state_ts"`
	// Members, sorted by id.
	Members []ConsumerMember `codec:"members,omitempty"`
	// Writes counts the ConsumerGroupWrites applied to the group: each
	// write names the count it was computed at (ConsumerGroupWrite.After),
	// so the group's writes form a chain that a lost link breaks.
	Writes uint64 `codec:"writes,omitempty"`
}

// Empty reports whether the group has no members.
func (g *ConsumerGroup) Empty() bool { return len(g.Members) == 0 }

// Member returns the member with that id.
func (g *ConsumerGroup) Member(id string) (ConsumerMember, bool) {
	i, ok := slices.BinarySearchFunc(g.Members, id, func(m ConsumerMember, id string) int { return cmp.Compare(m.ID, id) })
	if !ok {
		return ConsumerMember{}, false
	}
	return g.Members[i], true
}

// ConsumerMember is one member of a ConsumerGroup: Kafka's
// ConsumerGroupMemberMetadata, ConsumerGroupTargetAssignmentMember and
// ConsumerGroupCurrentMemberAssignment records in one.
type ConsumerMember struct {
	ID string `codec:"id"`
	// Subscription is what the member last asked for.
	Subscription ConsumerSubscription `codec:"subscription"`
	// Target is the member's part of the group's target assignment.
	Target []ConsumerPartitions `codec:"target,omitempty"`
	// Assignment is the member's reconciliation.
	Assignment ConsumerAssignment `codec:"assignment"`
}

// ConsumerSubscription is a member's metadata (Kafka's
// ConsumerGroupMemberMetadataValue).
type ConsumerSubscription struct {
	InstanceID string `codec:"instance_id,omitempty"`
	RackID     string `codec:"rack_id,omitempty"`
	ClientID   string `codec:"client_id"`
	ClientHost string `codec:"client_host"`
	// Principal is who the member's last heartbeat came from
	// ("User:alice"; empty without authentication): its regex matches the
	// topics that principal may describe, on every coordinator after it.
	Principal string `codec:"principal,omitempty"`
	// Topics are the subscribed topic names and TopicRegex the subscribed
	// regular expression, as the member gave them.
	Topics             []string `codec:"topics,omitempty"`
	TopicRegex         string   `codec:"topic_regex,omitempty"`
	ServerAssignor     string   `codec:"server_assignor,omitempty"`
	RebalanceTimeoutMs int32    `codec:"rebalance_timeout_ms"`
	// Classic is set for a member that uses the classic protocol
	// (JoinGroup, SyncGroup, Heartbeat) inside the consumer group.
	Classic *ClassicMemberMetadata `codec:"classic,omitempty"`
}

// ClassicMemberMetadata is what a classic-protocol member of a consumer
// group joined with (Kafka's ClassicMemberMetadata): its session timeout
// and the protocols it offered, in its order, with their metadata.
type ClassicMemberMetadata struct {
	SessionTimeoutMs int32      `codec:"session_timeout_ms"`
	Protocols        []Protocol `codec:"protocols"`
}

// ConsumerAssignment is where a member's reconciliation stands (Kafka's
// ConsumerGroupCurrentMemberAssignmentValue).
type ConsumerAssignment struct {
	// State is the coordinator's reconciliation state number (stable,
	// unrevoked partitions, unreleased partitions); the fsm stores it as
	// given.
	State         uint8 `codec:"state"`
	Epoch         int32 `codec:"epoch"`
	PreviousEpoch int32 `codec:"previous_epoch"`
	// Assigned is what the member may consume; PendingRevocation what it
	// must still give back.
	Assigned          []ConsumerPartitions `codec:"assigned,omitempty"`
	PendingRevocation []ConsumerPartitions `codec:"pending_revocation,omitempty"`
}

// ConsumerPartitions are partitions of one topic, by topic id, as the
// consumer protocol names topics.
type ConsumerPartitions struct {
	TopicID    [16]byte `codec:"topic_id"`
	Partitions []int32  `codec:"partitions"`
}

// ConsumerGroupWrite is the body of ConsumerGroupWriteType: one atomic change
// to a consumer group, as one heartbeat, expiry or leave produces it. The
// coordinator computes it under the group's lock from the state it read;
// Apply stores it as given. Changes:
//   - Epoch, when not 0, replaces the group's, and with it MetadataHash
//     (a new epoch comes with the metadata it was taken at); TargetEpoch,
//     when not 0, replaces the target's;
//   - Leaves removes those members;
//   - Subscriptions, Targets and Assignments replace those parts of the
//     members they name, adding a member that is new (a new member comes
//     with its subscription).
//
// A member may not be both in Leaves and in a part, nor twice in one part,
// and a new member must come with a subscription: such a write is refused
// with ErrInvalidConsumerGroupWrite and changes nothing. The first write to
// a group id creates the group, and it must bring a member (else
// ErrGroupNotFound); a classic group of that id with members refuses it
// (ErrGroupTypeConflict) unless the write is the online upgrade (Upgrade,
// carrying every member the classic group had), and an empty one is
// replaced, its committed offsets kept (Kafka upgrades an empty classic
// group so). A GroupPut of a classic group for an id that is a consumer
// group with members is refused with ErrGroupTypeConflict unless it is
// the online downgrade (GroupPut.Downgrade), and replaces an empty one,
// so an id is never both.
//
// After is the group's write count (ConsumerGroup.Writes) the write was
// computed at, 0 for a group that does not exist: a write whose After is
// not the group's count is refused with ErrStaleConsumerGroupWrite. The
// coordinator enqueues a group's next write before the previous one has
// committed; if that one is lost (a timeout, a leadership change), every
// write computed on top of it is refused too, instead of applying to a
// state it was not computed from.
type ConsumerGroupWrite struct {
	GroupID string `codec:"group_id"`
	After   uint64 `codec:"after,omitempty"`
	Upgrade bool   `codec:"upgrade,omitempty"`
	// Timestamp is the leader's clock when the write was made, Unix
	// milliseconds; it becomes the group's StateTimestamp when members
	// join or leave.
	Timestamp   int64 `codec:"ts"`
	Epoch       int32 `codec:"epoch,omitempty"`
	TargetEpoch int32 `codec:"target_epoch,omitempty"`
	// MetadataHash goes with Epoch.
	MetadataHash  uint64                    `codec:"metadata_hash,omitempty"`
	Leaves        []string                  `codec:"leaves,omitempty"`
	Subscriptions []ConsumerSubscriptionPut `codec:"subscriptions,omitempty"`
	Targets       []ConsumerTargetPut       `codec:"targets,omitempty"`
	Assignments   []ConsumerAssignmentPut   `codec:"assignments,omitempty"`
}

// ConsumerSubscriptionPut sets one member's subscription.
type ConsumerSubscriptionPut struct {
	MemberID     string               `codec:"member_id"`
	Subscription ConsumerSubscription `codec:"subscription"`
}

// ConsumerTargetPut sets one member's part of the target.
type ConsumerTargetPut struct {
	MemberID   string               `codec:"member_id"`
	Partitions []ConsumerPartitions `codec:"partitions,omitempty"`
}

// ConsumerAssignmentPut sets one member's reconciliation.
type ConsumerAssignmentPut struct {
	MemberID   string             `codec:"member_id"`
	Assignment ConsumerAssignment `codec:"assignment"`
}

// CommandType implements Command.
func (ConsumerGroupWrite) CommandType() CommandType { return ConsumerGroupWriteType }

// applyConsumerGroupWrite applies c under f.mu and returns Apply's
// response.
func (f *ShardFSM) applyConsumerGroupWrite(c *ConsumerGroupWrite) any {
	if err := c.validate(); err != nil {
		return err
	}
	g, exists := f.consumerGroups[c.GroupID]
	if g.Writes != c.After {
		return fmt.Errorf("%w: %q is at write %d, the write was computed at %d", ErrStaleConsumerGroupWrite, c.GroupID, g.Writes, c.After)
	}
	if !exists {
		// Only a member joining makes a group: a write that names no
		// new member, at write 0 (the chain check above refuses one
		// computed at a later write as stale), must not bring a deleted
		// group back.
		if len(c.Subscriptions) == 0 {
			return fmt.Errorf("%w: %q", ErrGroupNotFound, c.GroupID)
		}
		if classic, ok := f.groups.get(c.GroupID); ok && !classic.Empty() && !c.Upgrade {
			return fmt.Errorf("%w: %q has %d classic members", ErrGroupTypeConflict, c.GroupID, len(classic.Members))
		}
		g = ConsumerGroup{ID: c.GroupID, StateTimestamp: c.Timestamp}
	}
	members := make(map[string]ConsumerMember, len(g.Members)+len(c.Subscriptions))
	for _, m := range g.Members {
		members[m.ID] = m
	}
	joinedOrLeft := false
	for _, id := range c.Leaves {
		if _, ok := members[id]; ok {
			delete(members, id)
			joinedOrLeft = true
		}
	}
	for _, s := range c.Subscriptions {
		m, ok := members[s.MemberID]
		if !ok {
			m.ID, joinedOrLeft = s.MemberID, true
		}
		m.Subscription = s.Subscription
		members[s.MemberID] = m
	}
	if err := setParts(members, "target", c.Targets, func(m *ConsumerMember, t ConsumerTargetPut) { m.Target = t.Partitions }); err != nil {
		return err
	}
	if err := setParts(members, "assignment", c.Assignments, func(m *ConsumerMember, a ConsumerAssignmentPut) { m.Assignment = a.Assignment }); err != nil {
		return err
	}

	next := g
	next.Writes++
	if c.Epoch != 0 {
		next.Epoch, next.MetadataHash = c.Epoch, c.MetadataHash
	}
	if c.TargetEpoch != 0 {
		next.TargetEpoch = c.TargetEpoch
	}
	if joinedOrLeft {
		next.StateTimestamp = c.Timestamp
	}
	next.Members = make([]ConsumerMember, 0, len(members))
	for _, m := range members {
		next.Members = append(next.Members, m)
	}
	slices.SortFunc(next.Members, func(a, b ConsumerMember) int { return cmp.Compare(a.ID, b.ID) })
	if !exists {
		f.groups.delete(c.GroupID) // a classic group, upgraded
	}
	f.consumerGroups[c.GroupID] = next
	return nil
}

// consumerPart is one of a ConsumerGroupWrite's per-member parts.
type consumerPart interface {
	ConsumerSubscriptionPut | ConsumerTargetPut | ConsumerAssignmentPut
	memberID() string
}

func (p ConsumerSubscriptionPut) memberID() string { return p.MemberID }
func (p ConsumerTargetPut) memberID() string       { return p.MemberID }
func (p ConsumerAssignmentPut) memberID() string   { return p.MemberID }

// setParts applies one kind of part to members, which must all be there.
func setParts[P consumerPart](members map[string]ConsumerMember, kind string, parts []P, set func(*ConsumerMember, P)) error {
	for _, p := range parts {
		m, ok := members[p.memberID()]
		if !ok {
			return fmt.Errorf("%w: %s of %q, which is not a member", ErrInvalidConsumerGroupWrite, kind, p.memberID())
		}
		set(&m, p)
		members[p.memberID()] = m
	}
	return nil
}

// validate checks what Apply can check without the state: a group id, and
// no member both leaving and updated, or updated twice in one part.
func (c *ConsumerGroupWrite) validate() error {
	if c.GroupID == "" {
		return fmt.Errorf("%w: no group id", ErrInvalidConsumerGroupWrite)
	}
	leaving := make(map[string]bool, len(c.Leaves))
	for _, id := range c.Leaves {
		leaving[id] = true
	}
	if err := checkParts(leaving, "subscription", c.Subscriptions); err != nil {
		return err
	}
	if err := checkParts(leaving, "target", c.Targets); err != nil {
		return err
	}
	return checkParts(leaving, "assignment", c.Assignments)
}

// checkParts is validate's check of one kind of part.
func checkParts[P consumerPart](leaving map[string]bool, kind string, parts []P) error {
	seen := make(map[string]bool, len(parts))
	for _, p := range parts {
		id := p.memberID()
		if leaving[id] {
			return fmt.Errorf("%w: %q both leaves and has its %s set", ErrInvalidConsumerGroupWrite, id, kind)
		}
		if seen[id] {
			return fmt.Errorf("%w: %q has its %s set twice", ErrInvalidConsumerGroupWrite, id, kind)
		}
		seen[id] = true
	}
	return nil
}

// ConsumerGroup returns the stored consumer group with that id.
func (f *ShardFSM) ConsumerGroup(id string) (ConsumerGroup, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g, ok := f.consumerGroups[id]
	return g, ok
}

// ConsumerGroups returns every stored consumer group, sorted by id.
func (f *ShardFSM) ConsumerGroups() []ConsumerGroup {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]ConsumerGroup, 0, len(f.consumerGroups))
	for _, g := range f.consumerGroups {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b ConsumerGroup) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
