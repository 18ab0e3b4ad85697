package groups

import (
	"context"
	"sort"
	"time"
)

// Describe serves DescribeGroups for one group. An unknown group is reported
// Dead with no members, as Kafka does. The answer is confirmed by a quorum
// first (confirmRead). Called from any handler goroutine.
func (c *Coordinator) Describe(ctx context.Context, groupID string) (GroupDescription, error) {
	if err := c.confirmRead(ctx); err != nil {
		return GroupDescription{}, err
	}
	return dispatch(c, groupID, lookupMode{}, kindHandlers[GroupDescription]{
		classic: func(g *classicGroup) (GroupDescription, error) {
			if g == nil {
				return GroupDescription{GroupID: groupID, State: Dead.String()}, nil
			}
			defer g.mu.Unlock()
			d := g.describe()
			g.evictIfIdle() // a dormant group described goes back to sleep
			return d, nil
		},
		consumer: func(g *consumerGroup) (GroupDescription, error) {
			if g == nil {
				return GroupDescription{}, errLookAgain // deleted meanwhile
			}
			g.mu.Unlock()
			return GroupDescription{GroupID: groupID, State: Dead.String(), ConsumerProtocol: true}, nil
		},
	})
}

// describe is the group as DescribeGroups shows it. Called with g.mu held.
func (g *classicGroup) describe() GroupDescription {
	d := GroupDescription{GroupID: g.id, Exists: true, State: g.state.String(), ProtocolType: g.protocolType,
		Generation: g.generation, Leader: g.leader, StateSince: time.UnixMilli(g.stateTimestamp), LastRebalance: g.lastStable}
	stable := g.state == Stable
	if stable {
		d.Protocol = g.protocol
	}
	for _, id := range g.order {
		m := g.members[id]
		md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeout: m.sessionTimeout, RebalanceTimeout: m.rebalanceTimeout}
		if stable {
			md.Metadata = m.metadataFor(g.protocol)
			md.Assignment = m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d
}

// List serves ListGroups for this shard: every group with its state and
// protocol type, sorted by id. Called from any handler goroutine; the
// leadership confirmation waits until ctx ends at most.
func (c *Coordinator) List(ctx context.Context) ([]GroupListing, error) {
	// No hold: ListGroups asks every shard, and one that is electing has
	// nothing to add that its new leader will not list.
	epoch, err := c.current()
	if err != nil {
		return nil, err
	}
	if err := c.confirmNow(ctx, epoch); err != nil {
		return nil, err
	}
	c.mu.RLock()
	if !c.active || c.epoch != epoch {
		c.mu.RUnlock()
		return nil, ErrNotCoordinator // the confirmed leadership ended meanwhile
	}
	groups := groupList(c.classics, c.consumers)
	dormant := c.dormantLocked()
	c.mu.RUnlock()
	out := make([]GroupListing, 0, len(groups)+len(dormant))
	for _, sg := range dormant {
		if l, ok := dormantGroup(c, sg).listing(); ok {
			out = append(out, l)
		}
	}
	for _, g := range groups {
		g.lock()
		if l, ok := g.listing(); ok {
			out = append(out, l)
		}
		g.unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupID < out[j].GroupID })
	return out, nil
}

// listing is the group as ListGroups and the status page show it, unless
// it is closed or Dead. Called with g.mu held.
func (g *classicGroup) listing() (GroupListing, bool) {
	if g.closed && !g.evicted || g.state == Dead {
		return GroupListing{}, false
	}
	l := GroupListing{GroupID: g.id, Type: GroupTypeClassic, ProtocolType: g.protocolType, State: g.state.String(), Members: len(g.members),
		Generation: g.generation, StateSince: time.UnixMilli(g.stateTimestamp), LastRebalance: g.lastStable}
	if g.state == Stable {
		l.Protocol = g.protocol
	}
	return l, true
}

// Check reports whether this coordinator serves its shard, confirmed by a
// quorum (see confirmRead): nil, ErrLoadInProgress or ErrNotCoordinator.
// Callers serving reads from the shard's state (OffsetFetch) call it first.
// Called from any handler goroutine; blocks about one round trip.
func (c *Coordinator) Check(ctx context.Context) error {
	return c.confirmRead(ctx)
}
