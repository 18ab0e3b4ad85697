package fsm

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// MetaFSM is the raft.FSM of the metadata group: the cluster-wide topic
// registry, the cluster id, shard placement (the registered nodes and
// each shard's desired voters; placement.go), users' SCRAM credentials
// (salted keys, never passwords; scram.go) and Kafka's ACLs (acl.go).
// Raft's FSM goroutine calls Apply, Snapshot and Restore; raft runs the
// snapshot's Persist on another goroutine. Any goroutine may call the
// readers, which return copies.
type MetaFSM struct {
	logger hclog.Logger

	mu        sync.RWMutex
	clusterID string
	topics    map[string]Topic
	// topicsVersion counts changes of topics on this replica (it is not
	// replicated state: only equal versions on one replica compare).
	topicsVersion uint64
	placement     placementState
	scram         scramState
	acls          aclState

	// applied is the Raft index of the last command this replica applied
	// (or of the snapshot it restored): see applied.go.
	applied appliedIndex
	// features is the cluster's finalized levels (features.go), and
	// finalized its release.Feature level for lock-free readers.
	features  featureLevels
	finalized atomic.Int32
	// onFinalized is told of a change of finalized (OnFinalized).
	onFinalized func()
}

var _ raft.FSM = (*MetaFSM)(nil)

// NewMetaFSM returns an empty metadata state.
func NewMetaFSM(logger hclog.Logger) *MetaFSM {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &MetaFSM{logger: logger, topics: make(map[string]Topic), placement: newPlacementState(), scram: newScramState(), acls: newACLState()}
}

// Apply applies one committed entry; it panics on an undecodable entry and
// returns ErrTopicExists, ErrTopicNotFound, ErrClusterIDMismatch, a
// placement command's error (ErrNodeNotFound, ErrLastActiveNode,
// ErrInvalidPlacement), a SCRAM command's (ErrInvalidScramCredential,
// ErrScramCredentialNotFound) or an ACL command's (ErrInvalidACL) as its
// response, and ErrForeignCommand for a shard command, which it does not
// apply.
func (f *MetaFSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, err := Decode(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: meta index %d: %v", l.Index, err))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Published just before the lock is released: a reader that
	// WaitApplied woke takes the lock after this command's change.
	defer f.applied.set(l.Index)
	switch c := cmd.(type) {
	case *TopicCreate:
		if _, ok := f.topics[c.Topic.Name]; ok {
			return ErrTopicExists
		}
		f.topics[c.Topic.Name] = c.Topic
		f.topicsVersion++
	case *TopicDelete:
		if _, ok := f.topics[c.Name]; !ok {
			return ErrTopicNotFound
		}
		delete(f.topics, c.Name)
		f.topicsVersion++
	case *ClusterStamp:
		return stampClusterID(&f.clusterID, c)
	case *NodeRegister, *NodeDrain, *PlacementSet:
		return f.placement.apply(cmd)
	case *ScramCredentialSet, *ScramCredentialDelete:
		return f.scram.apply(cmd)
	case *ACLCreate, *ACLDelete:
		return f.acls.apply(cmd)
	case *FeatureLevelSet:
		r := f.features.apply(c)
		f.setFinalized()
		return r
	default:
		f.logger.Error("refused a shard command in the metadata group's log", "index", l.Index, "command", cmd.CommandType())
		return fmt.Errorf("%w: %s in the metadata group's log", ErrForeignCommand, cmd.CommandType())
	}
	return nil
}

// setFinalized publishes the finalized level and tells onFinalized of a
// change. Called with f.mu held, on the FSM goroutine.
func (f *MetaFSM) setFinalized() {
	l := int32(kcoordVersion(f.features))
	if f.finalized.Swap(l) != l && f.onFinalized != nil {
		f.onFinalized()
	}
}

// ClusterID returns the id of the cluster, "" until a ClusterStamp is
// applied.
func (f *MetaFSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.clusterID
}

// Topic returns one registered topic.
func (f *MetaFSM) Topic(name string) (Topic, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.topics[name]
	return t, ok
}

// Topics returns every registered topic sorted by name.
func (f *MetaFSM) Topics() []Topic {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Topic, 0, len(f.topics))
	for _, t := range f.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TopicsVersion changes whenever the topics may have changed on this
// replica (a topic created or deleted, a snapshot restored): readers that
// cache what they derive from Topics compare it (groups.TopicSource).
func (f *MetaFSM) TopicsVersion() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.topicsVersion
}

// Snapshot implements raft.FSM: a copy of the topics, sorted by name, of
// the placement, of the SCRAM credentials and of the ACLs.
func (f *MetaFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	nodes, placement := f.placement.snapshot()
	scram := f.scram.snapshot()
	acls := f.acls.snapshot()
	f.mu.RUnlock()
	// Raft calls Snapshot on the FSM goroutine, so no Apply runs meanwhile:
	// the index is that of the state copied above.
	return &metaSnapshot{ClusterID: f.ClusterID(), Topics: f.Topics(), Nodes: nodes, Placement: placement, Scram: scram, ACLs: acls,
		AppliedIndex: f.applied.get(), Features: f.FeatureLevels()}, nil
}

// Restore implements raft.FSM: it replaces the state with a snapshot
// written by Persist (or by a release that wrote JSON snapshots).
func (f *MetaFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s metaSnapshot
	if err := readSnapshot(rc, &s); err != nil {
		return err
	}
	topics := make(map[string]Topic, len(s.Topics))
	for _, t := range s.Topics {
		topics[t.Name] = t
	}
	f.mu.Lock()
	f.clusterID, f.topics = s.ClusterID, topics
	f.topicsVersion++
	f.placement.restore(s.Nodes, s.Placement)
	f.scram.restore(s.Scram)
	f.acls.restore(s.ACLs)
	f.features.restore(s.Features)
	f.setFinalized()
	f.mu.Unlock()
	f.applied.restored(s.AppliedIndex)
	return nil
}

// metaSnapshot is the snapshot document of a MetaFSM. Version 1 (JSON) had
// no cluster id; snapshots from before placement have no nodes and no
// placement, those from before SCRAM no credentials and those from
// before ACLs no ACLs (they restore empty).
type metaSnapshot struct {
	ClusterID string           `json:"cluster_id,omitempty" codec:"cluster_id"`
	Topics    []Topic          `json:"topics" codec:"topics"`
	Nodes     []Node           `json:"-" codec:"nodes,omitempty"`
	Placement []ShardPlacement `json:"-" codec:"placement,omitempty"`
	// Scram is sorted by user, then mechanism.
	Scram []ScramCredential `json:"-" codec:"scram,omitempty"`
	// ACLs is sorted as MetaFSM.ACLs returns them.
	ACLs []ACL `json:"-" codec:"acls,omitempty"`
	// AppliedIndex is the Raft index of the last command applied to the
	// state (0 in snapshots of releases before it: see applied.go). A
	// release that does not know it skips it.
	AppliedIndex uint64 `json:"-" codec:"applied_index,omitempty"`
	// Features is the finalized levels, sorted by feature; absent until
	// a level above 1 is finalized (release 0.1.0 writes none).
	Features []FeatureLevel `json:"-" codec:"features,omitempty"`
}

// Persist implements raft.FSMSnapshot: it streams the copy into sink.
func (s *metaSnapshot) Persist(sink raft.SnapshotSink) error { return writeSnapshot(sink, s) }

// Release implements raft.FSMSnapshot.
func (s *metaSnapshot) Release() {}
