package raftnet

// Stream ids. Every connection through a Mux names, in its header, the
// stream it belongs to (bytes 2-5, int32 big endian: see mux.go). A group
// shard's Raft uses its shard id, 0 and up; the ids below zero are
// reserved, one per stream that is not a group shard's Raft. They are on
// the wire between nodes of different releases during a rolling upgrade:
// an id never changes meaning, and a new stream takes a new id. A node
// without a layer for an id closes the connection on accept, which is how
// a peer of an older release answers a stream it does not know (the hubs
// then fall back to each shard's own stream).
const (
	// MetaShard is the metadata Raft group's stream (topic registry,
	// users, ACLs, placement), and its shard id everywhere.
	MetaShard int32 = -1
	// AdminStream carries node-to-node admin calls (package cluster,
	// admin.go): forwarded metadata changes and removals, status and
	// read-index questions, one JSON call per connection.
	AdminStream int32 = -2
	// BeatStream carries coalesced heartbeats (beatHub, beathub.go).
	// Like every stream, it shares the Raft port, its cluster-id check
	// and its fault hooks.
	BeatStream int32 = -3
	// AppendStream carries every shard's AppendEntries to a peer
	// (appendHub, appendhub.go).
	AppendStream int32 = -4
)
