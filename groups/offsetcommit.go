package groups

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// Commit serves an OffsetCommit for one group. It validates each
// partition on its own (offset.metadata.max.bytes, an empty topic, a
// negative partition), stamps the valid ones with the leader's clock and
// their expiry (KIP-211), checks the member and generation as Kafka does,
// writes the offsets through Raft and returns once they are committed on a
// quorum (or the write failed). results holds one answer per
// req.Partitions entry: its validation error, or err, the commit's
// outcome. When no partition is valid nothing else is checked and err is
// nil. The empty group id is a group like any other here, as Kafka keeps
// it for backwards compatibility (GroupCoordinatorService.commitOffsets).
// Called from a connection's handler goroutine; a hold for a settling
// shard ends with ctx.
func (c *Coordinator) Commit(ctx context.Context, req CommitRequest) (results []error, err error) {
	results = make([]error, len(req.Partitions))
	now := c.now()
	var (
		records []fsm.OffsetCommitPartition
		valid   []int
	)
	for i, p := range req.Partitions {
		if results[i] = validateOffset(p, c.cfg.OffsetMetadataMaxBytes); results[i] == nil {
			records = append(records, offsetRecord(p, now, req.RetentionMs, c.cfg.OffsetsRetention.Milliseconds()))
			valid = append(valid, i)
		}
	}
	if len(req.Partitions) > 0 && len(records) == 0 {
		return results, nil // the coordinator is not asked, as in Kafka
	}
	err = c.commit(ctx, req, commitWrite{offsets: records, now: now})
	for _, i := range valid {
		results[i] = err
	}
	return results, err
}

// commitWrite is a commit's validated records and the leader's time
// stamped on them.
type commitWrite struct {
	offsets []fsm.OffsetCommitPartition
	now     int64
}

// commit checks the group and writes w (Commit without the validation).
func (c *Coordinator) commit(ctx context.Context, req CommitRequest, w commitWrite) error {
	if _, err := c.serving(ctx); err != nil {
		return err
	}
	if c.consumerOf(req.GroupID) != nil {
		return c.commitToConsumerGroup(req, w)
	}
	g, err := c.lockGroup(req.GroupID, req.Generation < 0)
	if err == errConsumerGroup {
		return c.commitToConsumerGroup(req, w)
	}
	if err != nil {
		return err
	}
	if g == nil {
		// A commit with a generation for a group that does not exist
		// (Kafka 4.x OffsetMetadataManager.validateOffsetCommit); the api
		// answers it ILLEGAL_GENERATION below OffsetCommit v9.
		return ErrGroupIDNotFound
	}
	f, err := g.commit(req, w)
	if err != nil {
		g.mu.Unlock()
		return err
	}
	g.trackCommits(w.offsets, 1)
	g.mu.Unlock()
	if c.cfg.UnsafeAckBeforeCommit {
		go c.finishCommit(g, w.offsets, f)
		return nil
	}
	return c.finishCommit(g, w.offsets, f)
}

// finishCommit waits for a commit's write and counts it. Called from the
// commit's handler goroutine (or, with the planted UnsafeAckBeforeCommit
// bug, from a goroutine of its own after the commit was answered).
func (c *Coordinator) finishCommit(g *group, offsets []fsm.OffsetCommitPartition, f raft.ApplyFuture) error {
	err := waitWrite(f)
	g.mu.Lock()
	g.trackCommits(offsets, -1)
	g.mu.Unlock()
	if err == nil {
		c.committed.Add(uint64(len(offsets)))
	}
	return err
}

// trackCommits counts commits in flight per partition. The map goes when
// nothing is in flight: a Go map keeps its size after deletes, and a map
// per group of the largest commit it saw was 54 MB at 100 k groups of 10
// partitions. Called with g.mu held.
func (g *group) trackCommits(offsets []fsm.OffsetCommitPartition, delta int) {
	g.pendingCommits = trackCommits(g.pendingCommits, offsets, delta)
}

// trackCommits adds delta to each partition's count of commits in flight
// and returns the counts, nil when none is left.
func trackCommits(pending map[fsm.TopicPartition]int, offsets []fsm.OffsetCommitPartition, delta int) map[fsm.TopicPartition]int {
	if pending == nil {
		pending = make(map[fsm.TopicPartition]int, len(offsets))
	}
	for _, o := range offsets {
		tp := fsm.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		if pending[tp] += delta; pending[tp] <= 0 {
			delete(pending, tp)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	return pending
}

// commit validates under g.mu and enqueues the write (Kafka 3.7's
// validateOffsetCommit and doCommitOffsets): generation -1 commits to an
// Empty group are offsets outside group management; otherwise a commit
// naming a member or a generation must come from a current member in the
// current generation, and an anonymous one is refused (only members commit
// to a group with members); a valid member of a group still assigning is
// told to wait.
func (g *group) commit(req CommitRequest, w commitWrite) (raft.ApplyFuture, error) {
	switch {
	case g.state == Dead:
		return nil, ErrCoordinatorNotAvailable
	case req.Generation < 0 && g.state == Empty:
	case req.Generation >= 0 || req.MemberID != "" || req.InstanceID != "":
		if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
			return nil, err
		}
		if req.Generation != g.generation {
			return nil, ErrIllegalGeneration
		}
	default:
		return nil, ErrUnknownMemberID
	}
	switch g.state {
	case CompletingRebalance:
		return nil, ErrRebalanceInProgress
	case Stable, PreparingRebalance:
		g.startSession(g.members[req.MemberID])
	}
	if len(w.offsets) == 0 {
		return doneFuture, nil
	}
	return g.c.write(&fsm.OffsetCommit{
		GroupID:   g.id,
		Timestamp: w.now,
		Offsets:   w.offsets,
	}), nil
}
