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
// commit stores a group record and Activate loads them all, so this is
// defensive: it keeps DeleteGroups correct if that ever changes.
func (c *Coordinator) deleteStored(groupID string) error {
	b, err := fsm.Encode(&fsm.GroupDelete{GroupID: groupID})
	if err != nil {
		return err
	}
	return waitWrite(c.log.ApplyAsync(b, c.cfg.WriteTimeout))
}
