package groups

import (
	"bytes"
	"cmp"
	"regexp"
	"slices"
	"sync"

	"github.com/kcoord/kcoord/fsm"
)

// consumerGroup is one live consumer-protocol group (KIP-848) on the shard
// leader: the stored fsm.ConsumerGroup, plus what the leader derives from
// it (the owner of every partition, the static members, timers) and the
// writes it has enqueued but not yet seen committed. mu is the group's one
// serialization domain, as for classic groups: request handlers, timer
// callbacks and write completions take it, and none holds it while
// waiting for Raft.
//
// The state in memory runs ahead of the log: a heartbeat computes the next
// state from the latest one, installs it and enqueues its write before it
// unlocks, so one group's writes enter the log in the order they were
// computed, and each names the write count it was computed at
// (fsm.ConsumerGroupWrite.After). A request is answered only once the
// write it depends on has committed. When a write fails, the group is
// stale: requests get ErrLoadInProgress until it has been rebuilt from
// the FSM after a barrier (reloadConsumer).
type consumerGroup struct {
	c  *Coordinator
	id string

	mu     sync.Mutex
	closed bool // the coordinator stopped serving this group (or replaced it)
	// stale is set when a write of the group failed; reloading while a
	// reload runs.
	stale, reloading bool
	// deleting is set while a DeleteGroups of the group commits.
	deleting bool
	// inflight counts commits in flight per partition (writeCommit).
	inflight inflightCommits
	// epoch is the group epoch and targetEpoch the epoch of the target
	// assignment; metadataHash goes with epoch.
	epoch, targetEpoch int32
	metadataHash       uint64
	stateTimestamp     int64
	// writes counts the group's writes, those enqueued included: the next
	// write's After.
	writes uint64
	// last is the latest write enqueued that has not completed yet (nil
	// when none): an answer read from the state in memory waits for it.
	last *pendingWrite
	// upgrade is the write that stores the group converted from a classic
	// group, until the join that upgraded it succeeds (enqueue writes it
	// first); a refused join drops the group and the classic group comes
	// back (dropIfUnstored).
	upgrade *fsm.ConsumerGroupWrite

	members map[string]*consumerMember
	// static maps instance ids to member ids.
	static map[string]string
	// owners maps each partition that a member has assigned or pending
	// revocation to that member's id (Kafka's invertedTargetAssignment
	// and currentPartitionEpoch, derived rather than stored).
	owners map[topicID]map[int32]string
	// hashVersion is the topic-registry version metadataHash was last
	// checked at, valid while hashChecked (a subscription change clears
	// it).
	hashVersion uint64
	hashChecked bool
}

// consumerMember is one live member of a consumer group. Guarded by the
// group's lock.
type consumerMember struct {
	id  string
	sub fsm.ConsumerSubscription
	// regex is sub.TopicRegex compiled (compileSubscriptionRegex), nil
	// without one.
	regex *regexp.Regexp
	// target is the member's part of the group's target assignment.
	target topicPartitions
	rec    reconciled
	// session, rebalance, join and sync are the member's timers
	// (consumertimers.go); join and sync only run for a classic member.
	session, rebalance, join, sync memberTimer
}

// pendingWrite is a group write in flight; done closes once err is set.
type pendingWrite struct {
	done chan struct{}
	err  error
}

func newConsumerGroup(c *Coordinator, id string) *consumerGroup {
	return &consumerGroup{
		c:              c,
		id:             id,
		stateTimestamp: c.now(),
		members:        make(map[string]*consumerMember),
		static:         make(map[string]string),
		owners:         make(map[topicID]map[int32]string),
	}
}

// consumerGroupFromRecord rebuilds a live consumer group from its stored
// form. Members get their timers when the coordinator installs the group.
func consumerGroupFromRecord(c *Coordinator, r fsm.ConsumerGroup) *consumerGroup {
	g := newConsumerGroup(c, r.ID)
	g.epoch, g.targetEpoch, g.metadataHash = r.Epoch, r.TargetEpoch, r.MetadataHash
	g.stateTimestamp, g.writes = r.StateTimestamp, r.Writes
	for _, mr := range r.Members {
		m := &consumerMember{id: mr.ID, sub: mr.Subscription, target: fromConsumerPartitions(mr.Target)}
		if mr.Subscription.TopicRegex != "" {
			// A stored regex compiled when it was accepted; one that no
			// longer does (a newer build's syntax) subscribes to nothing.
			m.regex, _ = compileSubscriptionRegex(mr.Subscription.TopicRegex)
		}
		g.add(m)
		g.setReconciled(m, reconciledFromRecord(mr.Assignment))
	}
	return g
}

// add puts a member in the group, with nothing assigned yet. Called with
// g.mu held.
func (g *consumerGroup) add(m *consumerMember) {
	g.members[m.id] = m
	if m.sub.InstanceID != "" {
		g.static[m.sub.InstanceID] = m.id
	}
}

// remove takes a member out with its timers and releases what it owns.
// Called with g.mu held.
func (g *consumerGroup) remove(m *consumerMember) {
	g.stopTimers(m)
	g.setReconciled(m, reconciled{})
	delete(g.members, m.id)
	if m.sub.InstanceID != "" && g.static[m.sub.InstanceID] == m.id {
		delete(g.static, m.sub.InstanceID)
	}
	g.hashChecked = false
}

// setReconciled moves m to rec, keeping the owners index in step. Called
// with g.mu held.
func (g *consumerGroup) setReconciled(m *consumerMember, rec reconciled) {
	g.index(m.rec.assigned, m.id, false)
	g.index(m.rec.pendingRevocation, m.id, false)
	m.rec = rec
	g.index(rec.assigned, m.id, true)
	g.index(rec.pendingRevocation, m.id, true)
}

func (g *consumerGroup) index(tp topicPartitions, id string, own bool) {
	for t, parts := range tp {
		byPart := g.owners[t]
		if byPart == nil {
			if !own {
				continue
			}
			byPart = make(map[int32]string, len(parts))
			g.owners[t] = byPart
		}
		for _, p := range parts {
			switch {
			case own:
				byPart[p] = id
			case byPart[p] == id:
				delete(byPart, p)
			}
		}
		if len(byPart) == 0 {
			delete(g.owners, t)
		}
	}
}

// ownerEpochFor returns reconcileInput.ownerEpoch for member id: the epoch
// of the other member holding a partition, or -1.
func (g *consumerGroup) ownerEpochFor(id string) func(topicID, int32) int32 {
	return func(t topicID, p int32) int32 {
		owner, ok := g.owners[t][p]
		if !ok || owner == id {
			return -1
		}
		return g.members[owner].rec.epoch
	}
}

// ConsumerGroupState is a consumer group's state as Kafka names it
// (ConsumerGroup.ConsumerGroupState).
type ConsumerGroupState string

// The consumer group states.
const (
	ConsumerEmpty       ConsumerGroupState = "Empty"
	ConsumerAssigning   ConsumerGroupState = "Assigning"
	ConsumerReconciling ConsumerGroupState = "Reconciling"
	ConsumerStable      ConsumerGroupState = "Stable"
	ConsumerDead        ConsumerGroupState = "Dead"
)

// state derives the group's state as Kafka does: Empty without members,
// Assigning while the target lags the group epoch, Reconciling while a
// member is not stable at the target's epoch, else Stable. Called with
// g.mu held.
func (g *consumerGroup) state() ConsumerGroupState {
	switch {
	case len(g.members) == 0:
		return ConsumerEmpty
	case g.epoch != g.targetEpoch:
		return ConsumerAssigning
	}
	for _, m := range g.members {
		if m.rec.epoch != g.targetEpoch || m.rec.state != reconcileStable {
			return ConsumerReconciling
		}
	}
	return ConsumerStable
}

// sortedMembers returns the members by id. Called with g.mu held.
func (g *consumerGroup) sortedMembers() []*consumerMember {
	out := make([]*consumerMember, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *consumerMember) int { return cmp.Compare(a.id, b.id) })
	return out
}

// toConsumerPartitions converts partitions for storage, topics in id
// order so equal assignments encode alike on every replica.
func toConsumerPartitions(tp topicPartitions) []fsm.ConsumerPartitions {
	if len(tp) == 0 {
		return nil
	}
	out := make([]fsm.ConsumerPartitions, 0, len(tp))
	for t, parts := range tp {
		out = append(out, fsm.ConsumerPartitions{TopicID: t, Partitions: slices.Clone(parts)})
	}
	slices.SortFunc(out, func(a, b fsm.ConsumerPartitions) int { return bytes.Compare(a.TopicID[:], b.TopicID[:]) })
	return out
}

// fromConsumerPartitions is toConsumerPartitions' inverse; it normalizes
// (sorts, drops duplicates and empty topics).
func fromConsumerPartitions(ps []fsm.ConsumerPartitions) topicPartitions {
	var tp topicPartitions
	for _, p := range ps {
		tp = tp.add(p.TopicID, p.Partitions)
	}
	return tp
}

func (r reconciled) record() fsm.ConsumerAssignment {
	return fsm.ConsumerAssignment{
		State: uint8(r.state), Epoch: r.epoch, PreviousEpoch: r.previousEpoch,
		Assigned: toConsumerPartitions(r.assigned), PendingRevocation: toConsumerPartitions(r.pendingRevocation),
	}
}

func reconciledFromRecord(a fsm.ConsumerAssignment) reconciled {
	return reconciled{
		state: reconcileState(a.State), epoch: a.Epoch, previousEpoch: a.PreviousEpoch,
		assigned: fromConsumerPartitions(a.Assigned), pendingRevocation: fromConsumerPartitions(a.PendingRevocation),
	}
}

// sameReconciled reports whether a and b are the same step.
func sameReconciled(a, b reconciled) bool {
	return a.state == b.state && a.epoch == b.epoch && a.previousEpoch == b.previousEpoch &&
		sameTopicPartitions(a.assigned, b.assigned) && sameTopicPartitions(a.pendingRevocation, b.pendingRevocation)
}
