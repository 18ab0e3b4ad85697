package groups

import (
	"context"

	"github.com/kcoord/kcoord/fsm"
)

// Delete serves DeleteGroups for one group: only an Empty group (or one that
// only has offsets) can go, and it goes with its offsets. The empty group id
// can be deleted like any other (Kafka's GroupCoordinatorService.deleteGroups
// refuses only a null one). Called from a connection's handler goroutine;
// waits for the Raft write.
func (c *Coordinator) Delete(ctx context.Context, groupID string) error {
	if _, err := c.serving(ctx); err != nil {
		return err
	}
	_, err := dispatch(c, groupID, lookupMode{}, kindHandlers[struct{}]{
		classic:  func(g *classicGroup) (struct{}, error) { return struct{}{}, c.deleteClassic(g, groupID) },
		consumer: func(g *consumerGroup) (struct{}, error) { return struct{}{}, c.deleteConsumer(g) },
	})
	return err
}

// deleteClassic serves DeleteGroups for a classic group (nil: none, though
// its offsets may be stored). Called with g.mu held; unlocks it and waits
// for the write.
func (c *Coordinator) deleteClassic(g *classicGroup, groupID string) error {
	if g == nil {
		if c.state.HasOffsets(groupID) {
			return c.deleteStored(groupID)
		}
		return ErrGroupIDNotFound
	}
	switch {
	case g.state == Dead:
		g.mu.Unlock()
		return ErrGroupIDNotFound
	case g.state != Empty:
		g.mu.Unlock()
		return ErrNonEmptyGroup
	}
	g.transition(Dead)
	f := c.write(&fsm.GroupDelete{GroupID: groupID})
	g.mu.Unlock()
	err := waitWrite(f)
	g.mu.Lock()
	if err != nil && err != fsm.ErrGroupNotFound {
		// The group is still stored: serve it again.
		g.state = Empty
		g.mu.Unlock()
		return err
	}
	g.closed = true
	c.forgetClassic(g)
	g.mu.Unlock()
	return nil
}

// deleteStored removes offsets of a group that has no live state. Every
// commit stores a group record, which Activate loads or a lookup wakes
// (dormant.go), so this is defensive: it keeps DeleteGroups correct if
// that ever changes.
func (c *Coordinator) deleteStored(groupID string) error {
	b, err := fsm.Encode(&fsm.GroupDelete{GroupID: groupID})
	if err != nil {
		return err
	}
	return waitWrite(c.log.ApplyAsync(b, c.cfg.WriteTimeout))
}

// deleteConsumer serves DeleteGroups for a consumer group (nil: deleted
// meanwhile, done): only an empty
// one can go (Kafka's validateDeleteGroup), with its offsets. Called with
// g.mu held; unlocks it and waits for the write.
func (c *Coordinator) deleteConsumer(g *consumerGroup) error {
	if g == nil {
		return nil // deleted meanwhile
	}
	if len(g.members) > 0 {
		g.mu.Unlock()
		return ErrNonEmptyGroup
	}
	// Enqueued after any write of the group still in flight, so it applies
	// to the group those writes leave.
	f := c.write(&fsm.GroupDelete{GroupID: g.id})
	g.deleting = true // nothing is served from it while the delete commits
	g.mu.Unlock()
	err := waitWrite(f)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deleting = false
	if err != nil && err != fsm.ErrGroupNotFound {
		// Still stored, maybe: serve it again from what the log holds.
		g.markStale()
		return err
	}
	g.close()
	c.forgetConsumer(g)
	return nil
}
