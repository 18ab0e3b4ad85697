package groups

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
)

// This file is the online upgrade (Kafka 4.x's validateOnlineUpgrade and
// convertToConsumerGroup): a consumer-protocol member joining a classic
// group that has members turns it into a consumer group, each classic
// member keeping its assignment at the group's generation, so the classic
// members carry on and are told to rejoin at the new epoch that the join
// brings.

// upgradeClassic turns the classic group into a consumer group and
// installs it, with the write that stores it held until the join that
// asked succeeds (consumerGroup.upgrade); the heartbeat goes on from
// there, and if it is refused the classic group comes back as stored. It refuses, with ErrGroupIDNotFound and Kafka's message, when
// group.consumer.migration.policy does not allow upgrades, when the group
// does not use the consumer protocol or its metadata does not parse, or
// when it has more members than group.consumer.max.size. Takes the
// classic group's lock, then the new group's (private until installed),
// then c.mu; called without any.
func (c *Coordinator) upgradeClassic(classic *classicGroup) error {
	classic.mu.Lock()
	defer classic.mu.Unlock()
	if classic.closed {
		return nil // gone already: look again
	}
	refuse := func(why string) error {
		return fmt.Errorf("%w: Cannot upgrade classic group %s to consumer group because %s.", ErrGroupIDNotFound, classic.id, why)
	}
	switch {
	case classic.state == Dead:
		return fmt.Errorf("%w: group %s is being deleted", ErrCoordinatorNotAvailable, classic.id)
	case c.cfg.MigrationPolicy != MigrationUpgrade && c.cfg.MigrationPolicy != MigrationBidirectional:
		return refuse("online upgrade is disabled")
	case classic.protocolType != clientProtocolType:
		return refuse("the group does not use the consumer embedded protocol")
	case len(classic.members) > int(c.cfg.ConsumerMaxSize):
		return refuse("the group size exceeds the consumer group maximum size")
	}
	g, w, err := consumerGroupFromClassic(c, classic, c.topicsView())
	if err != nil {
		return refuse(err.Error())
	}
	g.mu.Lock() // private until its write is enqueued and its sessions run
	defer g.mu.Unlock()
	c.mu.Lock()
	if !c.active || c.classics[classic.id] != classic {
		c.mu.Unlock()
		return nil // no longer this coordinator's to upgrade: look again
	}
	delete(c.classics, classic.id)
	c.consumers[g.id] = g
	c.mu.Unlock()
	// Waiting joins and syncs are told to join again, now of the consumer
	// group (Kafka completes them with REBALANCE_IN_PROGRESS).
	for _, m := range classic.members {
		m.respondJoin(JoinResult{Err: ErrRebalanceInProgress, MemberID: m.id})
		m.respondSync(SyncResult{Err: ErrRebalanceInProgress})
	}
	classic.close()
	g.upgrade = w // written before the join's own write, or dropped with the group
	g.startSessions()
	c.logger.Info("classic group upgraded to a consumer group", "group", g.id, "members", len(g.members), "epoch", g.epoch)
	return nil
}

// consumerGroupFromClassic is Kafka's ConsumerGroup.fromClassicGroup: each
// member's subscription from its metadata for the group's protocol, its
// assignment (and target) from its last SyncGroup, all at the group's
// generation as their epoch. It returns the group and the write that
// stores it. Called with the classic group's lock held.
func consumerGroupFromClassic(c *Coordinator, classic *classicGroup, topics *topicsView) (*consumerGroup, *fsm.ConsumerGroupWrite, error) {
	g := newConsumerGroup(c, classic.id)
	g.epoch, g.targetEpoch = classic.generation, classic.generation
	w := &fsm.ConsumerGroupWrite{Upgrade: true, Epoch: g.epoch, TargetEpoch: g.targetEpoch}
	view := make([]targetMember, 0, len(classic.members))
	for _, id := range classic.order {
		cm := classic.members[id]
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(cm.metadataFor(classic.protocol)); err != nil {
			return nil, nil, fmt.Errorf("the embedded consumer protocol is malformed")
		}
		var assigned topicPartitions
		if len(cm.assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(cm.assignment); err != nil {
				return nil, nil, fmt.Errorf("the embedded consumer protocol is malformed")
			}
			if len(a.UserData) > 0 {
				// The coordinator's assignors cannot carry it on.
				return nil, nil, fmt.Errorf("an unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade")
			}
			for _, tp := range a.Topics {
				if t, ok := topics.byName[tp.Topic]; ok {
					assigned = assigned.add(t.id, tp.Partitions)
				}
			}
		}
		sub := fsm.ConsumerSubscription{
			InstanceID: cm.instanceID, ClientID: cm.clientID, ClientHost: cm.clientHost,
			Topics:             slices.Compact(slices.Sorted(slices.Values(meta.Topics))),
			RebalanceTimeoutMs: int32(cm.rebalanceTimeout.Milliseconds()),
			Classic:            &fsm.ClassicMemberMetadata{SessionTimeoutMs: int32(cm.sessionTimeout.Milliseconds()), Protocols: slices.Clone(cm.protocols)},
		}
		if meta.Rack != nil {
			sub.RackID = *meta.Rack
		}
		m := &consumerMember{id: cm.id, sub: sub, target: assigned}
		g.add(m)
		g.setReconciled(m, reconciled{state: reconcileStable, epoch: g.epoch, previousEpoch: g.epoch, assigned: assigned})
		view = append(view, m.targetMember(sub, nil, g.c.cfg.AuthorizeTopic))
		w.Subscriptions = append(w.Subscriptions, fsm.ConsumerSubscriptionPut{MemberID: m.id, Subscription: sub})
		w.Targets = append(w.Targets, fsm.ConsumerTargetPut{MemberID: m.id, Partitions: toConsumerPartitions(assigned)})
		w.Assignments = append(w.Assignments, fsm.ConsumerAssignmentPut{MemberID: m.id, Assignment: m.rec.record()})
	}
	g.metadataHash = topics.hashOf(view)
	g.hashVersion, g.hashChecked = topics.version, true
	w.MetadataHash = g.metadataHash
	return g, w, nil
}
