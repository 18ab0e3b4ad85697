package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReportMeasuresEveryServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kfake, a node, a three-node cluster and three kcoord processes")
	}
	if raceOn {
		t.Skip("runs without the race detector (make test's second step): see raceOn")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := DefaultReportConfig(t.TempDir())
	cfg.Duration, cfg.Idle = 300*time.Millisecond, 500*time.Millisecond
	cfg.Binary, cfg.FailoverTrials = kcoordBinary(t), 1
	cfg.FillGroups, cfg.FillPartitions, cfg.FillCommitters = 200, 10, 8
	var out bytes.Buffer
	if err := Report(ctx, &out, cfg); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	t.Log(md)
	for _, want := range []string{"fdatasync p50 of **", "| kfake, in memory | ", "| 1.00× |", "| kcoord, 1 node | ", "| kcoord, 3 nodes, RF 3 | ",
		"% of one core** together", "| kcoord, 3 processes, RF 3 | ", "## Three processes", "shards (offsets.topic.num.partitions",
		"in 1 trial |", "## Filling 200 groups", "2000 offsets in all", " MiB | ", "restarted after SIGKILL"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, "every server in one process") {
		t.Error("the header still says every server runs in one process")
	}
	if strings.Contains(md, "%!") {
		t.Error("the report holds a formatting error")
	}
}

func TestReportNeedsABinary(t *testing.T) {
	cfg := DefaultReportConfig(t.TempDir())
	if err := Report(context.Background(), &bytes.Buffer{}, cfg); !errors.Is(err, ErrNoBinary) {
		t.Errorf("err = %v, want ErrNoBinary", err)
	}
}

func TestCountLabel(t *testing.T) {
	for n, want := range map[int]string{100_000: "100 k", 200: "200", 1500: "1500", 20_000: "20 k"} {
		if got := countLabel(n); got != want {
			t.Errorf("countLabel(%d) = %q, want %q", n, got, want)
		}
	}
}
