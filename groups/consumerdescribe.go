package groups

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Group types, as ListGroups names them (KIP-848).
const (
	GroupTypeClassic  = "classic"
	GroupTypeConsumer = "consumer"
)

// ConsumerGroupDescription is a consumer group as ConsumerGroupDescribe
// answers it.
type ConsumerGroupDescription struct {
	GroupID string
	State   ConsumerGroupState
	// Epoch is the group epoch and AssignmentEpoch the target's.
	Epoch, AssignmentEpoch int32
	// AssignorName is the server-side assignor the group's target is
	// computed with.
	AssignorName string
	// Members, by id.
	Members []ConsumerMemberDescription
}

// ConsumerMemberDescription is one member of a ConsumerGroupDescription.
type ConsumerMemberDescription struct {
	MemberID, InstanceID, RackID string
	MemberEpoch                  int32
	// Classic is set for a member that uses the classic protocol.
	Classic              bool
	ClientID, ClientHost string
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	// Assignment is what the member has assigned now, and Target its part
	// of the group's target; topics no longer registered are left out.
	Assignment, Target []NamedTopicPartitions
}

// NamedTopicPartitions are partitions of one registered topic, with its
// id and name.
type NamedTopicPartitions struct {
	TopicID    [16]byte
	Topic      string
	Partitions []int32
}

// DescribeConsumer serves ConsumerGroupDescribe for one group: the group
// as its last committed write left it, confirmed by a quorum. An unknown
// id, or a classic group's, is ErrGroupIDNotFound with Kafka's message.
// Called from any handler goroutine.
func (c *Coordinator) DescribeConsumer(ctx context.Context, groupID string) (ConsumerGroupDescription, error) {
	if err := c.confirmRead(ctx); err != nil {
		return ConsumerGroupDescription{}, err
	}
	return dispatch(c, groupID, lookupMode{consumerFirst: true}, kindHandlers[ConsumerGroupDescription]{
		classic: func(g *classicGroup) (ConsumerGroupDescription, error) {
			if g == nil {
				return ConsumerGroupDescription{}, fmt.Errorf("%w: Group %s not found.", ErrGroupIDNotFound, groupID)
			}
			g.mu.Unlock()
			return ConsumerGroupDescription{}, classicGroupError{groupID}
		},
		consumer: func(g *consumerGroup) (ConsumerGroupDescription, error) {
			if g == nil {
				return ConsumerGroupDescription{}, fmt.Errorf("%w: Group %s not found.", ErrGroupIDNotFound, groupID)
			}
			return c.describeConsumer(ctx, g)
		},
	})
}

// describeConsumer describes a consumer group once the write its answer
// shows has committed. Called with g.mu held; unlocks it.
func (c *Coordinator) describeConsumer(ctx context.Context, g *consumerGroup) (ConsumerGroupDescription, error) {
	d := g.describe(c.topicsView())
	pw := g.last
	g.mu.Unlock()
	if pw != nil {
		// The answer holds what that write installed: wait for it.
		if err := pw.await(ctx); err != nil {
			return ConsumerGroupDescription{}, err
		}
	}
	return d, nil
}

// describe is the group as ConsumerGroupDescribe shows it. Called with
// g.mu held.
func (g *consumerGroup) describe(topics *topicsView) ConsumerGroupDescription {
	d := ConsumerGroupDescription{GroupID: g.id, State: g.state(), Epoch: g.epoch, AssignmentEpoch: g.targetEpoch,
		AssignorName: g.assignorName()}
	for _, m := range g.sortedMembers() {
		d.Members = append(d.Members, ConsumerMemberDescription{
			MemberID: m.id, InstanceID: m.sub.InstanceID, RackID: m.sub.RackID, MemberEpoch: m.rec.epoch, Classic: m.sub.Classic != nil,
			ClientID: m.sub.ClientID, ClientHost: m.sub.ClientHost,
			SubscribedTopicNames: slices.Clone(m.sub.Topics), SubscribedTopicRegex: m.sub.TopicRegex,
			Assignment: topics.named(m.rec.assigned), Target: topics.named(m.target),
		})
	}
	return d
}

// assignorName is the assignor the group's target is computed with.
// Called with g.mu held.
func (g *consumerGroup) assignorName() string {
	names := make([]string, 0, len(g.members))
	for _, m := range g.members {
		names = append(names, m.sub.ServerAssignor)
	}
	return preferredAssignor(names, g.c.cfg.DefaultServerAssignor)
}

// named gives partitions their topics' names, leaving out topics no
// longer registered, in id order.
func (v *topicsView) named(tp topicPartitions) []NamedTopicPartitions {
	var out []NamedTopicPartitions
	for _, p := range toTopicIDPartitions(tp) {
		if name, ok := v.names[p.TopicID]; ok {
			out = append(out, NamedTopicPartitions{TopicID: p.TopicID, Topic: name, Partitions: p.Partitions})
		}
	}
	return out
}

// listing is the group as ListGroups and the status page show it, unless
// it is closed or reloading. Called with g.mu held.
func (g *consumerGroup) listing() (GroupListing, bool) {
	if g.closed || g.stale {
		return GroupListing{}, false
	}
	return GroupListing{GroupID: g.id, Type: GroupTypeConsumer, ProtocolType: clientProtocolType, State: string(g.state()),
		Members: len(g.members), Generation: g.epoch, StateSince: time.UnixMilli(g.stateTimestamp)}, true
}
