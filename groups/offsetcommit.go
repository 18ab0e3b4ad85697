package groups

import (
	"context"
	"sync"

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
	records := make([]fsm.OffsetCommitPartition, 0, len(req.Partitions))
	valid := make([]int, 0, len(req.Partitions))
	for i, p := range req.Partitions {
		if results[i] = validateOffset(p, c.cfg.OffsetMetadataMaxBytes); results[i] == nil {
			records = append(records, offsetRecord(p, now, req.RetentionMs, c.cfg.OffsetsRetention.Milliseconds()))
			valid = append(valid, i)
		}
	}
	if len(req.Partitions) > 0 && len(records) == 0 {
		return results, nil // the coordinator is not asked, as in Kafka
	}
	err = c.commit(ctx, req, records)
	for _, i := range valid {
		results[i] = err
	}
	return results, err
}

// commit checks the group and writes the validated records (Commit
// without the validation).
// A live consumer group is served first, so that a commit never takes an
// empty one over.
func (c *Coordinator) commit(ctx context.Context, req CommitRequest, records []fsm.OffsetCommitPartition) error {
	if _, err := c.serving(ctx); err != nil {
		return err
	}
	_, err := dispatch(c, req.GroupID, lookupMode{create: req.Generation < 0, consumerFirst: true}, kindHandlers[struct{}]{
		classic:  func(g *classicGroup) (struct{}, error) { return struct{}{}, c.commitClassic(g, req, records) },
		consumer: func(g *consumerGroup) (struct{}, error) { return struct{}{}, c.commitConsumer(g, req, records) },
	})
	return err
}

// commitClassic serves an OffsetCommit to a classic group. Called with
// g.mu held; unlocks it and waits for the write.
func (c *Coordinator) commitClassic(g *classicGroup, req CommitRequest, records []fsm.OffsetCommitPartition) error {
	if g == nil {
		// A commit with a generation for a group that does not exist
		// (Kafka 4.x OffsetMetadataManager.validateOffsetCommit); the api
		// answers it ILLEGAL_GENERATION below OffsetCommit v9.
		return ErrGroupIDNotFound
	}
	if err := g.validateCommit(req); err != nil {
		g.mu.Unlock()
		return err
	}
	// A group that only holds offsets sleeps in the FSM once answered.
	return c.writeCommit(&g.mu, &g.inflight, g.id, records, c.cfg.UnsafeAckBeforeCommit, g.evictIfIdle)
}

// writeCommit is the commit write of either kind: it enqueues a validated
// commit of group id, stamped with the leader's clock (a group the commit
// creates starts Empty then), counts its partitions in flight (under mu, which
// the caller holds and writeCommit unlocks), waits for the write without
// the lock and counts the committed partitions. ackEarly (the planted
// UnsafeAckBeforeCommit bug, classic groups only) answers at once and
// lets the write finish on a goroutine of its own. settled (if set) runs
// under mu once the commit is done with the group, the write waited for.
// Called from a handler goroutine.
func (c *Coordinator) writeCommit(mu *sync.Mutex, inflight *inflightCommits, id string, offsets []fsm.OffsetCommitPartition, ackEarly bool, settled func()) error {
	if len(offsets) == 0 {
		if settled != nil {
			settled()
		}
		mu.Unlock()
		return nil
	}
	f := c.write(&fsm.OffsetCommit{GroupID: id, Timestamp: c.now(), Offsets: offsets})
	inflight.track(offsets, 1)
	mu.Unlock()
	finish := func() error {
		err := waitWrite(f)
		mu.Lock()
		inflight.track(offsets, -1)
		if settled != nil {
			settled()
		}
		mu.Unlock()
		if err == nil {
			c.committed.Add(uint64(len(offsets)))
		}
		return err
	}
	if ackEarly {
		go finish()
		return nil
	}
	return finish()
}

// inflightCommits counts a group's commits in flight per partition (both
// kinds keep one): expiry leaves those partitions alone, and a group is
// not removed while any is in flight. Guarded by the group's lock.
type inflightCommits struct {
	pendingCommits map[fsm.TopicPartition]int
}

// track adds delta to each partition's count of commits in flight. The
// map goes when nothing is in flight: a Go map keeps its size after
// deletes, and a map per group of the largest commit it saw was 54 MB at
// 100 k groups of 10 partitions. Called with the group's lock held.
func (ic *inflightCommits) track(offsets []fsm.OffsetCommitPartition, delta int) {
	if ic.pendingCommits == nil {
		ic.pendingCommits = make(map[fsm.TopicPartition]int, len(offsets))
	}
	for _, o := range offsets {
		tp := fsm.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		if ic.pendingCommits[tp] += delta; ic.pendingCommits[tp] <= 0 {
			delete(ic.pendingCommits, tp)
		}
	}
	if len(ic.pendingCommits) == 0 {
		ic.pendingCommits = nil
	}
}

// validateCommit checks a commit under g.mu (Kafka 3.7's
// validateOffsetCommit and doCommitOffsets): generation -1 commits to an
// Empty group are offsets outside group management; otherwise a commit
// naming a member or a generation must come from a current member in the
// current generation, and an anonymous one is refused (only members commit
// to a group with members); a valid member of a group still assigning is
// told to wait. A valid commit renews the member's session.
func (g *classicGroup) validateCommit(req CommitRequest) error {
	switch {
	case g.state == Dead:
		return ErrCoordinatorNotAvailable
	case req.Generation < 0 && g.state == Empty:
	case req.Generation >= 0 || req.MemberID != "" || req.InstanceID != "":
		if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
			return err
		}
		if req.Generation != g.generation {
			return ErrIllegalGeneration
		}
	default:
		return ErrUnknownMemberID
	}
	switch g.state {
	case CompletingRebalance:
		return ErrRebalanceInProgress
	case Stable, PreparingRebalance:
		g.startSession(g.members[req.MemberID])
	}
	return nil
}
