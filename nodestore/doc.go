// Package nodestore keeps the Raft log and stable store of every shard of a
// kcoord node in one bolt (go.etcd.io/bbolt) file, with group commit: writes
// that arrive together from different shards share one transaction and one
// fsync. It plays the part raft-boltdb plays for a single Raft group, for
// many groups at once.
//
// A Store is the file; Store.Shard gives one shard's view of it, a
// ShardStore, which implements raft.LogStore and raft.StableStore. Put a
// raft.LogCache in front of it, as in front of raft-boltdb.
//
// # Transactions and fsync
//
// Every write (StoreLog, StoreLogs, DeleteRange, Set, SetUint64, and the
// bucket creation in Store.Shard) is one unit: it is applied completely or
// not at all, never partially, and readers never see part of it.
//
//   - When a write returns nil, the bolt transaction holding it has
//     committed: its pages and then its meta page were written and each
//     fdatasync'd. The write survives a crash or power loss from then on.
//     This holds for StoreLogs (all of its entries), SetUint64 and Set (the
//     term and vote Raft must not forget) and DeleteRange alike.
//   - When a write returns an error, it may or may not have reached the disk
//     (an fsync can fail after the data was handed to the kernel). Every
//     write is idempotent (puts of fixed values, deletes of a range), so
//     repeating it is safe. Raft treats the error as a failed write.
//   - One write may share its transaction with other writes, of its own
//     shard or others, and its success never depends on theirs: a
//     transaction that fails is rolled back and each of its writes is
//     committed again on its own, and gets its own result.
//
// # Group commit
//
// One committer goroutine runs every write transaction (bolt allows one at
// a time anyway). It has no timer: it takes the first queued write and
// whatever else is queued at that moment (at most 256) and commits them
// together. Writes that arrive while a transaction commits form the next
// one, so batches grow with the load by themselves: with N shards each
// writing in a loop, the writers answered by one commit queue up during
// the next, and a commit holds about N/2 writes. A lone writer waits for no
// one, only for its own commit and, at worst, the one in progress when it
// arrived. See Store.commitLoop and Store.commit.
//
// Because a transaction holds writes of several callers, a write's apply
// function must not assume the pages it reads are untouched in the
// transaction: an earlier write may have modified them. DeleteRange is the
// case that matters (see its doc).
//
// # Ordering
//
// Writes are applied in the order they reach the committer's queue.
// Within a shard, a write issued after another returned is ordered after it
// (raft's own sequences, such as a follower's DeleteRange of a conflicting
// suffix and then StoreLogs, keep their order). Writes issued concurrently,
// such as the snapshot goroutine's compaction (DeleteRange of the oldest
// entries) and the main goroutine's appends, have no order between them;
// Raft only issues such writes where the order does not matter (disjoint
// index ranges, or deletions). Between shards
// there is no ordering beyond this, and no shard's write waits for another
// shard's write to be issued: it waits at most for the transaction being
// committed when it arrived, then for its own.
//
// Reads (FirstIndex, LastIndex, GetLog, Get, GetUint64) run in their own
// bolt read transactions on the caller's goroutine, concurrently with each
// other and with the committer. They see every write that has returned.
// They may briefly wait while a commit grows and remaps the file.
//
// # Goroutines
//
// Raft's goroutines of every shard (the main loop, the snapshot goroutine,
// replication) call a ShardStore concurrently. A write blocks its caller
// until it is durable (or failed); a read blocks for one bolt read
// transaction. One committer goroutine per Store, started by Open and ended
// by Close, runs every write transaction. Close must come after every Raft
// using the store has shut down: writes after Close fail with ErrClosed,
// and Raft panics when it cannot store its term.
//
// # On disk
//
// Shard id s keeps its log in bucket "logs/<s>" (keys are big-endian
// uint64 indexes, values the entry encoding of encoding.go, version 1) and
// its stable store in bucket "stable/<s>", with s in decimal (MetaShard -1
// is "logs/-1"). Files written by kcoord's earlier cluster.NodeStore have
// this layout (testdata/v1.db is one).
package nodestore
