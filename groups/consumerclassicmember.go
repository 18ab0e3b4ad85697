package groups

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
)

// This file serves classic-protocol members (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup) inside a consumer group, as Kafka 4.x does
// (classicGroupJoinToConsumerGroup and its siblings): such a member is a
// consumer-group member like any other, whose subscription comes from its
// JoinGroup metadata and whose assignment the coordinator computes. A
// JoinGroup is one reconciliation step, answered with the member's epoch
// as the generation and no leader; SyncGroup hands out the member's
// assigned partitions; Heartbeat answers REBALANCE_IN_PROGRESS when the
// member must rejoin to take its next step.

// MigrationPolicy is group.consumer.migration.policy: which way a group
// may change protocol while it has members.
type MigrationPolicy string

// The migration policies, Kafka's names.
const (
	MigrationBidirectional MigrationPolicy = "bidirectional"
	MigrationUpgrade       MigrationPolicy = "upgrade"
	MigrationDowngrade     MigrationPolicy = "downgrade"
	MigrationDisabled      MigrationPolicy = "disabled"
)

// joinToConsumer serves a classic JoinGroup for the id of a consumer
// group, served under epoch; nil (the group went meanwhile) has it looked
// up again, as a classic group now. Called from a handler goroutine with
// g.mu held; unlocks it and waits for the join's write.
func (c *Coordinator) joinToConsumer(ctx context.Context, epoch uint64, g *consumerGroup, req JoinRequest) (JoinResult, error) {
	if g == nil {
		return JoinResult{}, errLookAgain
	}
	res, pw, wrote := func() (JoinResult, *pendingWrite, bool) {
		defer g.mu.Unlock()
		res, w, err := g.classicJoin(req, c.topicsView())
		if err != nil {
			res.Err = err
			return res, nil, false
		}
		return res, g.enqueue(w), w != nil
	}()
	if res.Err != nil {
		return res, nil
	}
	if err := c.answerAfter(ctx, epoch, pw, !wrote); err != nil {
		return JoinResult{Err: err, MemberID: res.MemberID}, nil
	}
	return res, nil
}

// answerAfter waits until an answer computed under a group's lock may go
// out: once pw (the write it depends on, if any) has committed, and, for
// an answer that wrote nothing, once the leadership it was read under is
// confirmed. Called without the group's lock.
func (c *Coordinator) answerAfter(ctx context.Context, epoch uint64, pw *pendingWrite, read bool) error {
	if pw != nil {
		if err := pw.await(ctx); err != nil {
			return err
		}
	}
	if read {
		return c.confirm(ctx, epoch)
	}
	return nil
}

// classicJoin is a classic member's JoinGroup to the group. Called with
// g.mu held.
func (g *consumerGroup) classicJoin(req JoinRequest, topics *topicsView) (JoinResult, *fsm.ConsumerGroupWrite, error) {
	res := JoinResult{MemberID: req.MemberID}
	if g.c.cfg.MigrationPolicy == MigrationDisabled {
		return res, nil, fmt.Errorf("%w: Cannot join the consumer group %s with the classic protocol because the group migration is disabled.",
			ErrInconsistentGroupProtocol, g.id)
	}
	unknown := req.MemberID == ""
	if unknown {
		res.MemberID = newMemberID(req.ClientID, req.InstanceID)
	}
	if err := g.checkSize(&consumerMember{id: res.MemberID}); err != nil {
		return res, nil, err
	}
	meta, err := g.checkClassicProtocols(res.MemberID, req.ProtocolType, req.Protocols)
	if err != nil {
		return res, nil, err
	}
	if req.RequireKnownMemberID && unknown && req.InstanceID == "" {
		return res, nil, ErrMemberIDRequired
	}
	m, from, err := g.classicJoinMember(res.MemberID, req.InstanceID, unknown)
	if err != nil {
		return res, nil, err
	}

	base := m.sub
	if from != nil {
		base = from.sub
	}
	sub := base
	sub.Topics = slices.Compact(slices.Sorted(slices.Values(meta.Topics)))
	sub.TopicRegex, sub.ServerAssignor = "", "" // classic members name neither
	if meta.Rack != nil {
		sub.RackID = *meta.Rack
	}
	sub.InstanceID, sub.RebalanceTimeoutMs = req.InstanceID, req.RebalanceTimeoutMs
	sub.ClientID, sub.ClientHost = req.ClientID, req.ClientHost
	sub.Classic = &fsm.ClassicMemberMetadata{SessionTimeoutMs: req.SessionTimeoutMs, Protocols: slices.Clone(req.Protocols)}
	var next *fsm.ConsumerSubscription
	if _, known := g.members[m.id]; !known || !sameSubscription(sub, m.sub) {
		next = &sub
	}
	owned := topicPartitions{}
	for _, o := range meta.OwnedPartitions {
		if t, ok := topics.byName[o.Topic]; ok {
			owned = owned.add(t.id, o.Partitions)
		}
	}
	_, w, err := g.advance(memberUpdate{m: m, from: from, next: next, owned: owned}, topics)
	if err != nil {
		return res, nil, err
	}
	m.join.stop()
	g.scheduleSync(m)
	res.MemberID, res.Generation = m.id, m.rec.epoch
	res.ProtocolType, res.Protocol = clientProtocolType, req.Protocols[0].Name
	return res, w, nil
}

// checkClassicProtocols checks a classic member's protocols (Kafka's
// throwIfClassicProtocolIsNotSupported): the consumer protocol type, and
// one protocol every other classic member of the group offers too. It
// returns the member's subscription, read from its first protocol's
// metadata. Called with g.mu held.
func (g *consumerGroup) checkClassicProtocols(id, protocolType string, protocols []fsm.Protocol) (kmsg.ConsumerMemberMetadata, error) {
	var meta kmsg.ConsumerMemberMetadata
	if protocolType != clientProtocolType || len(protocols) == 0 {
		return meta, fmt.Errorf("%w: a consumer group takes only members of protocol type %q with at least one protocol", ErrInconsistentGroupProtocol, clientProtocolType)
	}
	for _, p := range protocols {
		shared := true
		for _, o := range g.members {
			if o.id != id && o.sub.Classic != nil && !hasProtocol(o.sub.Classic.Protocols, p.Name) {
				shared = false
				break
			}
		}
		if shared {
			if err := meta.ReadFrom(protocols[0].Metadata); err != nil {
				return meta, fmt.Errorf("%w: the metadata of protocol %s is not the consumer protocol's: %v", ErrInconsistentGroupProtocol, protocols[0].Name, err)
			}
			return meta, nil
		}
	}
	return meta, fmt.Errorf("%w: the member's protocols are not supported by the group's other classic members", ErrInconsistentGroupProtocol)
}

// classicJoinMember finds the member a classic JoinGroup is for (Kafka's
// getOrMaybeSubscribe*ConsumerGroupMember for classic members): a dynamic
// member is made when unknown; a static member joining without a member
// id takes over from the member holding its instance id, of either
// protocol; with a member id, it must hold the instance id. Called with
// g.mu held.
func (g *consumerGroup) classicJoinMember(id, instanceID string, unknown bool) (m, from *consumerMember, err error) {
	if instanceID == "" {
		if m = g.members[id]; m == nil {
			m = &consumerMember{id: id}
		}
		return m, nil, nil
	}
	holderID, held := g.static[instanceID]
	if !unknown {
		if !held {
			return nil, nil, fmt.Errorf("%w: member with instance id %s is not a member of group %s", ErrUnknownMemberID, instanceID, g.id)
		}
		if err := g.checkStatic(id, instanceID); err != nil {
			return nil, nil, err
		}
		return g.members[holderID], nil, nil
	}
	m = &consumerMember{id: id}
	// A classic member takes its instance id over from whoever holds it,
	// at once, as in Kafka (only two consumer-protocol members wait for a
	// temporary leave).
	if holder := g.members[holderID]; held && holder != nil {
		from = holder
		m.sub, m.regex, m.target = from.sub, from.regex, from.target
	}
	return m, from, nil
}

// syncToConsumer serves a classic SyncGroup for the id of a consumer
// group (nil: it went meanwhile), served under epoch: the member's
// assigned partitions, in the consumer protocol's encoding at its
// subscription's version. Called from a handler goroutine with g.mu held;
// unlocks it.
func (c *Coordinator) syncToConsumer(ctx context.Context, epoch uint64, g *consumerGroup, req SyncRequest) SyncResult {
	if g == nil {
		return SyncResult{Err: ErrUnknownMemberID}
	}
	res, pw, err := func() (SyncResult, *pendingWrite, error) {
		defer g.mu.Unlock()
		res, err := g.classicSync(req, c.topicsView())
		return res, g.last, err
	}()
	if err == nil {
		err = c.answerAfter(ctx, epoch, pw, true)
	}
	if err != nil {
		return SyncResult{Err: err}
	}
	return res
}

// classicSync is Kafka's classicGroupSyncToConsumerGroup. Called with
// g.mu held.
func (g *consumerGroup) classicSync(req SyncRequest, topics *topicsView) (SyncResult, error) {
	m, err := g.classicMember(req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return SyncResult{}, err
	}
	protocol := m.sub.Classic.Protocols[0]
	if req.ProtocolType != "" && req.ProtocolType != clientProtocolType || req.Protocol != "" && req.Protocol != protocol.Name {
		return SyncResult{}, fmt.Errorf("%w: the protocol %s/%s is not the member's %s/%s",
			ErrInconsistentGroupProtocol, req.ProtocolType, req.Protocol, clientProtocolType, protocol.Name)
	}
	if err := g.checkCaughtUp(m); err != nil {
		return SyncResult{}, err
	}
	m.sync.stop()
	g.scheduleSession(m)
	return SyncResult{ProtocolType: clientProtocolType, Protocol: protocol.Name,
		Assignment: encodeClassicAssignment(m.rec.assigned, protocol.Metadata, topics)}, nil
}

// kmsgAssignment is an empty consumer-protocol assignment at the version
// of a subscription's metadata (at most 3, the assignment's newest).
func kmsgAssignment(metadata []byte) kmsg.ConsumerMemberAssignment {
	a := kmsg.NewConsumerMemberAssignment()
	if len(metadata) >= 2 {
		a.Version = min(int16(metadata[0])<<8|int16(metadata[1]), 3)
	}
	return a
}

func kmsgAssignmentTopic(p NamedTopicPartitions) kmsg.ConsumerMemberAssignmentTopic {
	return kmsg.ConsumerMemberAssignmentTopic{Topic: p.Topic, Partitions: p.Partitions}
}

// checkCaughtUp answers a classic member whose epoch is behind the
// group's, and that is not in the middle of revoking, that it must rejoin
// (Kafka's throwIfRebalanceInProgress), giving it its rebalance timeout
// to do so. Called with g.mu held.
func (g *consumerGroup) checkCaughtUp(m *consumerMember) error {
	if g.epoch > m.rec.epoch && m.rec.state != reconcileUnrevoked {
		g.scheduleJoinIfAbsent(m)
		return fmt.Errorf("%w: a new rebalance is triggered in group %s and member %s should rejoin to catch up", ErrRebalanceInProgress, g.id, m.id)
	}
	return nil
}

// heartbeatToConsumer serves a classic Heartbeat for the id of a
// consumer group (nil: it went meanwhile), once Heartbeat has confirmed
// the leadership. Called from a handler goroutine with g.mu held; unlocks
// it.
func (c *Coordinator) heartbeatToConsumer(ctx context.Context, g *consumerGroup, req HeartbeatRequest) error {
	if g == nil {
		return ErrUnknownMemberID
	}
	pw, err := func() (*pendingWrite, error) {
		defer g.mu.Unlock()
		return g.last, g.classicHeartbeat(req)
	}()
	if pw != nil {
		if werr := pw.await(ctx); werr != nil {
			return werr
		}
	}
	return err
}

// classicHeartbeat is Kafka's classicGroupHeartbeatToConsumerGroup: the
// member's session goes on, and it is told to rejoin
// (ErrRebalanceInProgress) when the group epoch passed its own, when it
// must revoke partitions, or when partitions it waits for were released.
// Called with g.mu held.
func (g *consumerGroup) classicHeartbeat(req HeartbeatRequest) error {
	m, err := g.classicMember(req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return err
	}
	g.scheduleSession(m)
	if m.rec.epoch < g.epoch || m.rec.state == reconcileUnrevoked ||
		m.rec.state == reconcileUnreleased && !g.waitingOnUnreleased(m) {
		g.scheduleJoinIfAbsent(m)
		return fmt.Errorf("%w: member %s of group %s should rejoin to take its next assignment", ErrRebalanceInProgress, m.id, g.id)
	}
	return nil
}

// waitingOnUnreleased reports whether a partition of m's target that m is
// not assigned yet is still held by another member. Called with g.mu held.
func (g *consumerGroup) waitingOnUnreleased(m *consumerMember) bool {
	for t, parts := range m.target {
		for _, p := range parts {
			if m.rec.assigned.contains(t, p) {
				continue
			}
			if owner, ok := g.owners[t][p]; ok && owner != m.id {
				return true
			}
		}
	}
	return false
}

// classicMember finds a classic member of the group by member and
// instance id, at generation (Kafka's validateConsumerGroupMember,
// throwIfMemberDoesNotUseClassicProtocol and throwIfGenerationIdUnmatched).
// Called with g.mu held.
func (g *consumerGroup) classicMember(id, instanceID string, generation int32) (*consumerMember, error) {
	m := g.members[id]
	if instanceID != "" {
		holder, ok := g.static[instanceID]
		if !ok {
			return nil, fmt.Errorf("%w: member with instance id %s is not a member of group %s", ErrUnknownMemberID, instanceID, g.id)
		}
		if err := g.checkStatic(id, instanceID); err != nil {
			return nil, err
		}
		m = g.members[holder]
	}
	switch {
	case m == nil:
		return nil, fmt.Errorf("%w: member %s is not a member of group %s", ErrUnknownMemberID, id, g.id)
	case m.sub.Classic == nil:
		return nil, fmt.Errorf("%w: member %s does not use the classic protocol", ErrUnknownMemberID, id)
	case generation != m.rec.epoch:
		return nil, fmt.Errorf("%w: the generation %d is not the member's epoch %d", ErrIllegalGeneration, generation, m.rec.epoch)
	}
	return m, nil
}

// leaveToConsumer serves a classic LeaveGroup for the id of a consumer
// group: every member named is fenced, in one write. Called from a handler
// goroutine with g.mu held; unlocks it and waits for the write.
func (c *Coordinator) leaveToConsumer(ctx context.Context, g *consumerGroup, leaving []LeaveMember) ([]LeaveResult, error) {
	out := make([]LeaveResult, len(leaving))
	var gone []*consumerMember
	for i, l := range leaving {
		out[i] = LeaveResult{MemberID: l.MemberID, InstanceID: l.InstanceID}
		m := g.members[l.MemberID]
		if l.InstanceID != "" {
			holder, ok := g.static[l.InstanceID]
			if !ok {
				out[i].Err = fmt.Errorf("%w: instance id %s is unknown", ErrUnknownMemberID, l.InstanceID)
				continue
			}
			if l.MemberID != "" && holder != l.MemberID {
				out[i].Err = fmt.Errorf("%w: instance id %s belongs to member %s, not %s", ErrFencedInstanceID, l.InstanceID, holder, l.MemberID)
				continue
			}
			m = g.members[holder]
		}
		if m == nil {
			out[i].Err = fmt.Errorf("%w: member %s is not a member of group %s", ErrUnknownMemberID, l.MemberID, g.id)
			continue
		}
		if !slices.Contains(gone, m) {
			gone = append(gone, m)
		}
	}
	pw := g.last
	if len(gone) > 0 {
		pw = g.fenceAndEnqueue(gone...)
	}
	g.mu.Unlock()
	if pw != nil {
		if err := pw.await(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sessionTimeout is how long m may go without a heartbeat: the session
// timeout a classic member joined with, or group.consumer.session.timeout.ms.
func (g *consumerGroup) sessionTimeout(m *consumerMember) time.Duration {
	if m.sub.Classic != nil {
		return time.Duration(m.sub.Classic.SessionTimeoutMs) * time.Millisecond
	}
	return g.c.cfg.ConsumerSessionTimeout
}
