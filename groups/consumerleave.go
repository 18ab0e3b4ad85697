package groups

import (
	"fmt"

	"github.com/kcoord/kcoord/fsm"
)

// leave is a heartbeat at epoch -1 (the member leaves for good) or -2 (a
// static member leaves for a while): Kafka's consumerGroupLeave. A member
// leaving for good is fenced at once (fence); a static member leaving for
// a while keeps its assignment at epoch -2, its partitions held for it,
// until it returns or its session expires. It enqueues the write and
// returns it. Called with g.mu held.
func (g *consumerGroup) leave(req *ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, *pendingWrite, error) {
	m := g.members[req.MemberID]
	if req.InstanceID != nil {
		id, ok := g.static[*req.InstanceID]
		if !ok {
			return ConsumerHeartbeatResult{}, nil, fmt.Errorf("%w: instance id %s is unknown", ErrUnknownMemberID, *req.InstanceID)
		}
		if id != req.MemberID {
			return ConsumerHeartbeatResult{}, nil, fmt.Errorf("%w: instance id %s belongs to member %s, not %s", ErrFencedInstanceID, *req.InstanceID, id, req.MemberID)
		}
		m = g.members[id]
	}
	if m == nil {
		return ConsumerHeartbeatResult{}, nil, fmt.Errorf("%w: member %s is not a member of group %s", ErrUnknownMemberID, req.MemberID, g.id)
	}
	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: req.MemberEpoch}
	if req.MemberEpoch == leaveStaticMemberEpoch {
		g.c.logger.Debug("static member left temporarily", "group", g.id, "member", m.id, "instance", m.sub.InstanceID)
		rec := m.rec
		rec.state, rec.epoch, rec.pendingRevocation = reconcileStable, leaveStaticMemberEpoch, nil
		g.setReconciled(m, rec)
		m.rebalance.stop()
		return res, g.enqueue(&fsm.ConsumerGroupWrite{Assignments: []fsm.ConsumerAssignmentPut{{MemberID: m.id, Assignment: rec.record()}}}), nil
	}
	g.c.logger.Debug("member left", "group", g.id, "member", m.id)
	return res, g.fenceAndEnqueue(m), nil
}

// fence removes members from the group (they left, or missed a session,
// rebalance, join or sync deadline) and returns the write: the members
// gone, and a new group epoch with the metadata of what the rest
// subscribe to. The target is recomputed on the next heartbeat, as in
// Kafka; the members' partitions are free at once. Called with g.mu held.
func (g *consumerGroup) fence(ms ...*consumerMember) *fsm.ConsumerGroupWrite {
	ids := make([]string, len(ms))
	for i, m := range ms {
		g.remove(m)
		ids[i] = m.id
	}
	topics := g.c.topicsView()
	view := make([]targetMember, 0, len(g.members))
	for _, o := range g.members {
		view = append(view, o.targetMember(o.sub, o.regex, g.c.cfg.AuthorizeTopic))
	}
	now := g.c.now()
	g.epoch++
	g.metadataHash = topics.hashOf(view)
	g.hashVersion, g.hashChecked = topics.version, true
	g.stateTimestamp = now
	return &fsm.ConsumerGroupWrite{Timestamp: now, Epoch: g.epoch, MetadataHash: g.metadataHash, Leaves: ids}
}
