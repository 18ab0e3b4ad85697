package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/release"
)

// node.json stays version 3, which release 0.1.0 opens, until a level is
// finalized; then it is version 4, and a binary that does not support the
// recorded level refuses the data dir naming both releases.
func TestNodeJSONRecordsTheFinalizedLevel(t *testing.T) {
	dir := t.TempDir()
	id := identity{NodeID: 1, Shards: 8, LogStore: LogStoreNode, ClusterID: "c"}
	if err := writeIdentity(dir, id); err != nil {
		t.Fatal(err)
	}
	got, _, err := readIdentity(dir)
	if err != nil || got.Version != identityVersion {
		t.Fatalf("without features: version %d, %v; want %d", got.Version, err, identityVersion)
	}
	id.Features = map[string]int16{release.Feature: int16(release.Level2)}
	if err := writeIdentity(dir, id); err != nil {
		t.Fatal(err)
	}
	got, _, err = readIdentity(dir)
	if err != nil || got.Version != identityVersionFeatures || got.Features[release.Feature] != 2 {
		t.Fatalf("with features: %+v, %v", got, err)
	}
	if err := checkStartLevel(dir, got); err != nil {
		t.Fatalf("level 2 refused by a binary that supports it: %v", err)
	}

	got.Features[release.Feature] = int16(release.MaxLevel + 1)
	err = checkStartLevel(dir, got)
	if !errors.Is(err, ErrFeatureUnsupported) {
		t.Fatalf("a level above this binary's: %v", err)
	}
	for _, want := range []string{fmt.Sprintf("finalized at kcoord.version %d", release.MaxLevel+1), "this is kcoord " + release.Version, fmt.Sprintf("supports kcoord.version 1 to %d", release.MaxLevel)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}

	// A node.json newer than any this code reads is refused too.
	if err := os.WriteFile(filepath.Join(dir, identityFile), []byte(`{"version": 5, "node_id": 1, "shards": 8}`), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readIdentity(dir); err == nil || !strings.Contains(err.Error(), "version 5") {
		t.Fatalf("node.json version 5: %v", err)
	}
}

// Group shards take a command type only at a finalized level that allows
// it; the metadata group's FeatureLevelSet is the finalization itself.
func TestCommandsAboveTheWriteLevelAreRefused(t *testing.T) {
	stamp, err := fsm.Encode(&fsm.FeatureLevelSet{Feature: release.Feature, Level: 2})
	if err != nil {
		t.Fatal(err)
	}
	commit, err := fsm.Encode(&fsm.OffsetCommit{GroupID: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkWriteLevel(3, stamp, release.Level1); !errors.Is(err, ErrFeatureNotFinalized) {
		t.Fatalf("a stamp at level 1: %v", err)
	}
	if err := checkWriteLevel(3, stamp, release.Level2); err != nil {
		t.Fatalf("a stamp at level 2: %v", err)
	}
	if err := checkWriteLevel(3, commit, release.Level1); err != nil {
		t.Fatalf("a commit at level 1: %v", err)
	}
	if err := checkWriteLevel(MetaShard, stamp, release.Level1); err != nil {
		t.Fatalf("the finalization itself: %v", err)
	}
}

// A finalization node.json could not record is recorded by a later round,
// once the disk takes the write.
func TestAFailedRecordOfTheFinalizedLevelIsRetried(t *testing.T) {
	dir := t.TempDir()
	id := identity{NodeID: 1, Shards: 8, LogStore: LogStoreNode, ClusterID: "c"}
	if err := writeIdentity(dir, id); err != nil {
		t.Fatal(err)
	}
	id.Version = identityVersion
	notADir := filepath.Join(dir, "node.json") // writes under it fail, even as root
	n := &Node{cfg: Config{DataDir: notADir}, logger: testLogger(t), ident: id, onDisk: id}
	if err := n.recordFinalized(release.Level2); err == nil {
		t.Fatal("a record into a data dir that is a file succeeded")
	}
	n.cfg.DataDir = dir
	if err := n.recordFinalized(release.Level2); err != nil {
		t.Fatal(err)
	}
	got, _, err := readIdentity(dir)
	if err != nil || got.Version != identityVersionFeatures || got.Features[release.Feature] != int16(release.Level2) {
		t.Fatalf("after the retry node.json is %+v, %v; want version 4 with level 2", got, err)
	}
}
