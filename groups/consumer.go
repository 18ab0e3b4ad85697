package groups

import (
	"errors"
	"fmt"
	"sync"

	"github.com/kcoord/kcoord/assignors"
)

// This file is the coordinator's side of consumer-protocol groups: their
// lookup beside the classic groups (an id is one or the other), the topic
// registry they resolve against, and the server-side assignors.

// consumerGroups holds the coordinator's live consumer groups and what
// they share. Its map is guarded by Coordinator.mu, like the classic one.
type consumerGroups struct {
	consumers map[string]*consumerGroup
	// topicsMu guards topics, the registry as last converted.
	topicsMu sync.Mutex
	topics   *topicsView
}

// lookupConsumer returns the live consumer group, creating an empty one
// when create is set. A classic group of that id with members is upgraded
// by a join (upgradeClassic) and answers ErrGroupIDNotFound ("not a
// consumer group") otherwise; an empty classic group (one that only holds
// offsets) is taken over by a join, as Kafka upgrades it.
// A nil group with a nil error means it does not exist.
func (c *Coordinator) lookupConsumer(id string, create bool) (*consumerGroup, error) {
	for {
		var (
			g       *consumerGroup
			ok      bool
			classic *classicGroup
		)
		if err := c.readServing(func() { g, ok = c.consumers[id]; classic = c.classics[id] }); err != nil {
			return nil, err
		}
		switch {
		case ok:
			return g, nil
		case classic != nil:
			err := c.takeOverClassic(classic, create)
			if errors.Is(err, errClassicWithMembers) && create {
				err = c.upgradeClassic(classic)
				if err == nil {
					continue // the consumer group is installed: look again
				}
			}
			switch {
			case errors.Is(err, errLookAgain):
				continue // the classic group went meanwhile
			case errors.Is(err, errClassicWithMembers):
				return nil, classicGroupError{id}
			case err != nil:
				return nil, err
			case !create:
				return nil, nil // an empty classic group: no consumer group
			}
			continue // the classic group is gone: look again
		case !create:
			return nil, nil
		}
		c.mu.Lock()
		if !c.active {
			c.mu.Unlock()
			return nil, ErrNotCoordinator
		}
		if _, taken := c.classics[id]; taken {
			c.mu.Unlock()
			continue // a classic group was created meanwhile
		}
		if g, ok = c.consumers[id]; !ok {
			// A group taken over in memory only (an empty one that a
			// classic request took and then wrote nothing for) is still
			// stored: go on from the stored group, so the write chain
			// holds.
			if r, stored := c.state.ConsumerGroup(id); stored {
				g = consumerGroupFromRecord(c, r)
			} else {
				g = newConsumerGroup(c, id)
			}
			c.consumers[id] = g
		}
		c.mu.Unlock()
		return g, nil
	}
}

// takeOverClassic checks a classic group that holds id: with members (or
// being deleted) it is errClassicWithMembers; empty,
// and only when take is set, it is closed and forgotten, so a consumer
// group can be made in its place (the FSM replaces it when the join's
// write applies, keeping its offsets). Takes the classic group's lock;
// called without c.mu.
func (c *Coordinator) takeOverClassic(classic *classicGroup, take bool) error {
	classic.mu.Lock()
	defer classic.mu.Unlock()
	if classic.closed {
		return errLookAgain
	}
	if classic.state != Empty {
		return errClassicWithMembers
	}
	if take {
		classic.close()
		classic.closed = true
		c.forgetClassic(classic)
	}
	return nil
}

// lockConsumer looks a consumer group up and locks it. On success the
// caller must unlock g.mu. A group whose write failed answers
// ErrLoadInProgress while it reloads. A nil group with a nil error means
// it does not exist.
func (c *Coordinator) lockConsumer(id string, create bool) (*consumerGroup, error) {
	return lockFound(c, func() (*consumerGroup, error) { return c.lookupConsumer(id, create) }, func(g *consumerGroup) error {
		switch {
		case g.stale:
			g.startReload()
			return fmt.Errorf("%w: consumer group %s is reloading after a failed write", ErrLoadInProgress, id)
		case g.deleting:
			return fmt.Errorf("%w: consumer group %s is being deleted", ErrCoordinatorNotAvailable, id)
		}
		return nil
	})
}

// dropIfUnstored forgets a group that a refused join made and nothing
// stored (no write, and no member unless they came from an upgrade not
// written yet), and puts back the classic group it took over or
// upgraded, as stored, so a refused join changes nothing. Called with
// g.mu held.
func (g *consumerGroup) dropIfUnstored() {
	if g.writes != 0 || g.last != nil || g.closed || len(g.members) > 0 && g.upgrade == nil {
		return
	}
	g.close()
	c := g.c
	var restored *classicGroup
	c.mu.Lock()
	if c.consumers[g.id] == g {
		delete(c.consumers, g.id)
		if r, ok := c.state.Group(g.id); ok && c.classics[g.id] == nil {
			restored = classicGroupFromRecord(c, r)
			restored.mu.Lock()
			c.classics[g.id] = restored
		}
	}
	c.mu.Unlock()
	if restored != nil {
		for _, m := range restored.members {
			restored.startSession(m) // a classic group whose upgrade was refused
		}
		restored.mu.Unlock()
	}
}

// forgetConsumer drops a deleted consumer group from the map if it is
// still the one there. It may be called with the group's lock held.
func (c *Coordinator) forgetConsumer(g *consumerGroup) {
	c.mu.Lock()
	if c.consumers[g.id] == g {
		delete(c.consumers, g.id)
	}
	c.mu.Unlock()
}

// consumerOf returns the live consumer group of that id, or nil, without
// creating or taking over anything. For the classic lookups, which must
// not serve an id that is a consumer group.
func (c *Coordinator) consumerOf(id string) *consumerGroup {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.consumers[id]
}

// serverAssignorNames are the assignors members may name
// (group.consumer.assignors).
func (c *Coordinator) serverAssignorNames() []string { return c.cfg.ServerAssignors }

// serverAssignor returns a configured assignor by name.
func (c *Coordinator) serverAssignor(name string) (assignors.ServerAssignor, error) {
	a, err := assignors.ServerAssignorNamed(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedAssignor, err)
	}
	return a, nil
}

// topicsView returns the topic registry as consumer groups read it,
// converted once per registry version. Any goroutine; it may be called
// with a group lock held (it takes only topicsMu and reads the registry's
// applied state).
func (c *Coordinator) topicsView() *topicsView {
	src := c.cfg.Topics
	if src == nil {
		return emptyTopicsView
	}
	version := src.TopicsVersion()
	c.topicsMu.Lock()
	defer c.topicsMu.Unlock()
	if c.topics == nil || c.topics.version != version {
		c.topics = newTopicsView(version, src.Topics())
	}
	return c.topics
}

// errConsumerGroup is the classic lookups' answer for the id of a consumer
// group; each classic request maps it to Kafka's answer for its API.
var errConsumerGroup = errors.New("group is a consumer group")

// errLookAgain is a takeover's answer for a group that went (closed) while
// it was looked up: the lookup starts over.
var errLookAgain = errors.New("the group changed while it was looked up")

// classicGroupError is the consumer lookups' answer for the id of a
// classic group with members: GROUP_ID_NOT_FOUND for the consumer
// protocol, and a sign for a classic request routed to a consumer group
// that was downgraded meanwhile to go back to the classic path.
type classicGroupError struct{ id string }

func (e classicGroupError) Error() string {
	return fmt.Sprintf("%v: Group %s is not a consumer group.", ErrGroupIDNotFound, e.id)
}

func (e classicGroupError) Unwrap() error { return ErrGroupIDNotFound }

// isClassicGroup reports whether err is a classicGroupError.
func isClassicGroup(err error) bool {
	var ce classicGroupError
	return errors.As(err, &ce)
}

// errClassicWithMembers is takeOverClassic's answer for a classic group
// that is not empty: a join may upgrade it, anything else answers
// ErrGroupIDNotFound.
var errClassicWithMembers = errors.New("group is a classic group with members")

// takeOverConsumer checks a consumer group that holds an id a classic
// request names: with members, or not taking over, it is
// errConsumerGroup; an empty one is closed and forgotten when take is
// set, so that a classic group can be made in its place (the FSM replaces
// it when the classic group is stored, keeping its offsets). Takes the
// consumer group's lock; called without c.mu.
func (c *Coordinator) takeOverConsumer(g *consumerGroup, take bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return errLookAgain
	case g.stale:
		g.startReload()
		return fmt.Errorf("%w: consumer group %s is reloading after a failed write", ErrLoadInProgress, g.id)
	case g.deleting:
		return fmt.Errorf("%w: consumer group %s is being deleted", ErrCoordinatorNotAvailable, g.id)
	case len(g.members) > 0 || !take:
		return errConsumerGroup
	case g.last != nil:
		// Its last member's leave is still being written: a classic
		// group made now would be stored before the consumer group is
		// empty, and refused.
		return fmt.Errorf("%w: consumer group %s has a write in flight", ErrLoadInProgress, g.id)
	}
	g.close()
	c.forgetConsumer(g)
	return nil
}
