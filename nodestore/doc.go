// Package nodestore keeps the Raft log and stable store of every shard of a
// kcoord node in one write-ahead log, with group commit: writes that arrive
// together from different shards share one write(2) and one fdatasync. It
// plays the part raft-boltdb or raft-wal play for a single Raft group, for
// many groups at once.
//
// A Store is the log's directory; Store.Shard gives one shard's view of it,
// a ShardStore, which implements raft.LogStore, raft.StableStore and
// raft.MonotonicLogStore. Put a raft.LogCache in front of it.
//
// # Why not bolt
//
// Until this engine the node kept its shards in one bolt file (legacy.go
// imports such a file). A bolt commit rewrites the B+tree pages it touched,
// a leaf and its branches per shard, and then its meta page, with an
// fdatasync after each: under 64 committing clients a commit of ten
// shards' writes took 2.5 ms and a third of the node's CPU. Here the same
// commit is one sequential append of the records and one fdatasync.
//
// # Durability
//
// Every write (StoreLogs, DeleteRange, Set, SetUint64) is one record: it
// is applied completely or not at all, and readers never see part of it.
//
//   - When a write returns nil, its record was written and fdatasync'd: it
//     survives a crash or power loss from then on.
//   - A write that does not fit the log's shape is refused with
//     ErrNonSequential before anything is written (see StoreLogs,
//     DeleteRange), and the rest of its batch goes on.
//   - When writing or syncing a segment fails, the batch fails, and so does
//     every later write (ErrFailed): after a failed fsync the kernel may
//     have dropped the dirty pages, so what is on disk is unknown until the
//     store is opened again and replays it.
//
// # Group commit
//
// One committer goroutine runs every write. It has no timer: it takes the
// first queued write and whatever else is queued at that moment (at most
// 256), frames them into one buffer, appends it to the active segment and
// fdatasyncs once. Writes that arrive meanwhile form the next batch, so
// batches grow with the load by themselves, and a lone writer waits for no
// one, only for its own commit and, at worst, the one in progress when it
// arrived. See Store.commitLoop and Store.commit. Only once a batch is
// durable does the committer publish it to the in-memory indexes, which
// is when readers see it.
//
// # Ordering
//
// Writes are applied in the order they reach the committer's queue.
// Within a shard, a write issued after another returned is ordered after
// it (raft's own sequences, such as a follower's DeleteRange of a
// conflicting suffix and then StoreLogs, keep their order). Writes issued
// concurrently, such as the snapshot goroutine's compaction and the main
// goroutine's appends, have no order between them; Raft only issues such
// writes where the order does not matter. A shard's write never waits for
// another shard's write to be issued.
//
// # Reads and memory
//
// The store keeps, per shard, where each entry is on disk (16 bytes an
// entry) and the stable values. FirstIndex, LastIndex, Get and GetUint64
// answer from memory; GetLog reads one entry with one pread, usually from
// the page cache. Reads run on the caller's goroutine, concurrently with
// each other and with the committer.
//
// # On disk
//
// The directory holds LOCK (an flock held while the store is open) and
// segment files, 00000001.wal, 00000002.wal, ... (segment.go has the
// record format). The committer appends to the last; when a batch would
// take it past Options.SegmentSize it starts the next, which begins with
// every shard's stable values. Open replays the segments in order; a record
// a crash cut short at the end of the last segment was never acknowledged
// and is cut off, anything else unreadable is ErrCorrupt.
//
// The committer keeps the active segment written with zeros a little
// ahead of its last commit (1 MiB, never past the segment size; see
// Store.zeroAhead), so a commit is a write over blocks the file already
// has and its fdatasync flushes only the data, not a new file size to the
// journal. Zeros after the last commit of a segment are that room, and
// Open treats them as the segment's end.
//
// Space is reclaimed a segment at a time, oldest first: once no live entry
// remains in the oldest segment (Raft compacted them all, see
// Store.collect), the file is removed. A shard that writes rarely would
// keep old segments alive for ever, so once the segments hold more than
// twice the live entries plus two segments, the live entries of the oldest
// are copied forward (Store.relocate).
//
// # Health and faults
//
// Busy says how long the committer has been in its current batch and
// Failed returns the sticky failure, both from atomics, so a watchdog on
// another goroutine sees a disk that stopped answering without waiting
// for it (the cluster's disk fence does). Options.ObserveSync is told each
// commit's write and fdatasync time, Options.OnFail of the failure.
// Faults (faults.go) stall, slow or fail the committer's writes and
// fsyncs, for tests of what sits above the store.
//
// # Goroutines
//
// Raft's goroutines of every shard (the main loop, the snapshot goroutine,
// replication) call a ShardStore concurrently. A write blocks its caller
// until it is durable (or failed); a read blocks for at most one pread.
// One committer goroutine per Store, started by Open and ended by Close,
// runs every write. Close must come after every Raft using the store has
// shut down: writes after Close fail with ErrClosed, and Raft panics when
// it cannot store its term.
//
// # Files
//
// The API:
//
//   - store.go: Store, Options, Open and Close, the committer goroutine
//     (commitLoop, commit, frame, append, publish), segment rotation and
//     reclaiming (rotate, collect, relocate), and Busy, Failed and Stats.
//     Every unexported method marked "Committer only" runs on the
//     committer goroutine.
//   - shard.go: ShardStore, one shard's raft.LogStore and
//     raft.StableStore, called by that shard's Raft goroutines; its writes
//     queue to the committer and block until durable, its reads answer from
//     the index and one pread.
//   - errors.go: the sentinel errors (ErrClosed, ErrKeyNotFound, ErrLocked,
//     ErrCorrupt, ErrNonSequential, ErrFailed).
//   - faults.go: Faults, the store's disk fault hooks for tests; the
//     committer passes them before each write and fsync.
//   - formats.go: Formats, the log entry encoding this build reads and
//     writes, for `kcoord version`.
//
// On disk and in memory:
//
//   - segment.go: the segment files and the record and commit format, with
//     the scanner replay reads them with.
//   - encoding.go: the encoding of one raft.Log inside a kindLogs record
//     (logEncodingVersion).
//   - index.go: shardIndex, a shard's in-memory index (where each entry is,
//     its stable values); only the committer changes it, under Store.mu.
//   - replay.go: Store.load, run by Open before the committer starts:
//     rebuilds every shard's index from the segments (replayLog, each
//     shard's entries so far, one buffer reused for every segment) and
//     cuts a torn tail.
//   - legacy.go: the import of a node's bolt file (the store before this
//     engine), run by Open when Options.Import names one.
package nodestore
