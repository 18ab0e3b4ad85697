package groups

import (
	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// Commit serves an OffsetCommit for one group: it checks the member and
// generation as Kafka does, writes the offsets through Raft and returns once
// they are committed on a quorum (or the write failed). Called from a
// connection's handler goroutine.
func (c *Coordinator) Commit(req CommitRequest) error {
	if req.GroupID == "" {
		return ErrInvalidGroupID
	}
	g, err := c.lockGroup(req.GroupID, req.Generation < 0)
	if err != nil {
		return err
	}
	if g == nil {
		// A commit with a generation for a group that does not exist.
		return ErrIllegalGeneration
	}
	f, err := g.commit(req)
	if err != nil {
		g.mu.Unlock()
		return err
	}
	g.trackCommits(req.Offsets, 1)
	g.mu.Unlock()
	err = waitWrite(f)
	g.mu.Lock()
	g.trackCommits(req.Offsets, -1)
	g.mu.Unlock()
	return err
}

// trackCommits counts commits in flight per partition. Called with g.mu
// held.
func (g *group) trackCommits(offsets []fsm.OffsetCommitPartition, delta int) {
	for _, o := range offsets {
		tp := fsm.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		if g.pendingCommits[tp] += delta; g.pendingCommits[tp] <= 0 {
			delete(g.pendingCommits, tp)
		}
	}
}

// commit validates under g.mu and enqueues the write (Kafka's
// doCommitOffsets).
func (g *group) commit(req CommitRequest) (raft.ApplyFuture, error) {
	m, ok := g.members[req.MemberID]
	switch {
	case g.state == Dead:
		return nil, ErrCoordinatorNotAvailable
	case g.isFenced(req.MemberID, req.InstanceID):
		return nil, ErrFencedInstanceID
	case req.Generation < 0 && g.state == Empty:
		// Offsets stored outside group management.
	case g.state == CompletingRebalance:
		return nil, ErrRebalanceInProgress
	case !ok:
		return nil, ErrUnknownMemberID
	case req.Generation != g.generation:
		return nil, ErrIllegalGeneration
	default:
		g.startSession(m)
	}
	if len(req.Offsets) == 0 {
		return errorFuture{}, nil
	}
	return g.c.write(&fsm.OffsetCommit{
		GroupID:     g.id,
		CreateGroup: true,
		Timestamp:   g.c.now(),
		Offsets:     req.Offsets,
	}), nil
}
