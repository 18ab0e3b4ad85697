// Package faultfs is a FUSE file system that passes every call through to
// a backing directory (go-fuse's loopback) and can make the disk under it
// misbehave the ways real disks do, for the chaos suite's disk nemeses:
//
//   - Stall: every write, fsync and change of the namespace blocks until
//     resumed, as a dying device or a throttled volume does; reads still
//     answer. The process using it stays alive with its sockets open.
//   - SlowSyncs: every fsync takes longer.
//   - FailSyncs: fsync answers EIO.
//   - Full: writes and creates answer ENOSPC.
//   - PowerLoss: every write not yet fsynced is undone, as when power
//     fails under a disk cache, in the spirit of Jepsen's LazyFS.
//
// # Power loss
//
// Writes reach the backing file at once, so reads are plain; each write
// first records what it overwrites (the old bytes, and the file's size
// at its last fsync) in an undo log per inode. An fsync of the inode
// clears its log. PowerLoss, called once every process using the mount
// is dead, applies the logs backwards: the bytes written since each
// file's last fsync are gone, a file grown since is cut back, and a file
// never fsynced is empty. The namespace (creates, renames, unlinks) is
// kept, as LazyFS keeps it by default: a node.json renamed into place
// without an fsync of its contents is empty after a power loss, which is
// the mistake this catches.
//
// Files are opened with FOPEN_DIRECT_IO and attributes are not cached, so
// what the kernel serves after a power loss is what the backing files
// hold.
//
// # Files
//
//   - faultfs.go: FS, Mount and Unmount, the fault switches (Stall,
//     SlowSyncs, FailSyncs, Full, Heal, PowerLoss), the gates every write
//     and fsync passes (beforeWrite, beforeSync) and the per-inode undo
//     logs PowerLoss applies.
//   - node.go: the loopback inode (node) and open file (handle) that route
//     go-fuse's calls through those gates and record each write's undo
//     before it reaches the backing file.
//
// # Goroutines
//
// go-fuse serves each request on a goroutine of its own, so a stalled
// write parks only its caller. The fault methods are safe for concurrent
// use and take effect from the next request.
package faultfs
