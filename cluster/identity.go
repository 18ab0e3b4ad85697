package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// identityFile, in DataDir, records the node id and shard count the data dir
// was initialised with. Its presence also means the node has started before,
// so it never bootstraps again.
const identityFile = "node.json"

type identity struct {
	Version int   `json:"version"`
	NodeID  int32 `json:"node_id"`
	Shards  int32 `json:"shards"`
	// LogStore is LogStoreNode or LogStoreShard; empty (written before the
	// choice existed) means LogStoreShard.
	LogStore string `json:"log_store,omitempty"`
}

// readIdentity returns the identity recorded in dataDir, and whether there was
// one.
func readIdentity(dataDir string) (identity, bool, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, identityFile))
	if errors.Is(err, fs.ErrNotExist) {
		return identity{}, false, nil
	}
	if err != nil {
		return identity{}, false, fmt.Errorf("cluster: read identity: %w", err)
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil {
		return identity{}, false, fmt.Errorf("cluster: parse %s: %w", identityFile, err)
	}
	return id, true, nil
}

// writeIdentity records id in dataDir durably (write, fsync, rename, fsync
// the directory).
func writeIdentity(dataDir string, id identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dataDir, identityFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("cluster: write identity: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dataDir, identityFile))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cluster: write identity: %w", err)
	}
	if d, err := os.Open(dataDir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// shardDir is where a shard keeps its Raft log, stable store and snapshots.
func shardDir(dataDir string, shard int32) string {
	if shard == MetaShard {
		return filepath.Join(dataDir, "meta")
	}
	return filepath.Join(dataDir, "shards", strconv.Itoa(int(shard)))
}
