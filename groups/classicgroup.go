package groups

import (
	"fmt"
	"sync"
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// classicGroup is one live classic group on the shard leader. mu is the
// group's one serialization domain: every request handler, timer callback
// and write completion of this group takes it, and none holds it while
// waiting for Raft or for another group.
type classicGroup struct {
	c  *Coordinator
	id string

	mu     sync.Mutex
	closed bool // the coordinator stopped serving this group
	// evicted is set with closed when the group went dormant (dormant.go):
	// what it holds is still the group's state, so a listing that took it
	// before it went still shows it.
	evicted        bool
	state          State
	stateTimestamp int64 // Unix ms of the last state change
	// rebalanceStart is when the rebalance in progress began (zero when
	// none is): Config.ObserveRebalance is told its length.
	rebalanceStart time.Time
	// lastStable is when the group last became Stable: its last completed
	// rebalance (zero when this coordinator has not seen one; a group
	// loaded Stable takes its stored state timestamp).
	lastStable   time.Time
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*classicMember
	order        []string          // member ids in join order
	static       map[string]string // instance id → member id
	pending      map[string]*time.Timer

	// newMemberAdded is set when a member joins during the initial delay.
	newMemberAdded bool
	// joinTimer ends the current join phase; joinToken invalidates a timer
	// that fired after it was replaced.
	joinTimer *time.Timer
	joinToken uint64
	// initialJoin is set while the join phase is the initial delay, which
	// does not end early when everyone has joined.
	initialJoin bool
	// pendingSync holds the members of the current generation that have
	// not sent SyncGroup yet; syncTimer removes them when the rebalance
	// timeout runs out (Kafka's DelayedSync).
	pendingSync map[string]bool
	syncTimer   *time.Timer
	syncToken   uint64
	// subscribed is the current generation's subscribed topics, when
	// subscribedKnown (groups of Kafka consumers whose metadata parsed).
	subscribed      map[string]bool
	subscribedKnown bool
	// inflight counts commits in flight per partition (writeCommit).
	inflight inflightCommits
	// assigning is the generation whose assignment is being written (0:
	// none); a leader's repeated SyncGroup for it does not write again.
	assigning int32
}

func newClassicGroup(c *Coordinator, id string) *classicGroup {
	return &classicGroup{
		c:              c,
		id:             id,
		state:          Empty,
		stateTimestamp: c.now(),
	}
}

// memberMaps allocates the maps of members, for a group that has had none
// (a group that only holds offsets keeps them nil: at 100 k such groups,
// empty maps were 30 MB). Reading a nil map is fine; only writes need it.
// Called with g.mu held.
func (g *classicGroup) memberMaps() {
	if g.members == nil {
		g.members = make(map[string]*classicMember)
		g.static = make(map[string]string)
		g.pending = make(map[string]*time.Timer)
		g.pendingSync = make(map[string]bool)
	}
}

// classicGroupFromRecord rebuilds a live group from its stored metadata. Members
// get a fresh session timeout when the coordinator starts their timers.
func classicGroupFromRecord(c *Coordinator, r fsm.Group) *classicGroup {
	g := newClassicGroup(c, r.ID)
	g.protocolType = r.ProtocolType
	g.protocol = r.Protocol
	g.generation = r.Generation
	g.leader = r.Leader
	g.stateTimestamp = r.StateTimestamp
	for _, mr := range r.Members {
		g.add(classicMemberFromRecord(mr, r.ProtocolType))
	}
	if len(g.members) > 0 {
		g.state = Stable
		g.lastStable = time.UnixMilli(r.StateTimestamp)
	}
	g.subscribed, g.subscribedKnown = g.computeSubscribedTopics()
	return g
}

// transition moves the group to s; it panics on a transition Kafka's state
// machine forbids, which would be a coordinator bug.
func (g *classicGroup) transition(s State) {
	ok := false
	for _, from := range validPrevious[s] {
		if from == g.state {
			ok = true
			break
		}
	}
	if !ok {
		panic(fmt.Sprintf("groups: group %q: illegal transition %s -> %s", g.id, g.state, s))
	}
	g.state = s
	g.stateTimestamp = g.c.now()
	if s == Empty || s == Dead {
		g.rebalanceStart = time.Time{} // the rebalance ended without members: no length to observe
	}
}

// add puts m in the group; the first member becomes the leader.
func (g *classicGroup) add(m *classicMember) {
	g.memberMaps()
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	if m.instanceID != "" {
		g.static[m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

// remove takes a member out, stops its timer and elects a new leader if it
// led. It does not answer the member's waiting requests.
func (g *classicGroup) remove(id string) {
	m, ok := g.members[id]
	if !ok {
		return
	}
	g.stopSession(m)
	delete(g.members, id)
	for i, oid := range g.order {
		if oid == id {
			g.order = append(g.order[:i:i], g.order[i+1:]...)
			break
		}
	}
	if m.instanceID != "" && g.static[m.instanceID] == id {
		delete(g.static, m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	delete(g.pendingSync, id)
}

// renameMember gives m a new member id, keeping its place, its leadership
// and its assignment (a static member's replacement). Called with g.mu held.
func (g *classicGroup) renameMember(m *classicMember, id string) {
	old := m.id
	delete(g.members, old)
	m.id = id
	g.members[id] = m
	for i, oid := range g.order {
		if oid == old {
			g.order[i] = id
		}
	}
	if m.instanceID != "" {
		g.static[m.instanceID] = id
	}
	if g.leader == old {
		g.leader = id
	}
	if g.pendingSync[old] {
		delete(g.pendingSync, old)
		g.pendingSync[id] = true
	}
}

// supportsProtocols reports whether a member with this protocol type and
// protocols may join: the type must match and one protocol must be common to
// every member (Kafka's supportsProtocols).
func (g *classicGroup) supportsProtocols(protocolType string, ps []fsm.Protocol) bool {
	if len(ps) == 0 || protocolType == "" {
		return false
	}
	if g.state == Empty {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		if g.allSupport(p.Name) {
			return true
		}
	}
	return false
}

func (g *classicGroup) allSupport(name string) bool {
	for _, m := range g.members {
		if !hasProtocol(m.protocols, name) {
			return false
		}
	}
	return true
}

func hasProtocol(ps []fsm.Protocol, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// maxRebalanceTimeout is the longest rebalance timeout of any member: how
// long a rebalance waits for members to rejoin.
func (g *classicGroup) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		if m.rebalanceTimeout > d {
			d = m.rebalanceTimeout
		}
	}
	return d
}

// allJoined reports whether every member is waiting in JoinGroup and no
// member id handed out with MEMBER_ID_REQUIRED is still expected.
func (g *classicGroup) allJoined() bool {
	for _, m := range g.members {
		if !m.awaitingJoin() {
			return false
		}
	}
	return len(g.pending) == 0
}

// validateMember checks that a request comes from a current member (Kafka's
// validateCurrentMember): a given instance id must be known
// (ErrUnknownMemberID) and map to memberID (ErrFencedInstanceID); the
// member id must be in the group. Called with g.mu held.
func (g *classicGroup) validateMember(memberID, instanceID string) error {
	if instanceID != "" {
		current, ok := g.static[instanceID]
		switch {
		case !ok:
			return ErrUnknownMemberID
		case current != memberID:
			return ErrFencedInstanceID
		}
	}
	if _, ok := g.members[memberID]; !ok {
		return ErrUnknownMemberID
	}
	return nil
}

// isFenced reports whether a static member's instance id now belongs to
// another member id (Kafka's isStaticMemberFenced).
func (g *classicGroup) isFenced(memberID, instanceID string) bool {
	if instanceID == "" {
		return false
	}
	current, ok := g.static[instanceID]
	return ok && current != memberID
}

// record converts the group for storage.
func (g *classicGroup) record() fsm.Group {
	r := fsm.Group{
		ID:             g.id,
		ProtocolType:   g.protocolType,
		Protocol:       g.protocol,
		Generation:     g.generation,
		Leader:         g.leader,
		State:          fsm.StateEmpty,
		StateTimestamp: g.stateTimestamp,
	}
	if len(g.members) > 0 {
		r.State = fsm.StateStable
	}
	for _, id := range g.order {
		r.Members = append(r.Members, g.members[id].record())
	}
	return r
}
