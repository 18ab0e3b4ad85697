package fsm

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// ShardFSM is the raft.FSM of one group shard: the shard's groups, their
// committed offsets and the cluster id. Raft's FSM goroutine calls Apply,
// Snapshot and Restore; raft runs the snapshot's Persist on another
// goroutine. Any goroutine may call the read methods, which take a read lock
// and return copies (byte slices inside are shared and must not be
// modified: Apply never mutates a stored value in place, it replaces it).
type ShardFSM struct {
	shard  int32
	logger hclog.Logger

	mu        sync.RWMutex
	clusterID string
	groups    classicGroups
	// consumerGroups are the consumer-protocol groups; an id is in groups
	// or here, never both.
	consumerGroups map[string]ConsumerGroup
	// table holds each group's offsets, and the simple classic groups
	// of groups, without pointers for the GC to follow (grouptable.go).
	table *groupTable
	// batch is applyOffsetCommit's scratch, reused from commit to commit
	// (a commit's batch was 8% of the bytes a replica allocated).
	batch []tpOffset
	// commit is what decode decodes an OffsetCommit into, its offsets'
	// array reused from commit to commit: a new one for each was a tenth
	// of the bytes a replica allocated during a fill. Between applies it
	// is empty but for that array's capacity (resetCommit).
	commit OffsetCommit
	// features is the levels stamped into the shard (features.go).
	features featureLevels
}

var _ raft.BatchingFSM = (*ShardFSM)(nil)

// NewShardFSM returns the empty state of shard.
func NewShardFSM(shard int32, logger hclog.Logger) *ShardFSM {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	table := newGroupTable()
	return &ShardFSM{
		shard:          shard,
		logger:         logger,
		groups:         newClassicGroups(table),
		consumerGroups: make(map[string]ConsumerGroup),
		table:          table,
	}
}

// Apply applies one committed entry. It panics on an entry it cannot decode
// (continuing would diverge from the other replicas) and returns business
// errors (ErrGroupNotEmpty, ErrClusterIDMismatch, ...) as its response, and
// ErrForeignCommand for a metadata command, which it does not apply.
func (f *ShardFSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applyLocked(l)
}

// ApplyBatch applies the committed entries raft hands over at once (it is
// a raft.BatchingFSM), under one lock, and returns each one's response as
// Apply would. Raft's FSM goroutine calls it; readers wait for the batch.
func (f *ShardFSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = f.applyLocked(l)
		}
	}
	return out
}

// applyLocked applies one command entry; f.mu is held.
func (f *ShardFSM) applyLocked(l *raft.Log) any {
	cmd, err := f.decode(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: shard %d index %d: %v", f.shard, l.Index, err))
	}
	switch c := cmd.(type) {
	case *GroupPut:
		cg, consumer := f.consumerGroups[c.Group.ID]
		switch {
		case c.Downgrade && cg.Writes != c.ConsumerAfter:
			return fmt.Errorf("%w: the downgrade of %q was computed at write %d, the group is at %d", ErrStaleConsumerGroupWrite, c.Group.ID, c.ConsumerAfter, cg.Writes)
		case consumer && !cg.Empty() && !c.Downgrade:
			return fmt.Errorf("%w: %q is a consumer group with %d members", ErrGroupTypeConflict, c.Group.ID, len(cg.Members))
		}
		delete(f.consumerGroups, c.Group.ID) // an empty consumer group, downgraded
		f.groups.put(c.Group)
	case *GroupDelete:
		return f.applyGroupDelete(c)
	case *OffsetCommit:
		f.applyOffsetCommit(c)
		if c == &f.commit {
			f.resetCommit()
		}
	case *OffsetDelete:
		f.applyOffsetDelete(c)
	case *ClusterStamp:
		return stampClusterID(&f.clusterID, c)
	case *ConsumerGroupWrite:
		return f.applyConsumerGroupWrite(c)
	case *FeatureLevelSet:
		return f.features.apply(c)
	default:
		f.logger.Error("refused a metadata command in a shard's log", "shard", f.shard, "index", l.Index, "command", cmd.CommandType())
		return fmt.Errorf("%w: %s in shard %d's log", ErrForeignCommand, cmd.CommandType(), f.shard)
	}
	return nil
}

func (f *ShardFSM) applyGroupDelete(c *GroupDelete) any {
	g, classic := f.groups.get(c.GroupID)
	cg, consumer := f.consumerGroups[c.GroupID]
	switch {
	case classic && !g.Empty(), consumer && !cg.Empty():
		return ErrGroupNotEmpty
	case !classic && !consumer:
		if !hasOffsets(f.table, c.GroupID) {
			return ErrGroupNotFound
		}
	}
	f.groups.delete(c.GroupID)
	delete(f.consumerGroups, c.GroupID)
	f.table.deleteOffsets(c.GroupID)
	return nil
}

func (f *ShardFSM) applyOffsetCommit(c *OffsetCommit) {
	classic := f.groups.has(c.GroupID)
	if _, consumer := f.consumerGroups[c.GroupID]; !classic && !consumer {
		f.groups.put(Group{ID: c.GroupID, State: StateEmpty, StateTimestamp: c.Timestamp})
	}
	if len(c.Offsets) == 0 {
		return
	}
	batch := slices.Grow(f.batch[:0], len(c.Offsets))[:len(c.Offsets)]
	for i, o := range c.Offsets {
		off := o.Offset
		if off.CommitTimestamp == 0 {
			off.CommitTimestamp = c.Timestamp
		}
		batch[i] = tpOffset{TopicPartition{Topic: o.Topic, Partition: o.Partition}, off}
	}
	f.table.setOffsets(c.GroupID, sortBatch(batch))
	clear(batch) // keep no command's strings alive
	f.batch = batch[:0]
}

// maxReusedCommit bounds the offsets of the commit decode keeps for the
// next: a rare commit of thousands of partitions lets its array go.
const maxReusedCommit = 1024

// decode is Decode, but for an OffsetCommit of this build's body version,
// the command a fill is made of: it decodes into f.commit, which
// resetCommit left empty, so that what the body omits is zero as in a new
// command (msgp's generated code leaves a field the body omits as it
// finds it: an offset without metadata would keep the last commit's).
// applyOffsetCommit copies what it keeps. Apply's goroutine, f.mu held.
func (f *ShardFSM) decode(b []byte) (Command, error) {
	if len(b) < 2 || CommandType(b[0]) != OffsetCommitType || b[1] != bodyVersionMsgpack {
		return Decode(b)
	}
	if err := decodeBody(b[2:], &f.commit); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedCommand, OffsetCommitType, err)
	}
	return &f.commit, nil
}

// resetCommit empties f.commit once its apply is done, so that it holds
// no command's strings, and keeps its offsets' array for the next unless
// it is over maxReusedCommit. It clears the whole array, not only the
// offsets of this commit: a body could name its offsets twice, the second
// time fewer. Apply's goroutine, f.mu held.
func (f *ShardFSM) resetCommit() {
	offsets := f.commit.Offsets
	clear(offsets[:cap(offsets)])
	if cap(offsets) > maxReusedCommit {
		offsets = nil
	}
	f.commit = OffsetCommit{Offsets: offsets[:0]}
}

func (f *ShardFSM) applyOffsetDelete(c *OffsetDelete) {
	if !hasOffsets(f.table, c.GroupID) {
		return
	}
	tps := slices.Clone(c.Partitions) // the command's slice stays as decoded
	slices.SortFunc(tps, compareTP)
	f.table.removeOffsets(c.GroupID, slices.Compact(tps))
}

// ClusterID returns the id of the cluster the shard belongs to, "" until a
// ClusterStamp is applied.
func (f *ShardFSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.clusterID
}

// Group returns the stored metadata of one group.
func (f *ShardFSM) Group(id string) (Group, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.groups.get(id)
}

// Groups returns every stored group, sorted by id.
func (f *ShardFSM) Groups() []Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Group, 0, f.groups.len())
	f.groups.each(func(g Group) { out = append(out, g) })
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// FullGroups returns every stored group that is not simple (Group.Simple),
// in no order: the groups a coordinator keeps in memory while it leads.
func (f *ShardFSM) FullGroups() []Group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Group, 0, len(f.groups.full))
	for _, g := range f.groups.full {
		out = append(out, g)
	}
	return out
}

// SimpleGroups returns every simple group (Group.Simple), in no order.
func (f *ShardFSM) SimpleGroups() []SimpleGroup {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]SimpleGroup, 0, f.table.simpleGroupCount())
	f.table.eachSimpleGroup(func(id []byte, ts int64) {
		out = append(out, SimpleGroup{ID: string(id), StateTimestamp: ts})
	})
	return out
}

// CountSimpleGroups returns how many simple groups the shard holds, and
// how many of ids (distinct) are among them: what a coordinator needs to
// count its dormant groups without listing them.
func (f *ShardFSM) CountSimpleGroups(ids []string) (total, among int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, id := range ids {
		if _, ok := simpleGroup(f.table, id); ok {
			among++
		}
	}
	return f.table.simpleGroupCount(), among
}

// HasOffsets reports whether the group has any committed offset.
func (f *ShardFSM) HasOffsets(group string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return hasOffsets(f.table, group)
}

// Offsets returns a copy of every committed offset of group.
func (f *ShardFSM) Offsets(group string) map[TopicPartition]Offset {
	f.mu.RLock()
	defer f.mu.RUnlock()
	src, _ := f.table.offsets(group)
	out := make(map[TopicPartition]Offset, src.len())
	src.each(func(tp TopicPartition, o Offset) { out[tp] = o })
	return out
}

// Offset returns one committed offset.
func (f *ShardFSM) Offset(group string, tp TopicPartition) (Offset, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.table.offset(group, tp)
}

// Snapshot captures the state for raft. It runs on raft's FSM goroutine,
// under the read lock, so it only copies (the packed offsets as they are);
// Persist, on raft's snapshot goroutine, sorts and writes
// (shardsnapshot.go).
func (f *ShardFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return copyShard(f), nil
}

// Restore replaces the state with a snapshot written by Persist (or by a
// release that wrote JSON snapshots). It reads and builds the new state
// before it takes the lock.
func (f *ShardFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := readShardSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.clusterID, f.groups, f.consumerGroups, f.table = s.clusterID, s.groups, s.consumerGroups, s.table
	f.features.restore(s.features)
	f.mu.Unlock()
	f.logger.Info("restored snapshot", "shard", f.shard, "groups", s.groups.len(), "consumer_groups", len(s.consumerGroups), "offset_groups", s.table.offsetGroupCount())
	return nil
}
