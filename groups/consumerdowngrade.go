package groups

import (
	"slices"

	"github.com/kcoord/kcoord/fsm"
)

// This file is the online downgrade (Kafka 4.x's
// validateOnlineDowngradeWithFencedMembers and convertToClassicGroup):
// when the last consumer-protocol member of a consumer group leaves and
// classic members remain, the group becomes a classic group again, each
// member holding its part of the target, and a rebalance starts so the
// classic members run their own protocol from there.

// fenceAndEnqueue fences members and enqueues the write, downgrading the
// group instead when only classic members would remain. It returns what
// an answer that depends on it waits for. Called with g.mu held.
func (g *consumerGroup) fenceAndEnqueue(ms ...*consumerMember) *pendingWrite {
	if g.downgradable(ms) {
		if pw := g.downgrade(ms); pw != nil {
			return pw
		}
	}
	return g.enqueue(g.fence(ms...))
}

// downgradable reports whether fencing leaving leaves only classic
// members, at least one, no more than group.max.size, with a migration
// policy that allows downgrades. Called with g.mu held.
func (g *consumerGroup) downgradable(leaving []*consumerMember) bool {
	policy := g.c.cfg.MigrationPolicy
	if policy != MigrationDowngrade && policy != MigrationBidirectional {
		return false
	}
	remaining := 0
	for _, m := range g.members {
		if slices.Contains(leaving, m) {
			continue
		}
		if m.sub.Classic == nil || len(m.sub.Classic.Protocols) == 0 {
			return false
		}
		remaining++
	}
	return remaining > 0 && remaining <= int(g.c.cfg.MaxSize)
}

// downgrade replaces the group by a classic group of its remaining
// members (ClassicGroup.fromConsumerGroup): Stable at the group epoch as
// its generation, the protocol chosen by the classic vote, each member
// assigned what it holds now (assigned and pending revocation; Kafka
// stores the target, which may name a partition another member still
// holds, and a failover or an upgrade before the classic rebalance ends
// would hand it out twice); it is stored with one GroupPut marked
// Downgrade, chained to the group's writes, and starts a rebalance at
// once. The consumer group is
// closed. If the write fails, undoDowngrade puts a consumer group back,
// to be reloaded from the FSM. It returns nil, having changed nothing,
// when this coordinator no longer serves the group. Called with g.mu held.
func (g *consumerGroup) downgrade(leaving []*consumerMember) *pendingWrite {
	c := g.c
	topics := c.topicsView()
	now := c.now()
	rec := fsm.Group{ID: g.id, ProtocolType: clientProtocolType, Generation: g.epoch, State: fsm.StateStable, StateTimestamp: now}
	for _, m := range g.sortedMembers() {
		if slices.Contains(leaving, m) {
			continue
		}
		rec.Members = append(rec.Members, fsm.Member{
			ID: m.id, InstanceID: m.sub.InstanceID, ClientID: m.sub.ClientID, ClientHost: m.sub.ClientHost,
			SessionTimeoutMs: m.sub.Classic.SessionTimeoutMs, RebalanceTimeoutMs: m.sub.RebalanceTimeoutMs,
			Protocols:  slices.Clone(m.sub.Classic.Protocols),
			Assignment: encodeClassicAssignment(m.held(), m.sub.Classic.Protocols[0].Metadata, topics),
		})
	}
	rec.Leader = rec.Members[0].ID
	classic := classicGroupFromRecord(c, rec)
	classic.protocol = classic.selectProtocol()
	classic.subscribed, classic.subscribedKnown = classic.computeSubscribedTopics()
	rec.Protocol = classic.protocol
	classic.mu.Lock() // private until its sessions run
	defer classic.mu.Unlock()
	c.mu.Lock()
	if !c.active || c.consumers[g.id] != g {
		c.mu.Unlock()
		return nil
	}
	delete(c.consumers, g.id)
	c.classics[g.id] = classic
	c.mu.Unlock()
	for _, m := range leaving {
		g.remove(m)
	}
	g.close()
	f := c.write(&fsm.GroupPut{Group: rec, Downgrade: true, ConsumerAfter: g.writes})
	for _, m := range classic.members {
		classic.startSession(m)
	}
	classic.prepareRebalance("downgrade: the last consumer-protocol member left")
	c.logger.Info("consumer group downgraded to a classic group", "group", g.id, "members", len(classic.members), "generation", rec.Generation)
	pw := &pendingWrite{done: make(chan struct{})}
	go func() {
		pw.err = waitWrite(f)
		if pw.err != nil {
			c.logger.Warn("downgrading a consumer group failed; reloading it", "group", rec.ID, "error", pw.err)
			c.undoDowngrade(classic)
		}
		close(pw.done)
	}()
	return pw
}

// undoDowngrade stops serving a classic group whose downgrade write
// failed and puts a stale consumer group in its place, which the next
// request reloads from the FSM (reloadConsumer). Runs on the write's
// goroutine.
func (c *Coordinator) undoDowngrade(classic *classicGroup) {
	classic.mu.Lock()
	defer classic.mu.Unlock()
	if classic.closed {
		return
	}
	placeholder := newConsumerGroup(c, classic.id)
	placeholder.stale = true
	c.mu.Lock()
	if c.classics[classic.id] == classic {
		delete(c.classics, classic.id)
		c.consumers[classic.id] = placeholder
	}
	c.mu.Unlock()
	classic.close()
}

// encodeClassicAssignment encodes partitions as the consumer protocol's
// assignment, at the version of a member's subscription metadata (Kafka's
// prepareAssignment); topics no longer registered are left out.
func encodeClassicAssignment(tp topicPartitions, metadata []byte, topics *topicsView) []byte {
	a := kmsgAssignment(metadata)
	for _, p := range topics.named(tp) {
		a.Topics = append(a.Topics, kmsgAssignmentTopic(p))
	}
	return a.AppendTo(nil)
}

// held is what m holds now: assigned and still to revoke.
func (m *consumerMember) held() topicPartitions {
	var tp topicPartitions
	for t, parts := range m.rec.assigned {
		tp = tp.add(t, parts)
	}
	for t, parts := range m.rec.pendingRevocation {
		tp = tp.add(t, parts)
	}
	return tp
}
