package cluster

import (
	"fmt"

	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/nodestore"
	"github.com/kcoord/kcoord/release"
)

// Formats lists every persisted and wire format a node reads and writes,
// for `kcoord version`: node.json, the WAL, the FSM's log entries and
// snapshots, the Raft mux header, gossip meta and the admin stream.
// docs/compatibility.md is the contract behind each line.
func Formats() []release.Format {
	out := []release.Format{{Name: "node.json", Reads: fmt.Sprintf("versions 1-%d", identityVersionFeatures),
		Writes: fmt.Sprintf("version %d; %d once %s %d is finalized", identityVersion, identityVersionFeatures, release.Feature, release.Level2)}}
	out = append(out, nodestore.Formats()...)
	out = append(out, fsm.Formats()...)
	out = append(out, raftnet.Formats()...)
	return append(out,
		release.Format{Name: "gossip meta", Reads: fmt.Sprintf("versions 1-%d, unknown fields ignored", metaVersion), Writes: fmt.Sprintf("version %d", metaVersion)},
		release.Format{Name: "admin stream ops", Reads: "remove-node, replicas, topic-change, meta-index, meta-read-index, meta-wait, inspect",
			Writes: "the same; falls back to meta-index for a node of 0.1.0"},
	)
}
