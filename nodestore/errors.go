package nodestore

import "errors"

// Sentinel errors of package nodestore. Compare with errors.Is: most are
// returned wrapped with details. raft.ErrLogNotFound is returned as is by
// GetLog for a missing index, as raft expects.
var (
	// ErrClosed is returned by every ShardStore method and by Store.Shard
	// after Store.Close, and by writes still queued when Close ran.
	ErrClosed = errors.New("nodestore: store is closed")

	// ErrKeyNotFound is returned by ShardStore.Get and GetUint64 for a key
	// that was never set. Its text is exactly "not found", without the
	// package prefix, because raft recognises a missing term or vote by
	// err.Error() == "not found" (as raft-boltdb's ErrKeyNotFound).
	ErrKeyNotFound = errors.New("not found")

	// ErrLocked is returned by Open when another process holds the
	// directory's lock (or, importing, the bolt file's) for longer than
	// Options.Timeout: most likely a second node on the same data dir.
	ErrLocked = errors.New("nodestore: file is locked by another process")

	// ErrCorrupt is returned for stored bytes this package cannot decode: a
	// record that fails its checksum before the end of the log, a log
	// entry of an unknown encoding version or length, a shard log with a
	// hole, or a stable uint64 that is not 8 bytes.
	ErrCorrupt = errors.New("nodestore: corrupt store")

	// ErrNonSequential is returned by StoreLogs for entries that do not
	// follow the last stored index, and by DeleteRange for a range
	// strictly inside the log. Raft does neither (see IsMonotonic).
	ErrNonSequential = errors.New("nodestore: entries out of sequence")

	// ErrFailed is returned by every write after a write to or fsync of
	// the log failed: what reached the disk is then unknown (an fsync
	// error may drop dirty pages), so the store takes no more writes until
	// it is opened again, which replays what is on disk.
	ErrFailed = errors.New("nodestore: log write failed")
)
