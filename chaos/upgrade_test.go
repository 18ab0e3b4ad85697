package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The upgrade check counts a KIP-848 group's epochs as it counts classic
// generations: each first seen in the window, the group's first left out.
func TestUpgradeCountsKIP848EpochsSeenDuringTheSteps(t *testing.T) {
	s := Snapshot{Assigns: []AssignRecord{
		{Group: "k0", Member: "a", Epoch: 1, At: 1 * time.Second},
		{Group: "k0", Member: "b", Epoch: 3, At: 2 * time.Second},
		{Group: "k0", Member: "a", Epoch: 3, At: 2 * time.Second},
		{Group: "k0", Member: "a", Epoch: 5, At: 20 * time.Second},
		{Group: "k1", Member: "c", Epoch: 4, At: 21 * time.Second}, // k1's first: no rebalance
	}}
	if n := epochsBetween(s, 0, 15*time.Second); n != 1 {
		t.Errorf("baseline: %d epochs after the first, want 1 (epoch 3)", n)
	}
	if n := epochsBetween(s, 15*time.Second, 30*time.Second); n != 1 {
		t.Errorf("steps: %d epochs, want 1 (k0's epoch 5)", n)
	}
}

// The finalize step finalizes the highest level every node supports, as
// `kcoord cluster features --json` describes them; a node of the
// previous release gossips no release and supports level 1 alone.
func TestUpgradeFinalizesTheLevelEveryNodeSupports(t *testing.T) {
	mixed := fmt.Sprintf(`{"finalized":{"kcoord.version":1},"nodes":[
		{"node_id":1,"release":"0.2.0","supported":{"kcoord.version":{"min":1,"max":%[1]d}}},
		{"node_id":2,"release":"","supported":{"kcoord.version":{"min":1,"max":1}}},
		{"node_id":3,"release":"0.2.0","supported":{"kcoord.version":{"min":1,"max":%[1]d}}}]}`, upgradeLevel)
	var v featuresView
	if err := json.Unmarshal([]byte(mixed), &v); err != nil {
		t.Fatal(err)
	}
	if got, err := v.commonMax(); err != nil || got != 1 {
		t.Errorf("mixed cluster: common max %d, %v; want 1", got, err)
	}
	if d := v.describe(); !strings.Contains(d, "node 2 unknown release supports 1–1") {
		t.Errorf("describe = %q", d)
	}
	v.Nodes = v.Nodes[:1]
	if got, _ := v.commonMax(); got != upgradeLevel {
		t.Errorf("new nodes only: common max %d, want %d", got, upgradeLevel)
	}
	if _, err := (featuresView{}).commonMax(); err == nil {
		t.Error("no nodes: want an error")
	}
}

// An unexpected exit is reported with the end of the node's log.
func TestLogTailKeepsTheLastLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kcoord.log")
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := LogTail(path, 3), "line 97\nline 98\nline 99"; got != want {
		t.Errorf("LogTail = %q, want %q", got, want)
	}
	if got := LogTail(filepath.Join(t.TempDir(), "none"), 3); !strings.Contains(got, "no such file") {
		t.Errorf("LogTail of a missing file = %q", got)
	}
}

func TestUpgradeReportEndsWithItsSummary(t *testing.T) {
	r := &Report{Ops: 7, BaselinePerMinute: -1, Faults: []FaultRecord{{Name: "upgrade", Target: "node 1→new"}},
		Checks: []CheckResult{{Name: "processes", Anomalies: []string{"node 2 exited"}}}}
	var b strings.Builder
	WriteUpgrade(&b, r)
	out := b.String()
	if !strings.HasSuffix(out, "\nupgrade: 7 ops, 1 steps, 1 anomalies\n") || strings.Contains(out, "chaos:") {
		t.Errorf("report:\n%s", out)
	}
}
