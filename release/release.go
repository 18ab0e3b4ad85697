package release

import (
	"fmt"
	"runtime/debug"
)

// Version is this release. It changes in one place: here, with a section
// of CHANGELOG.md and, when the release adds a feature level, a row in
// levels.
const Version = "0.2.0"

// Feature is the name of kcoord's one feature, as Kafka names
// metadata.version.
const Feature = "kcoord.version"

// Level is a level of Feature.
type Level int16

// The levels this release knows, oldest first.
const (
	// Level1 is 0.1.0 (commit 6c692b4), the first release people run:
	// command types 1..15, body and snapshot versions 2, node.json 3.
	// A cluster that never finalized anything is at level 1.
	Level1 Level = 1
	// Level2 is 0.2.0: command type 16 (FeatureLevelSet), which stamps
	// the finalized level into the metadata group and into every group
	// shard, and node.json version 4, which records it (and which 0.1.0
	// refuses).
	Level2 Level = 2
	// Level3 is also 0.2.0, a later step of it (as Kafka's
	// metadata.version has several per release): group shards write
	// packed snapshots (snapshot version 3; issue 36), which earlier
	// builds of 0.2.0 and 0.1.0 cannot read.
	Level3 Level = 3
)

// MinLevel and MaxLevel are the levels this binary supports: it runs in a
// cluster finalized at any level between them, and writes what each
// allows.
const (
	MinLevel = Level1
	MaxLevel = Level3
)

// levels names the release that introduced each level.
var levels = map[Level]string{
	Level1: "0.1.0",
	Level2: "0.2.0",
	Level3: "0.2.0",
}

// ReleaseOf names the release that introduced level l: "0.1.0", or, for
// a level newer than this binary knows, "a release after " + Version.
func ReleaseOf(l Level) string {
	if r, ok := levels[l]; ok {
		return r
	}
	if l > MaxLevel {
		return "a release after " + Version
	}
	return fmt.Sprintf("no release (level %d)", l)
}

// Supports reports whether this binary can run at finalized level l.
func Supports(l Level) bool { return l >= MinLevel && l <= MaxLevel }

// commit is set by the build (-ldflags "-X ...release.commit=...") when
// the binary is built outside a git checkout; Commit falls back to the
// revision Go stamped into the binary.
var commit string

// Commit is the git revision the binary was built from (12 hex digits,
// with "-dirty" for uncommitted changes), or "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// Format is one persisted or wire format as `kcoord version` lists it:
// the versions this binary reads and those it writes (docs/compatibility.md
// says what each means).
type Format struct {
	Name   string `json:"name"`
	Reads  string `json:"reads"`
	Writes string `json:"writes"`
}
