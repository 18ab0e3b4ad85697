package fsm

import (
	"fmt"

	"github.com/kcoord/kcoord/release"
)

// Formats lists the formats of the FSM package: log entries (command types
// and body versions) and snapshots, as this build reads and writes them.
func Formats() []release.Format {
	return []release.Format{
		{Name: "raft command types", Reads: fmt.Sprintf("1-%d", LatestCommandType),
			Writes: fmt.Sprintf("1-%d; %d (%s) once %s %d is finalized", FeatureLevelSetType-1, FeatureLevelSetType, FeatureLevelSetType, release.Feature, FeatureLevelSetType.Level())},
		{Name: "raft command bodies", Reads: fmt.Sprintf("versions %d-%d", bodyVersionJSON, bodyVersion), Writes: fmt.Sprintf("version %d (msgpack)", bodyVersion)},
		{Name: "FSM snapshots", Reads: fmt.Sprintf("versions %d-%d", snapshotVersionJSON, snapshotVersionPacked),
			Writes: fmt.Sprintf("version %d (msgpack); field features once %s %d is finalized; a group shard's, version %d (packed) once %s %d is",
				snapshotVersion, release.Feature, release.Level2, snapshotVersionPacked, release.Feature, release.Level3)},
	}
}
