package fsm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kcoord/kcoord/release"
)

// FeatureLevelSet is the body of FeatureLevelSetType: Feature is finalized
// at Level. The metadata group applies it when the cluster finalizes a
// level (cluster/features.go); a group shard applies it as the stamp its
// leader writes once it learns of the finalized level, so that the shard's
// own log and snapshots say which formats its replicas accept.
type FeatureLevelSet struct {
	Feature string `codec:"feature"`
	Level   int16  `codec:"level"`
}

// CommandType implements Command.
func (FeatureLevelSet) CommandType() CommandType { return FeatureLevelSetType }

// FeatureLevel is one finalized level, as FSMs report and snapshot them.
type FeatureLevel struct {
	Feature string `codec:"feature" json:"feature"`
	Level   int16  `codec:"level" json:"level"`
}

// Level is the release.Feature level from which a replica may be sent a
// command of type t: 1 for the types release 0.1.0 applies, 2 for
// FeatureLevelSet. A writer checks it against the finalized level before
// it writes (cluster's Shard.Apply); the metadata group's FeatureLevelSet,
// which is what finalizes a level, is checked against every node's
// support instead. A type this build does not know is not one it writes,
// and is not gated (1).
func (t CommandType) Level() release.Level {
	if t == FeatureLevelSetType {
		return release.Level2
	}
	return release.Level1
}

// featureLevels is the finalized levels an FSM holds, sorted by feature
// name; a feature it does not hold was never finalized. The owning FSM's
// lock guards it; Apply is deterministic.
type featureLevels []FeatureLevel

// apply applies c and returns Apply's response: a level is raised, kept
// when equal, and never lowered.
func (fl *featureLevels) apply(c *FeatureLevelSet) any {
	if strings.TrimSpace(c.Feature) == "" || c.Level < 1 {
		return fmt.Errorf("%w: %q at %d", ErrInvalidFeatureLevel, c.Feature, c.Level)
	}
	i, found := slices.BinarySearchFunc(*fl, c.Feature, func(f FeatureLevel, name string) int { return strings.Compare(f.Feature, name) })
	switch {
	case !found:
		*fl = slices.Insert(*fl, i, FeatureLevel{Feature: c.Feature, Level: c.Level})
	case c.Level < (*fl)[i].Level:
		return fmt.Errorf("%w: %s is finalized at %d, not lowered to %d", ErrFeatureDowngrade, c.Feature, (*fl)[i].Level, c.Level)
	default:
		(*fl)[i].Level = c.Level
	}
	return nil
}

// level is feature's finalized level, 0 when it was never finalized.
func (fl featureLevels) level(feature string) int16 {
	i, found := slices.BinarySearchFunc(fl, feature, func(f FeatureLevel, name string) int { return strings.Compare(f.Feature, name) })
	if !found {
		return 0
	}
	return fl[i].Level
}

// restore replaces the levels with a snapshot's, which a release before
// features leaves empty.
func (fl *featureLevels) restore(s []FeatureLevel) {
	out := slices.Clone(s)
	slices.SortFunc(out, func(a, b FeatureLevel) int { return strings.Compare(a.Feature, b.Feature) })
	*fl = out
}

// KcoordVersion is the level of release.Feature that levels say is
// finalized: release.Level1 when it was never finalized (every cluster
// starts there).
func kcoordVersion(fl featureLevels) release.Level {
	if l := release.Level(fl.level(release.Feature)); l > release.Level1 {
		return l
	}
	return release.Level1
}

// FinalizedLevel is the cluster's finalized level of release.Feature as
// this replica of the metadata group has applied it (release.Level1 until
// a level is finalized). Any goroutine may call it.
// It reads an atomic: memberlist's delegates call it with their lock held.
func (f *MetaFSM) FinalizedLevel() release.Level {
	if l := release.Level(f.finalized.Load()); l > release.Level1 {
		return l
	}
	return release.Level1
}

// OnFinalized registers fn to be told when this replica's finalized level
// changes (a FeatureLevelSet applied, a snapshot restored), so the node
// records it at once rather than at its next poll. Raft's FSM goroutine
// calls fn: it must not block. Call it before the FSM applies anything.
func (f *MetaFSM) OnFinalized(fn func()) { f.onFinalized = fn }

// FeatureLevels returns every finalized level this replica holds, sorted
// by feature.
func (f *MetaFSM) FeatureLevels() []FeatureLevel {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.features)
}

// StampedLevel is the level of release.Feature stamped into this shard
// (release.Level1 until its leader stamps a finalized level). Any
// goroutine may call it.
func (f *ShardFSM) StampedLevel() release.Level {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return kcoordVersion(f.features)
}
