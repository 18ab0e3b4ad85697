package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestReportMeasuresEveryServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kfake, a node and a three-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := DefaultReportConfig(t.TempDir())
	cfg.Duration, cfg.Idle = 300*time.Millisecond, 500*time.Millisecond
	var out bytes.Buffer
	if err := Report(ctx, &out, cfg); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	t.Log(md)
	for _, want := range []string{"fdatasync p50 of **", "| kfake, in memory | ", "| 1.00× |", "| kcoord, 1 node | ", "| kcoord, 3 nodes, RF 3 | ", "% of one core** together"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
