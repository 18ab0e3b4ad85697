package groups

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// MemLog is an in-memory Log for tests: every entry is applied to the FSM
// at once, in order, unless a fault is set. It ships in the package, as
// hashicorp/raft's testing.go does, so other packages' tests can drive a
// coordinator without Raft.
type MemLog struct {
	FSM *fsm.ShardFSM

	mu    sync.Mutex
	index uint64
	fail  error
	delay time.Duration
	// lastDelayed is closed once the latest delayed entry has applied.
	lastDelayed chan struct{}
	epoch       uint64 // the current leadership epoch
	notLeader   bool
	// confirmFail, when set, fails every ConfirmLeadership (a leader that
	// was deposed without knowing it yet).
	confirmFail error
	confirms    int
	settling    bool
	routing     broadcast // fired by SetSettling and SetLeader
}

// NewMemLog returns a MemLog applying to a fresh shard FSM, leading in
// epoch 1.
func NewMemLog() *MemLog {
	return &MemLog{FSM: fsm.NewShardFSM(0, nil), epoch: 1, routing: newBroadcast()}
}

// SetFault makes every following write fail with err (nil heals).
func (l *MemLog) SetFault(err error) {
	l.mu.Lock()
	l.fail = err
	l.mu.Unlock()
}

// SetDelay makes every following write take d before it applies.
func (l *MemLog) SetDelay(d time.Duration) {
	l.mu.Lock()
	l.delay = d
	l.mu.Unlock()
}

// ApplyAsync implements Log.
func (l *MemLog) ApplyAsync(cmd []byte, _ time.Duration) raft.ApplyFuture {
	l.mu.Lock()
	fail, delay := l.fail, l.delay
	if fail != nil {
		l.mu.Unlock()
		return errorFuture{fail}
	}
	l.index++
	entry := &raft.Log{Index: l.index, Type: raft.LogCommand, Data: cmd}
	if delay == 0 {
		resp := l.FSM.Apply(entry)
		l.mu.Unlock()
		return memFuture{resp: resp, index: entry.Index}
	}
	f := &delayedFuture{done: make(chan struct{}), index: entry.Index}
	prev := l.lastDelayed
	l.lastDelayed = f.done
	l.mu.Unlock()
	go func() {
		time.Sleep(delay)
		if prev != nil {
			<-prev // applied in log order, as Raft applies
		}
		l.mu.Lock()
		f.resp = l.FSM.Apply(entry)
		l.mu.Unlock()
		close(f.done)
	}()
	return f
}

// SetLeader starts a new leadership epoch in which the log leads or not
// (a MemLog starts leading in epoch 1), as a cluster.Shard's leadership
// notification does. It returns the new epoch.
func (l *MemLog) SetLeader(leader bool) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	l.notLeader = !leader
	l.routing.fire()
	return l.epoch
}

// SetSettling makes Settling report settling (an election under way, as
// far as this replica can tell) or not (another node leads).
func (l *MemLog) SetSettling(settling bool) {
	l.mu.Lock()
	l.settling = settling
	l.routing.fire()
	l.mu.Unlock()
}

// HandingOver implements Log: a MemLog never fences itself.
func (l *MemLog) HandingOver() bool { return false }

// Settling implements Log.
func (l *MemLog) Settling() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.settling
}

// RoutingChanges implements Log.
func (l *MemLog) RoutingChanges() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.routing.wait()
}

// StepDown makes the log stop leading without a new epoch: Raft stepped
// down and the notification has not been delivered yet.
func (l *MemLog) StepDown() {
	l.mu.Lock()
	l.notLeader = true
	l.mu.Unlock()
}

// Epoch is the current leadership epoch.
func (l *MemLog) Epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// SetConfirmFault makes every following ConfirmLeadership fail with err (nil
// heals): a leader a quorum no longer follows.
func (l *MemLog) SetConfirmFault(err error) {
	l.mu.Lock()
	l.confirmFail = err
	l.mu.Unlock()
}

// Confirms counts ConfirmLeadership calls.
func (l *MemLog) Confirms() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.confirms
}

// Leads implements Log.
func (l *MemLog) Leads(epoch uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.notLeader && epoch == l.epoch
}

// ConfirmLeadership implements Log.
func (l *MemLog) ConfirmLeadership(_ context.Context, epoch uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.confirms++
	switch {
	case l.confirmFail != nil:
		return l.confirmFail
	case l.notLeader || epoch != l.epoch:
		return ErrNotCoordinator
	}
	return nil
}

// Barrier implements Log.
func (l *MemLog) Barrier(time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fail
}

type memFuture struct {
	resp  any
	index uint64
}

func (f memFuture) Error() error  { return nil }
func (f memFuture) Response() any { return f.resp }
func (f memFuture) Index() uint64 { return f.index }

type delayedFuture struct {
	done  chan struct{}
	resp  any
	index uint64
}

func (f *delayedFuture) Error() error  { <-f.done; return nil }
func (f *delayedFuture) Response() any { <-f.done; return f.resp }
func (f *delayedFuture) Index() uint64 { return f.index }

// MemTopics is an in-memory TopicSource for tests: a topic registry whose
// version moves with every change.
type MemTopics struct {
	mu      sync.Mutex
	topics  map[string]fsm.Topic
	version uint64
}

// NewMemTopics returns an empty registry.
func NewMemTopics() *MemTopics { return &MemTopics{topics: make(map[string]fsm.Topic)} }

// Put registers a topic (or replaces the one of that name) with a
// deterministic id derived from the name and its registration count.
func (m *MemTopics) Put(name string, partitions int32) fsm.Topic {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version++
	t := fsm.Topic{Name: name, Partitions: partitions}
	copy(t.ID[:], name)
	t.ID[15] = byte(m.version)
	m.topics[name] = t
	return t
}

// Delete removes a topic.
func (m *MemTopics) Delete(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version++
	delete(m.topics, name)
}

// Topics implements TopicSource.
func (m *MemTopics) Topics() []fsm.Topic {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]fsm.Topic, 0, len(m.topics))
	for _, t := range m.topics {
		out = append(out, t)
	}
	return out
}

// TopicsVersion implements TopicSource.
func (m *MemTopics) TopicsVersion() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.version
}
