package chaos

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// buildKcoord builds ./cmd/kcoord into a temporary directory.
func buildKcoord(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kcoord")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kcoord")
	cmd.Dir = ".." // the module root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kcoord: %v\n%s", err, out)
	}
	return bin
}

// TestChaosCatchesCommitsAcknowledgedBeforeRaft plants a bug in every
// node (--unsafe-ack-before-commit answers an OffsetCommit before Raft
// commits it) and runs the suite's leader kills and pauses over it: the
// checkers must report anomalies, or the suite proves nothing when it
// passes.
func TestChaosCatchesCommitsAcknowledgedBeforeRaft(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three kcoord processes for a minute")
	}
	if err := NetnsSupported(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rep, err := RunSuite(ctx, SuiteConfig{
		Binary:   buildKcoord(t),
		Dir:      dir,
		Nemeses:  []string{"kill-leader", "pause-leader"},
		Cycles:   3,
		Rest:     2 * time.Second,
		Extra:    []string{"--unsafe-ack-before-commit"},
		Workload: WorkloadConfig{Groups: 2, Members: 2, RegisterGroups: 2, Workers: 4, ColdGroups: 1, Churn: 5 * time.Second},
		Logger:   hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Info}),
		Progress: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	caught := 0
	for _, c := range rep.Checks {
		if c.Name == "linearizable" || c.Name == "durable" {
			caught += len(c.Anomalies)
		}
	}
	if caught == 0 {
		t.Fatal("commits were acknowledged before Raft committed them, and neither the linearizability nor the durability checker saw it")
	}
	if _, err := os.Stat(filepath.Join(dir, "histories", "history.json")); err != nil {
		t.Fatalf("a failing run must leave its history: %v", err)
	}
}

// testWriter sends a logger's lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestChaosCatchesSkippedFsyncs plants a bug in every node
// (--unsafe-skip-fsync: the node's log acknowledges writes it never
// fdatasynced) and cuts the power of every node: the power-loss nemesis
// undoes what no fsync covered, so acknowledged commits vanish, and the
// checkers must say so.
func TestChaosCatchesSkippedFsyncs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three kcoord processes for a minute")
	}
	if err := NetnsSupported(); err != nil {
		t.Skip(err)
	}
	if err := FaultFSSupported(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rep, err := RunSuite(ctx, SuiteConfig{
		Binary:   buildKcoord(t),
		Dir:      dir,
		Nemeses:  []string{"power-loss"},
		Cycles:   1,
		Baseline: 5 * time.Second,
		Extra:    []string{"--unsafe-skip-fsync"},
		// A node whose log lost everything never comes back: say so soon.
		ReadyBound: 20 * time.Second, LivenessBound: 15 * time.Second,
		Workload: WorkloadConfig{Groups: 2, Members: 2, RegisterGroups: 2, Workers: 4, ColdGroups: 2, Churn: 5 * time.Second},
		Logger:   hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Info}),
		Progress: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	if rep.Anomalies() == 0 {
		t.Fatal("the nodes acknowledged writes they never synced, and a power loss of every node went unnoticed")
	}
}
