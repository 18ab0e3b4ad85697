package nodestore

import (
	"fmt"

	"github.com/kcoord/kcoord/release"
)

// Formats lists the node store's format: the encoding of a log entry in a
// WAL segment, as this build reads and writes it.
func Formats() []release.Format {
	return []release.Format{{Name: "WAL entries", Reads: fmt.Sprintf("version %d", logEncodingVersion), Writes: fmt.Sprintf("version %d", logEncodingVersion)}}
}
