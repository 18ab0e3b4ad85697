// Package fsm holds kcoord's replicated state and the Raft commands that
// change it: ShardFSM (one group shard's groups and committed offsets) and
// MetaFSM (the metadata group's: topics, cluster id, placement, SCRAM
// credentials and ACLs), both raft.FSM.
//
// # Goroutines
//
// Raft's FSM goroutine calls Apply, Snapshot and Restore. Raft runs
// FSMSnapshot.Persist and Release on a goroutine of its own, concurrently
// with later Applies: Snapshot copies the state (sharing stored values,
// which Apply never modifies in place) and Persist encodes the copy. Any
// goroutine may call the readers (Group, Offsets, Topic, ClusterID, ...);
// they take a read lock and return copies.
//
// # Log entries
//
// An entry is one CommandType byte (explicit numbers, append only), one
// body-version byte, then the body. Body version 2, written by this build,
// is msgpack (hashicorp/go-msgpack, the handle in codec.go): structs as maps
// keyed by the names in their codec tags, strings as msgpack str holding the
// exact bytes they were given (no UTF-8 validation or replacement), []byte
// as bin, map keys sorted so one value has one encoding. Body version 1 was
// JSON (the json tags); Decode still reads it, so a log written before
// msgpack replays. JSON replaced invalid UTF-8 with U+FFFD before such an
// entry reached the log, so replaying it gives the replaced strings, exactly
// the state every replica applied then.
//
// Apply decodes with Decode and panics on an entry it cannot decode: an
// unknown type or a newer body version means a newer kcoord wrote the log,
// and applying around it would diverge. Business outcomes (ErrGroupNotEmpty,
// ErrClusterIDMismatch, ...) are Apply's response, never panics, and so is
// a command of the other FSM's log (ErrForeignCommand: it decodes, so every
// replica refuses it alike). Apply reads no clock: the leader stamps times
// into commands.
//
// # Snapshots
//
// A snapshot is one version byte, then a document: version 2 is one msgpack
// value streamed into the sink (sorted, so equal states write equal bytes);
// version 1 was JSON, and Restore still reads it. testdata/v1 holds entries
// and snapshots written by the JSON release.
package fsm
