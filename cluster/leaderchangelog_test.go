package cluster

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// A burst of leadership changes is one line at info, saying which shards
// were gained, handed off and lost to another node's election.
func TestLeaderChangeLogWritesABurstInOneLine(t *testing.T) {
	var buf strings.Builder
	l := &leaderChangeLog{logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})}
	for _, s := range []int32{3, 1, 2, -1} {
		l.note(s, true, false)
	}
	l.note(7, false, true)
	l.note(9, false, false)
	l.flush()
	out := buf.String()
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("wrote %q, want one line", out)
	}
	for _, want := range []string{`shard leadership changed`, `gained="-1,1-3"`, `handed_off=7`, `deposed=9`} {
		if !strings.Contains(out, want) {
			t.Errorf("line %q lacks %s", out, want)
		}
	}
	buf.Reset()
	l.flush()
	if buf.Len() != 0 {
		t.Errorf("an empty burst wrote %q", buf.String())
	}
}
