package testkit

import (
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kcoord/kcoord/internal/testlog"
)

// Logger returns an hclog.Logger writing to t.Log that goes quiet when
// the test ends (raft goroutines may log late). KCOORD_TEST_LOG sets the
// level (default info).
func Logger(t testing.TB) hclog.Logger {
	return newLogger(t, nil)
}

// Capture returns a Logger that also writes to the returned LogCapture.
func Capture(t testing.TB) (hclog.Logger, *LogCapture) {
	c := &LogCapture{}
	return newLogger(t, c), c
}

func newLogger(t testing.TB, also io.Writer) hclog.Logger {
	return testlog.Logger(t, t.Name(), also)
}

// LogCapture keeps what a logger wrote, for tests that check log lines.
// Safe for concurrent use.
type LogCapture struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (c *LogCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// Lines returns the captured lines containing every one of subs.
func (c *LogCapture) Lines(subs ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range strings.Split(c.buf.String(), "\n") {
		all := l != ""
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}
