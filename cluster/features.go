package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/release"
)

// Feature levels, in the shape of Kafka's metadata.version (KIP-584's
// finalized features, KIP-778's upgrades): each node gossips the range of
// release.Feature levels its binary supports (nodeMeta.Release and
// Levels); the metadata group holds the level the cluster finalized
// (fsm.FeatureLevelSet); and every node writes only what that level
// allows (Shard.ApplyAsync refuses a command type above it). So a
// cluster of two releases is one cluster, and an upgraded node can go
// back to the previous binary, until the level is finalized.
//
// The metadata leader finalizes a level once every node of the cluster
// supports it: by itself by default (featureRound), or when an operator
// asks (FinalizeFeature: `kcoord cluster features --finalize`, as
// kafka-features.sh upgrade) with Config.ManualFeatureFinalize. Then:
//   - each group shard's leader stamps the level into its shard, so the
//     shard's own log and snapshots say which formats its replicas accept;
//   - each node records the level in node.json (version 4, which release
//     0.1.0 refuses), and a later start of a binary that does not support
//     it fails with a message naming both releases (checkStartLevel);
//   - a running node whose replica learns of a level it does not support
//     (a node too old, added to a finalized cluster) stops (Fatal).
//
// A finalized level is never lowered: roll back before finalizing.

// Support is the range of release.Feature levels one node's binary
// supports, and its release ("" for a node that gossips none: release
// 0.1.0, which supports level 1 only).
type Support struct {
	Release  string
	Min, Max release.Level
}

// gossiped is s as nodeMeta carries it.
func (s Support) gossiped() (string, []int16) {
	if s.Release == "" {
		return "", nil
	}
	return s.Release, []int16{int16(s.Min), int16(s.Max)}
}

// supportOf is what a peer's meta says it supports: level 1 alone when it
// says nothing (release 0.1.0).
func supportOf(nm nodeMeta) Support {
	if len(nm.Levels) != 2 || nm.Levels[0] > nm.Levels[1] {
		return Support{Min: release.Level1, Max: release.Level1}
	}
	return Support{Release: nm.Release, Min: release.Level(nm.Levels[0]), Max: release.Level(nm.Levels[1])}
}

// ownSupport is what this node's binary supports: this release's range,
// or level 1 alone for a node playing release 0.1.0 (Config.PlayApplyLevel
// below fsm.FeatureLevelSetType).
func (n *Node) ownSupport() Support {
	if n.applies.own > 0 && n.applies.own < int(fsm.FeatureLevelSetType) {
		return Support{Min: release.Level1, Max: release.Level1}
	}
	return Support{Release: release.Version, Min: release.MinLevel, Max: release.MaxLevel}
}

// featureFSM is what features read of the metadata group's FSM
// (fsm.MetaFSM), stampFSM of a group shard's (fsm.ShardFSM).
type featureFSM interface {
	FinalizedLevel() release.Level
	FeatureLevels() []fsm.FeatureLevel
}

type stampFSM interface {
	StampedLevel() release.Level
}

// FinalizedLevel is the level of release.Feature the cluster finalized, as
// this node's replica of the metadata group has applied it
// (release.Level1 before the shards start, and for an FSM without
// features).
func (n *Node) FinalizedLevel() release.Level {
	if !n.shardsStarted.Load() {
		return release.Level1
	}
	if f, ok := n.meta.FSM.(featureFSM); ok {
		return f.FinalizedLevel()
	}
	return release.Level1
}

// knownFinalized is the highest finalized level this node knows of: its
// replica's, or, before its shards start (or while its replica has not
// caught up), what node.json recorded. It reads atomics only.
func (n *Node) knownFinalized() release.Level {
	return max(release.Level(n.finalized.Load()), n.FinalizedLevel())
}

// WriteLevel is the level whose formats this node writes: the finalized
// level (or this binary's highest with Config.UnsafeIgnoreFeatureLevels,
// the planted bug of the upgrade test).
func (n *Node) WriteLevel() release.Level { return release.Level(n.writeLevel.Load()) }

// ErrFeatureUnsupported is a finalization refused because some node of the
// cluster does not support the level, or a start refused because this
// binary does not support the level its data dir was finalized at.
var ErrFeatureUnsupported = errors.New("cluster: feature level not supported")

// ErrFeatureNotFinalized is a write refused because its command type needs
// a feature level the cluster has not finalized.
var ErrFeatureNotFinalized = errors.New("cluster: feature level not finalized")

// tooOld is the error of a binary that cannot run at finalized level l
// (above the levels it supports, or, for a future release that drops old
// levels, below them): it names the level, the release that introduced it
// and this one.
func tooOld(where string, l release.Level) error {
	need := "the release that finalized it, or a later one"
	if l < release.MinLevel {
		need = "kcoord " + release.ReleaseOf(l) + ", then upgrade through each release in turn"
	}
	return fmt.Errorf("%w: %s is finalized at %s %d (%s); this is kcoord %s, which supports %s %d to %d: run %s",
		ErrFeatureUnsupported, where, release.Feature, l, levelName(l), release.Version, release.Feature,
		release.MinLevel, release.MaxLevel, need)
}

// levelName says which release introduced level l, as far as this binary
// knows.
func levelName(l release.Level) string {
	if l > release.MaxLevel {
		return "a release after kcoord " + release.Version
	}
	return "kcoord " + release.ReleaseOf(l)
}

// checkStartLevel refuses a data dir whose node.json records a finalized
// level this binary does not support. Called by Open.
func checkStartLevel(dataDir string, id identity) error {
	if l := release.Level(id.Features[release.Feature]); l > 0 && !release.Supports(l) {
		return tooOld("the data dir "+dataDir, l)
	}
	return nil
}

// featureNodes are the nodes that must support a level before it is
// finalized: every server of the metadata group's configuration (every
// node replicates it, as a voter or a non-voter), every voter and
// non-voter of every group shard as the leader table has them, every
// active node registered for placement (one that is draining or drained
// is left out once its replicas are gone: a removed node does not hold
// the upgrade back), and every gossip member, fenced ones included (a
// node that joined and is not placed yet).
func (n *Node) featureNodes() ([]int32, error) {
	conf, ok := n.meta.configuration()
	if !ok {
		return nil, errors.New("the metadata group's configuration is unknown")
	}
	var ids []int32
	for _, s := range conf.Servers {
		id, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("server id %q of the metadata group is not a node id", s.ID)
		}
		ids = append(ids, int32(id))
	}
	for shard := range n.cfg.Shards {
		if e, ok := n.leaders.get(shard); ok {
			ids = append(ids, e.Voters...)
			ids = append(ids, e.Nonvoters...)
		}
	}
	if p, ok := n.meta.FSM.(placementFSM); ok {
		for _, nd := range p.Nodes() {
			if nd.State == fsm.NodeActive {
				ids = append(ids, nd.ID)
			}
		}
	}
	ids = append(ids, n.members.ids()...)
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// supportOfNode is what node id supports, and whether it is known: this
// node's own, or what a live peer gossips. A peer that is down (gone from
// gossip, or proven dead) is not known, whatever it said before: it may
// come back on an older binary, so it holds a finalization back until it
// is back or removed.
func (n *Node) supportOfNode(id int32) (Support, bool) {
	if id == n.cfg.NodeID {
		return n.ownSupport(), true
	}
	if n.gossip == nil {
		return Support{}, false
	}
	if _, alive := n.members.broker(id); !alive || n.members.provenDead(id, n.mux.Deaths()) {
		return Support{}, false
	}
	return n.support.get(id)
}

// finalizable is the highest level every node of featureNodes supports,
// and the nodes that hold it back from this binary's highest.
func (n *Node) finalizable() (release.Level, []int32, error) {
	ids, err := n.featureNodes()
	if err != nil {
		return release.Level1, nil, err
	}
	level := release.MaxLevel
	var behind []int32
	for _, id := range ids {
		s, ok := n.supportOfNode(id)
		if !ok {
			s = Support{Min: release.Level1, Max: release.Level1} // not heard from: assume the oldest
		}
		if s.Max < release.MaxLevel {
			behind = append(behind, id)
		}
		level = min(level, s.Max)
	}
	return max(level, release.Level1), behind, nil
}

// FinalizeFeature finalizes level of release.Feature (0: the highest every
// node supports) in the metadata group, from any node (a non-leader
// forwards it), and returns the finalized level. A level at or below the
// finalized one changes nothing; one some node does not support is
// refused with ErrFeatureUnsupported naming the nodes. Called by the
// admin API's handlers and the feature loop; blocks at most timeout.
func (n *Node) FinalizeFeature(ctx context.Context, level release.Level, timeout time.Duration) (release.Level, error) {
	level, err := n.CheckFinalize(level)
	if err != nil || level <= n.FinalizedLevel() {
		return n.FinalizedLevel(), err
	}
	cmd, err := fsm.Encode(&fsm.FeatureLevelSet{Feature: release.Feature, Level: int16(level)})
	if err != nil {
		return n.FinalizedLevel(), err
	}
	if err := n.ApplyMetadataChange(ctx, cmd, timeout); err != nil && !errors.Is(err, fsm.ErrFeatureDowngrade) {
		return n.FinalizedLevel(), err
	}
	return n.FinalizedLevel(), nil
}

// CheckFinalize is FinalizeFeature's check alone, as this node sees the
// cluster (UpdateFeatures' validate-only): it returns the level a
// finalization would write (level, or for 0 the highest every node
// supports), or why it would be refused. It writes nothing and does not
// block.
func (n *Node) CheckFinalize(level release.Level) (release.Level, error) {
	if !n.shardsStarted.Load() {
		return 0, errAdminNotStarted
	}
	fin := n.FinalizedLevel()
	switch {
	case level == 0 && fin >= release.MaxLevel, level != 0 && level == fin:
		return fin, nil // finalized already: nothing to do, whoever is down
	case level != 0 && level < fin:
		return 0, fmt.Errorf("%w: %s is finalized at %d, not lowered to %d", fsm.ErrFeatureDowngrade, release.Feature, fin, level)
	case level > release.MaxLevel:
		return 0, fmt.Errorf("%w: %s %d is newer than this node's kcoord %s supports (up to %d)",
			ErrFeatureUnsupported, release.Feature, level, release.Version, release.MaxLevel)
	}
	top, behind, err := n.finalizable()
	if err != nil {
		return 0, err
	}
	if level == 0 {
		if top <= fin {
			return 0, fmt.Errorf("%w: nothing to finalize: node %v does not support %s %d (a build of kcoord %s or later): upgrade it, or bring it back, first",
				ErrFeatureUnsupported, behind, release.Feature, fin+1, release.ReleaseOf(fin+1))
		}
		level = top
	}
	if level > top {
		return 0, unsupportedBy(level, behind)
	}
	return level, nil
}

// checkFinalizeHere is the metadata leader's own check of a finalization
// before it applies one: every node supports the level (the forwarding
// node checked with its own view of gossip; this is the leader's).
func (n *Node) checkFinalizeHere(c *fsm.FeatureLevelSet) error {
	if c.Feature != release.Feature {
		return nil // the FSM answers it
	}
	top, behind, err := n.finalizable()
	if err != nil {
		return fmt.Errorf("cluster: cannot check a finalization yet: %w", err)
	}
	if release.Level(c.Level) > top {
		return unsupportedBy(release.Level(c.Level), behind)
	}
	return nil
}

// unsupportedBy is the refusal of a finalization of level that the nodes
// behind do not support (or are down).
func unsupportedBy(level release.Level, behind []int32) error {
	return fmt.Errorf("%w: %s %d needs every node to run a build of kcoord %s or later that supports it; node %v does not (or is down)",
		ErrFeatureUnsupported, release.Feature, level, release.ReleaseOf(level), behind)
}

// FeatureStatus is what `kcoord cluster features` shows: the finalized
// levels this node's replica holds, the highest level every node
// supports, and what each node supports.
type FeatureStatus struct {
	// Finalized maps each feature to its finalized level (release.Feature
	// is always there: 1 when never finalized).
	Finalized map[string]int16 `json:"finalized"`
	// Finalizable is the highest release.Feature level every node supports.
	Finalizable int16 `json:"finalizable"`
	// AutoFinalize says whether the cluster finalizes it by itself (this
	// node's setting).
	AutoFinalize bool           `json:"auto_finalize"`
	Nodes        []NodeFeatures `json:"nodes"`
}

// NodeFeatures is one node's support.
type NodeFeatures struct {
	NodeID int32 `json:"node_id"`
	// Release is "" for a node that gossips none (0.1.0), or not heard from.
	Release   string                `json:"release"`
	Supported map[string]LevelRange `json:"supported"`
	// Known is false for a node not heard from over gossip.
	Known bool `json:"known"`
}

// LevelRange is a range of levels, both ends included.
type LevelRange struct {
	Min int16 `json:"min"`
	Max int16 `json:"max"`
}

// Features reports the cluster's feature levels as this node sees them.
// Any goroutine may call it; it does not block.
func (n *Node) Features() (FeatureStatus, error) {
	if !n.shardsStarted.Load() {
		return FeatureStatus{}, errAdminNotStarted
	}
	st := FeatureStatus{Finalized: map[string]int16{release.Feature: int16(n.FinalizedLevel())}, AutoFinalize: !n.cfg.ManualFeatureFinalize}
	if f, ok := n.meta.FSM.(featureFSM); ok {
		for _, fl := range f.FeatureLevels() {
			st.Finalized[fl.Feature] = fl.Level
		}
	}
	top, _, err := n.finalizable()
	if err != nil {
		return st, err
	}
	st.Finalizable = int16(top)
	ids, _ := n.featureNodes()
	for _, id := range ids {
		s, known := n.supportOfNode(id)
		nf := NodeFeatures{NodeID: id, Known: known, Supported: map[string]LevelRange{}}
		if known {
			nf.Release = s.Release
			nf.Supported[release.Feature] = LevelRange{Min: int16(s.Min), Max: int16(s.Max)}
		}
		st.Nodes = append(st.Nodes, nf)
	}
	return st, nil
}

// Fatal is closed with the reason when the node cannot go on: its replica
// of the metadata group holds a finalized level this binary does not
// support, or, holding no Raft state, it opened another shard count than
// the cluster its peers form runs. serve stops the process then.
func (n *Node) Fatal() <-chan struct{} { return n.fatal.done }

// FatalErr is why Fatal was closed (nil while it is not).
func (n *Node) FatalErr() error { return n.fatal.get() }

// fatalState is Node.Fatal's: closed once, with its error.
type fatalState struct {
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	err  error
}

func (f *fatalState) set(err error) {
	f.once.Do(func() {
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
		close(f.done)
	})
}

func (f *fatalState) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// featureInterval is how often the feature loop runs a round.
const featureInterval = time.Second

// featureApplyTimeout bounds one stamp or finalization of a round.
const featureApplyTimeout = 5 * time.Second

// featureLoop runs a feature round every featureInterval, and at once
// when this node's replica of the metadata group changes its finalized
// level (so node.json records a finalization within milliseconds of the
// entry's apply: a start of an older binary in between would replay the
// entry and panic rather than refuse the data dir), until shutdown. Runs
// on its own goroutine.
func (n *Node) featureLoop() {
	t := time.NewTicker(featureInterval)
	defer t.Stop()
	for {
		wake := n.featureWake.wait()
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-wake:
		}
		n.featureRound()
	}
}

// finalizedNotifier is the metadata FSM's change notice (fsm.MetaFSM).
type finalizedNotifier interface {
	OnFinalized(fn func())
}

// featureRound keeps this node in step with the finalized level: it stops
// a node too old for it, records it in node.json, sets what this node
// writes, stamps it into the group shards this node leads and, on the
// metadata leader with auto-finalize, finalizes the highest level every
// node supports. Runs on the feature loop.
func (n *Node) featureRound() {
	if n.closed.Load() || n.disk.fenced() {
		return
	}
	fin := n.FinalizedLevel()
	// Recorded first, even a level this binary does not support: the
	// next start of this binary then refuses the data dir at once.
	if err := n.recordFinalized(fin); err != nil {
		n.logger.Warn("could not record the finalized feature level in node.json; the next round tries again", "level", fin, "error", err)
	}
	if !release.Supports(fin) {
		err := tooOld("the cluster", fin)
		n.logger.Error("stopping: this node is too old for the cluster's finalized feature level", "error", err)
		n.fatal.set(err)
		return
	}
	n.writeLevel.Store(int32(n.writeLevelFor(fin)))
	n.stampShards()
	if n.cfg.ManualFeatureFinalize || fin >= n.ownSupport().Max || !n.meta.IsLeader() {
		return // nothing this node could finalize
	}
	top, _, err := n.finalizable()
	if err != nil || top <= fin {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), featureApplyTimeout)
	defer cancel()
	got, err := n.FinalizeFeature(ctx, top, featureApplyTimeout)
	if err != nil {
		n.logger.Warn("could not finalize the feature level every node supports", "feature", release.Feature, "level", top, "error", err)
		return
	}
	n.logger.Info("finalized a feature level: every node supports it", "feature", release.Feature, "level", got, "release", release.ReleaseOf(got))
}

// writeLevelFor is the level this node writes at when fin is finalized.
func (n *Node) writeLevelFor(fin release.Level) release.Level {
	if n.cfg.UnsafeIgnoreFeatureLevels {
		return n.ownSupport().Max
	}
	return fin
}

// recordFinalized writes fin into node.json once it is above level 1 (a
// node.json of version 4: see identityVersionFeatures).
func (n *Node) recordFinalized(fin release.Level) error {
	if fin <= release.Level1 {
		return nil
	}
	n.idMu.Lock()
	defer n.idMu.Unlock()
	if release.Level(n.onDisk.Features[release.Feature]) >= fin || n.onDisk.equal(identity{}) {
		return nil
	}
	was := n.ident.Features
	features := maps.Clone(was)
	if features == nil {
		features = map[string]int16{}
	}
	features[release.Feature] = int16(fin)
	n.ident.Features = features
	if err := n.persistIdentityLocked(); err != nil {
		n.ident.Features = was // the next round tries again
		return err
	}
	n.logger.Info("recorded the finalized feature level in node.json: earlier releases refuse this data dir from now on",
		"feature", release.Feature, "level", fin, "release", release.ReleaseOf(fin))
	return nil
}

// stampShards stamps the write level into every group shard this node
// leads that holds a lower one, one at a time. Runs on the feature loop.
func (n *Node) stampShards() {
	level := n.WriteLevel()
	if level <= release.Level1 {
		return
	}
	for _, s := range n.shards {
		f, ok := s.FSM.(stampFSM)
		if !ok || !s.IsLeader() || f.StampedLevel() >= level {
			continue
		}
		cmd, err := fsm.Encode(&fsm.FeatureLevelSet{Feature: release.Feature, Level: int16(level)})
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), featureApplyTimeout)
		_, err = s.Apply(ctx, cmd, featureApplyTimeout)
		cancel()
		if err != nil {
			n.logger.Debug("stamping the feature level into a shard failed; the next round retries", "shard", s.ID, "level", level, "error", err)
			continue
		}
		n.logger.Debug("stamped the feature level into a shard", "shard", s.ID, "level", level)
	}
}

// checkWriteLevel refuses a command whose type needs a level above what
// this node writes. The metadata group's FeatureLevelSet is what
// finalizes a level: checkFinalizeHere checks it instead.
func checkWriteLevel(shard int32, cmd []byte, writeLevel release.Level) error {
	if len(cmd) == 0 {
		return nil
	}
	typ := fsm.CommandType(cmd[0])
	need := typ.Level()
	if need <= writeLevel || (shard == MetaShard && typ == fsm.FeatureLevelSetType) {
		return nil
	}
	return fmt.Errorf("%w: %s needs %s %d, the cluster is finalized at %d", ErrFeatureNotFinalized, typ, release.Feature, need, cmp.Or(writeLevel, release.Level1))
}
