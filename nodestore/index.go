package nodestore

// loc is where one stored entry's bytes are: n bytes at offset off of
// segment seq.
type loc struct {
	off int64
	seq uint32
	n   uint32
}

// shardIndex is what the store knows of one shard in memory: where each of
// its log entries is on disk, and its stable values. Entries are
// contiguous: locs[i] holds index first+i.
//
// Only the committer goroutine changes a shardIndex, holding Store.mu for
// writing; it reads its fields without the lock. Every other goroutine
// reads under Store.mu held for reading.
type shardIndex struct {
	id     int32
	first  uint64 // the index of locs[0]; meaningless when locs is empty
	locs   []loc
	stable map[string][]byte
}

func newShardIndex(id int32) *shardIndex {
	return &shardIndex{id: id, stable: map[string][]byte{}}
}

// bounds returns the first and last stored index, 0 and 0 when the log is
// empty (raft.LogStore's convention).
func (x *shardIndex) bounds() (first, last uint64) {
	if len(x.locs) == 0 {
		return 0, 0
	}
	return x.first, x.first + uint64(len(x.locs)) - 1
}

// span is a shard's log bounds as the committer validates a batch: the
// bounds after every write accepted so far, durable or not.
type span struct{ first, last uint64 }

func (sp span) empty() bool { return sp.last == 0 }
