package groups

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// ConsumerHeartbeatResult is the answer to a ConsumerGroupHeartbeat.
type ConsumerHeartbeatResult struct {
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is the member's assigned partitions, when HasAssignment:
	// Kafka sends them on a join, when the heartbeat said what the member
	// owns, and when they changed.
	Assignment    []TopicIDPartitions
	HasAssignment bool
}

// ConsumerHeartbeat serves a ConsumerGroupHeartbeat (KIP-848): a join
// (epoch 0), a heartbeat of a member at its epoch, a leave (-1) or a static
// member's temporary leave (-2). It computes the group's next state under
// the group's lock (Kafka 4.x's consumerGroupHeartbeat), enqueues the write
// and answers once the write has committed, so a member never holds an
// epoch that a failover could lose; a heartbeat that changed nothing is
// answered after the leadership it read under is confirmed. Called from a
// connection's handler goroutine.
func (c *Coordinator) ConsumerHeartbeat(ctx context.Context, req ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, error) {
	if err := validateConsumerHeartbeat(&req, c.serverAssignorNames()); err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	epoch, err := c.serving(ctx)
	if err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	if req.MemberEpoch == joinMemberEpoch && req.MemberID == "" {
		req.MemberID = newConsumerMemberID() // v0: the coordinator names the member
	}
	g, err := c.lockConsumer(req.GroupID, req.MemberEpoch == joinMemberEpoch)
	if err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	if g == nil {
		return ConsumerHeartbeatResult{}, fmt.Errorf("%w: Consumer group %s not found.", ErrGroupIDNotFound, req.GroupID)
	}
	res, pw, wrote, err := func() (res ConsumerHeartbeatResult, pw *pendingWrite, wrote bool, err error) {
		defer g.mu.Unlock() // also if an assignor panics: the group must not stay locked
		defer func() {
			if err != nil {
				g.dropIfUnstored()
			}
		}()
		if req.MemberEpoch == leaveMemberEpoch || req.MemberEpoch == leaveStaticMemberEpoch {
			res, pw, err = g.leave(&req)
			return res, pw, true, err
		}
		res, w, err := g.heartbeat(&req, c.topicsView())
		if err != nil {
			return res, nil, false, err
		}
		return res, g.enqueue(w), w != nil, nil
	}()
	if err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	if err := c.answerAfter(ctx, epoch, pw, !wrote); err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	return res, nil
}

// newConsumerMemberID returns a member id as Kafka's Uuid.toString makes
// one: 16 random bytes in URL-safe base64 without padding.
func newConsumerMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// heartbeat is a join or a heartbeat of a member at its epoch, Kafka's
// consumerGroupHeartbeat: the member (new, a static member replacing its
// predecessor, or known at an epoch it may use) and its subscription
// updated, then the group moved on by advance. It returns the write to
// make (nil: nothing changed). Called with g.mu held.
func (g *consumerGroup) heartbeat(req *ConsumerHeartbeatRequest, topics *topicsView) (ConsumerHeartbeatResult, *fsm.ConsumerGroupWrite, error) {
	var none ConsumerHeartbeatResult
	owned := ownedTopicPartitions(req.Owned)
	m, from, err := g.heartbeatMember(req)
	if err != nil {
		return none, nil, err
	}
	if err := g.checkSize(m); err != nil {
		return none, nil, err
	}
	next, regex, err := updatedSubscription(m, req)
	if err != nil {
		return none, nil, err
	}
	before, w, err := g.advance(memberUpdate{m: m, from: from, next: next, regex: regex, owned: owned,
		fresh: req.MemberEpoch == joinMemberEpoch}, topics)
	if err != nil {
		return none, nil, err
	}
	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: m.rec.epoch, HeartbeatInterval: g.c.cfg.ConsumerHeartbeatInterval}
	full := req.RebalanceTimeoutMs != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Owned != nil
	if req.MemberEpoch == joinMemberEpoch || full || !sameTopicPartitions(before.assigned, m.rec.assigned) {
		res.Assignment, res.HasAssignment = toTopicIDPartitions(m.rec.assigned), true
	}
	return res, w, nil
}

// checkSize refuses a member that is not in the group yet when the group
// has group.consumer.max.size members (Kafka checks before a static
// member's replacement, so a full group refuses that too). Called with
// g.mu held.
func (g *consumerGroup) checkSize(m *consumerMember) error {
	max := g.c.cfg.ConsumerMaxSize
	if _, known := g.members[m.id]; !known && len(g.members) >= int(max) {
		return fmt.Errorf("%w: the consumer group has reached its maximum capacity of %d members", ErrGroupMaxSizeReached, max)
	}
	return nil
}

// memberUpdate is one member's request as advance applies it.
type memberUpdate struct {
	// m is the member (not in the group yet when new); from the static
	// member it takes over from, or nil.
	m, from *consumerMember
	// next is m's new subscription (nil: unchanged), subscribing with
	// regex.
	next  *fsm.ConsumerSubscription
	regex *regexp.Regexp
	// owned is what the member says it owns (nil: it did not say).
	owned topicPartitions
	// fresh is set for a member that gave up everything it owned (a
	// ConsumerGroupHeartbeat join), which reconciles from nothing.
	fresh bool
}

// advance moves the group on for one member's request, the common part
// of a ConsumerGroupHeartbeat and a classic member's JoinGroup: a new
// group epoch when the member is new, its topic names or regex changed,
// or the subscribed topics' metadata changed; a new target when the group
// epoch passed the target's; one reconciliation step of the member; its
// timers. Everything that can fail is computed before anything is
// installed, so a refused request changes nothing. It returns the member's
// reconciliation before the step and the write to make (nil: nothing
// changed). Called with g.mu held.
func (g *consumerGroup) advance(u memberUpdate, topics *topicsView) (reconciled, *fsm.ConsumerGroupWrite, error) {
	m, from := u.m, u.from
	sub := m.sub
	if u.next != nil {
		sub = *u.next
	}
	_, known := g.members[m.id]
	// A static member taking over from its predecessor continues its
	// subscription and target: no new epoch unless the subscription
	// changed, which is what spares a restarting static member a
	// rebalance.
	joined := !known
	bump := (joined && from == nil) || (u.next != nil && subscriptionChanged(m.sub, sub))

	// The group's members as they would be, for the metadata hash and the
	// target: m with its new subscription, from gone. Made only when one
	// of them is needed: a heartbeat that changes nothing costs the same
	// however large the group.
	var view []targetMember
	var assignorNames []string
	makeView := func() {
		if view != nil {
			return
		}
		view = make([]targetMember, 0, len(g.members)+1)
		assignorNames = make([]string, 0, len(g.members)+1)
		for _, o := range g.members {
			if o != from && o != m {
				view = append(view, o.targetMember(o.sub, o.regex, g.c.cfg.AuthorizeTopic))
				assignorNames = append(assignorNames, o.sub.ServerAssignor)
			}
		}
		view = append(view, m.targetMember(sub, u.regex, g.c.cfg.AuthorizeTopic))
		assignorNames = append(assignorNames, sub.ServerAssignor)
		slices.SortFunc(view, func(a, b targetMember) int { return cmp.Compare(a.id, b.id) })
	}
	hash, hashed := g.metadataHash, false
	if bump || !g.hashChecked || g.hashVersion != topics.version {
		makeView()
		hash, hashed = topics.hashOf(view), true
		bump = bump || hash != g.metadataHash
	}
	epoch := g.epoch
	if bump {
		epoch++
	}

	targetEpoch, target := g.targetEpoch, m.target
	var built targetResult
	rebuilt := epoch > g.targetEpoch
	if rebuilt {
		makeView()
		var err error
		if built, err = g.buildTarget(view, assignorNames, m.id, from, topics); err != nil {
			return reconciled{}, nil, err
		}
		targetEpoch, target = epoch, built.target[m.id]
	}
	// A member that gave everything up starts from nothing; a static
	// member taking over starts from its predecessor's assignment at
	// epoch 0.
	base := m.rec
	switch {
	case from != nil:
		base = from.rec
		base.epoch, base.previousEpoch, base.pendingRevocation = 0, 0, nil
	case u.fresh:
		base = reconciled{}
	}
	ownerEpoch := g.ownerEpochFor(m.id)
	if from != nil {
		// What the predecessor holds is the newcomer's own.
		inner := ownerEpoch
		ownerEpoch = func(t topicID, p int32) int32 {
			if g.owners[t][p] == from.id {
				return -1
			}
			return inner(t, p)
		}
	}
	rec, err := reconcile(base, reconcileInput{targetEpoch: targetEpoch, target: target, owned: u.owned, ownerEpoch: ownerEpoch})
	if err != nil {
		return reconciled{}, nil, fmt.Errorf("%w: the member's reconciliation state is unknown to this coordinator", err)
	}

	// Install.
	now := g.c.now()
	w := &fsm.ConsumerGroupWrite{Timestamp: now}
	if from != nil {
		g.remove(from)
		w.Leaves = []string{from.id}
	}
	if joined {
		g.add(m)
		g.stateTimestamp = now
	}
	if joined || u.next != nil {
		if u.next != nil {
			if old := m.sub.InstanceID; old != "" && old != sub.InstanceID && g.static[old] == m.id {
				delete(g.static, old) // a member that rejoined under another instance id
			}
			m.sub, m.regex = sub, u.regex
			g.hashChecked = false
		}
		if m.sub.InstanceID != "" {
			g.static[m.sub.InstanceID] = m.id
		}
		w.Subscriptions = []fsm.ConsumerSubscriptionPut{{MemberID: m.id, Subscription: m.sub}}
	}
	if hashed {
		g.hashVersion, g.hashChecked = topics.version, true
	}
	if bump {
		g.epoch, g.metadataHash = epoch, hash
		w.Epoch, w.MetadataHash = epoch, hash
	}
	if rebuilt {
		g.targetEpoch, w.TargetEpoch = targetEpoch, targetEpoch
		for _, tm := range view {
			o := g.members[tm.id]
			stored := o.target
			if o == m && joined {
				stored = nil // a new member has no target stored yet, whatever it took over
			}
			next := built.target[tm.id]
			if !sameTopicPartitions(stored, next) {
				w.Targets = append(w.Targets, fsm.ConsumerTargetPut{MemberID: tm.id, Partitions: toConsumerPartitions(next)})
			}
			o.target = next
		}
	} else if from != nil {
		w.Targets = []fsm.ConsumerTargetPut{{MemberID: m.id, Partitions: toConsumerPartitions(m.target)}}
	}
	before := m.rec
	if joined || !sameReconciled(rec, m.rec) {
		g.setReconciled(m, rec)
		w.Assignments = []fsm.ConsumerAssignmentPut{{MemberID: m.id, Assignment: rec.record()}}
	}
	g.scheduleSession(m)
	g.scheduleRebalanceIfRevoking(m, before)
	if len(w.Leaves) == 0 && len(w.Subscriptions) == 0 && len(w.Targets) == 0 && len(w.Assignments) == 0 && w.Epoch == 0 && w.TargetEpoch == 0 {
		w = nil
	}
	return before, w, nil
}

// heartbeatMember finds the member a join or heartbeat is for (Kafka's
// getOrMaybeSubscribeDynamicConsumerGroupMember and its static
// counterpart): a known member, checked against its epoch and instance
// id; or, for a join, a new member, which for a static member whose
// predecessor left temporarily (epoch -2) takes over from it (from). A
// new member is not in the group yet.
//
// A known member joining again at epoch 0 rejoins in place: it gave up
// its partitions (a fenced member does so, keeping its id, as franz-go
// and the Java client do) and reconciles from nothing. Kafka 4.0–4.1
// check its epoch instead and fence it again until its session expires
// (45 s with no partitions); KIP-848 says epoch 0 (re)joins, and kfake
// rejoins in place too. Called with g.mu held.
func (g *consumerGroup) heartbeatMember(req *ConsumerHeartbeatRequest) (m, from *consumerMember, err error) {
	m = g.members[req.MemberID]
	if req.MemberEpoch == joinMemberEpoch {
		if req.InstanceID != nil {
			if prevID, ok := g.static[*req.InstanceID]; ok && prevID != req.MemberID && g.members[prevID] != nil {
				prev := g.members[prevID]
				if m != nil {
					return nil, nil, fmt.Errorf("%w: member %s is in the group already; a static member takes over instance id %s under a new member id",
						ErrUnreleasedInstanceID, req.MemberID, *req.InstanceID)
				}
				// A classic member's instance id is taken over at once
				// (a rolling restart onto the consumer protocol sends no
				// leave); a consumer-protocol member's only once it left
				// for a while, as in Kafka.
				if prev.sub.Classic == nil && prev.rec.epoch != leaveStaticMemberEpoch {
					return nil, nil, fmt.Errorf("%w: static member %s with instance id %s cannot join the group because the instance id is owned by member %s",
						ErrUnreleasedInstanceID, req.MemberID, *req.InstanceID, prevID)
				}
				from = prev
			}
		}
		if m == nil {
			m = &consumerMember{id: req.MemberID}
			if from != nil {
				m.sub, m.regex, m.target = from.sub, from.regex, from.target
			}
		}
		return m, from, nil
	}
	// A static member is found by its instance id first, so a replaced
	// one is told it is fenced, not unknown (Kafka's
	// getOrMaybeSubscribeStaticConsumerGroupMember).
	if req.InstanceID != nil {
		if err := g.checkStatic(req.MemberID, *req.InstanceID); err != nil {
			return nil, nil, err
		}
	}
	if m == nil {
		return nil, nil, fmt.Errorf("%w: member %s is not a member of group %s", ErrUnknownMemberID, req.MemberID, g.id)
	}
	if err := checkMemberEpoch(&m.rec, req.MemberEpoch, req.Owned); err != nil {
		return nil, nil, err
	}
	return m, nil, nil
}

// checkStatic checks that instanceID belongs to member id (Kafka's
// throwIfStaticMemberIsUnknown and throwIfInstanceIdIsFenced). Called with
// g.mu held.
func (g *consumerGroup) checkStatic(id, instanceID string) error {
	holder, ok := g.static[instanceID]
	switch {
	case !ok || g.members[holder] == nil:
		return fmt.Errorf("%w: instance id %s is unknown", ErrUnknownMemberID, instanceID)
	case holder != id:
		return fmt.Errorf("%w: instance id %s belongs to member %s, not %s", ErrFencedInstanceID, instanceID, holder, id)
	}
	return nil
}

// updatedSubscription applies the heartbeat's non-null fields to m's
// subscription. It returns nil when nothing changed, and the compiled
// regex the result subscribes with; a regex that does not compile is
// ErrInvalidRegularExpression.
func updatedSubscription(m *consumerMember, req *ConsumerHeartbeatRequest) (*fsm.ConsumerSubscription, *regexp.Regexp, error) {
	sub := m.sub
	sub.Topics = slices.Clone(sub.Topics)
	sub.Classic = nil // it heartbeats: it uses the consumer protocol now
	if req.InstanceID != nil {
		sub.InstanceID = *req.InstanceID
	}
	if req.RackID != nil {
		sub.RackID = *req.RackID
	}
	if req.RebalanceTimeoutMs != -1 {
		sub.RebalanceTimeoutMs = req.RebalanceTimeoutMs
	}
	if req.ServerAssignor != nil {
		sub.ServerAssignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		sub.Topics = slices.Clone(req.SubscribedTopicNames)
		slices.Sort(sub.Topics)
		sub.Topics = slices.Compact(sub.Topics)
	}
	if req.SubscribedTopicRegex != nil {
		sub.TopicRegex = *req.SubscribedTopicRegex
	}
	sub.ClientID, sub.ClientHost, sub.Principal = req.ClientID, req.ClientHost, req.Principal
	regex := m.regex
	if sub.TopicRegex != m.sub.TopicRegex || (sub.TopicRegex != "" && regex == nil) {
		regex = nil
		if sub.TopicRegex != "" {
			var err error
			if regex, err = compileSubscriptionRegex(sub.TopicRegex); err != nil {
				return nil, nil, fmt.Errorf("%w: SubscribedTopicRegex %s: %v", ErrInvalidRegularExpression, sub.TopicRegex, err)
			}
		}
	}
	if sameSubscription(sub, m.sub) {
		return nil, regex, nil
	}
	return &sub, regex, nil
}

// subscriptionChanged reports whether a member's subscription changed in
// a way that needs a new target: its topic names or its regex (Kafka
// 4.0–4.1's hasMemberSubscriptionChanged and maybeUpdateRegularExpressions;
// a new rack, assignor or rebalance timeout is stored without a new
// epoch).
func subscriptionChanged(a, b fsm.ConsumerSubscription) bool {
	return !slices.Equal(a.Topics, b.Topics) || a.TopicRegex != b.TopicRegex
}

// sameSubscription reports whether a and b are equal in every field.
func sameSubscription(a, b fsm.ConsumerSubscription) bool {
	return a.InstanceID == b.InstanceID && a.RackID == b.RackID && a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		a.Principal == b.Principal &&
		slices.Equal(a.Topics, b.Topics) && a.TopicRegex == b.TopicRegex && a.ServerAssignor == b.ServerAssignor &&
		a.RebalanceTimeoutMs == b.RebalanceTimeoutMs && reflect.DeepEqual(a.Classic, b.Classic)
}

// targetMember is m as the target reads it, with sub and regex; with
// authorize (Config.AuthorizeTopic), its regex matches only the topics
// its principal may describe.
func (m *consumerMember) targetMember(sub fsm.ConsumerSubscription, regex *regexp.Regexp, authorize TopicAuthorizer) targetMember {
	tm := targetMember{id: m.id, instanceID: sub.InstanceID, rack: sub.RackID, topics: sub.Topics, regex: regex}
	if authorize != nil && regex != nil {
		principal, host := sub.Principal, sub.ClientHost
		tm.allow = func(topic string) bool { return authorize(principal, host, topic) }
	}
	return tm
}

// buildTarget computes the group's next target over view (the members as
// they will be, by id), with the assignor most of them name
// (assignorNames, one per member): member id, a static member taking over
// from its predecessor, starts from that member's target. Called with
// g.mu held.
func (g *consumerGroup) buildTarget(view []targetMember, assignorNames []string, id string, from *consumerMember, topics *topicsView) (targetResult, error) {
	assignorName := preferredAssignor(assignorNames, g.c.cfg.DefaultServerAssignor)
	assignor, err := g.c.serverAssignor(assignorName)
	if err != nil {
		return targetResult{}, err
	}
	current := make(map[string]topicPartitions, len(g.members))
	for _, o := range g.members {
		current[o.id] = o.target
	}
	var replaces map[string]string
	if from != nil {
		replaces = map[string]string{id: from.id}
	}
	res, err := buildTarget(targetBuild{assignor: assignor, members: view, current: current, replaces: replaces, topics: topics.byName})
	if err != nil {
		g.c.logger.Error("server-side assignor failed; the group keeps its target", "group", g.id, "assignor", assignorName, "error", err)
		return targetResult{}, fmt.Errorf("%w: %s: %v", ErrAssignmentFailed, assignorName, err)
	}
	return res, nil
}
