package nodestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// Before the write-ahead log, a node kept every shard's log in one bolt
// file, DataDir/raft.db: shard s's log in bucket "logs/<s>" (keys the
// big-endian index, values the entry encoding of encoding.go) and its
// stable store in "stable/<s>", with s in decimal (MetaShard -1 is
// "logs/-1"). testdata/v1.db is one. Open imports such a file
// (Options.Import) into a new log, once.

// restartImport deletes the segments of an import that a crash
// interrupted: while the bolt file exists, the log holds nothing but what
// was copied from it, because the file is removed before Open returns.
// Called by Open before load.
func restartImport(dir, legacy string) (bool, error) {
	if _, err := os.Stat(legacy); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("nodestore: %w", err)
	}
	seqs, err := listSegments(dir)
	if err != nil {
		return false, fmt.Errorf("nodestore: %w", err)
	}
	for _, seq := range seqs {
		if err := os.Remove(filepath.Join(dir, segmentName(seq))); err != nil {
			return false, fmt.Errorf("nodestore: %w", err)
		}
	}
	return true, nil
}

// importLegacy copies every shard of the bolt file at path into s, through
// the ShardStore API, and removes the file once the copy is durable.
// Called by Open once the committer runs, on a log restartImport emptied.
func (s *Store) importLegacy(path string) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: s.opts.Timeout, ReadOnly: true})
	if errors.Is(err, bbolt.ErrTimeout) {
		return fmt.Errorf("%w: %s (is another node using this data dir?)", ErrLocked, path)
	}
	if err != nil {
		return fmt.Errorf("nodestore: import %s: %w", path, err)
	}
	shards, entries := 0, 0
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			kind, idText, ok := strings.Cut(string(name), "/")
			id, err := strconv.ParseInt(idText, 10, 32)
			if !ok || err != nil || (kind != "logs" && kind != "stable") {
				return fmt.Errorf("%w: %s: bucket %q", ErrCorrupt, path, name)
			}
			ss, err := s.Shard(int32(id))
			if err != nil {
				return err
			}
			if kind == "stable" {
				return b.ForEach(ss.Set)
			}
			shards++
			n, err := importLog(ss, b)
			entries += n
			return err
		})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("nodestore: import %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("nodestore: import %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("nodestore: import %s: %w", path, err)
	}
	s.logger.Info("imported the bolt log store of an earlier version", "file", path, "shards", shards, "entries", entries)
	return nil
}

// importLog copies the last run of consecutive indexes of a bolt log
// bucket into ss, in batches. Entries before a gap are older than a
// snapshot Raft restored (it left the gap), and never read again.
func importLog(ss *ShardStore, b *bbolt.Bucket) (int, error) {
	c := b.Cursor()
	k, _ := c.Last()
	if k == nil {
		return 0, nil
	}
	first := binary.BigEndian.Uint64(k)
	for k, _ = c.Prev(); k != nil && binary.BigEndian.Uint64(k) == first-1; k, _ = c.Prev() {
		first--
	}
	const chunk = 1024
	var logs []*raft.Log
	n := 0
	for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, first)); ; k, v = c.Next() {
		if k != nil {
			l := new(raft.Log)
			if err := decodeLog(v, l); err != nil {
				return n, err
			}
			logs = append(logs, l)
		}
		if len(logs) == chunk || (k == nil && len(logs) > 0) {
			if err := ss.StoreLogs(logs); err != nil {
				return n, err
			}
			n += len(logs)
			logs = logs[:0]
		}
		if k == nil {
			return n, nil
		}
	}
}
