package testkit

import (
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
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
	w := &testWriter{t: t}
	t.Cleanup(w.stop)
	level := hclog.Info
	if l := os.Getenv("KCOORD_TEST_LOG"); l != "" {
		level = hclog.LevelFromString(l)
	}
	var out io.Writer = w
	if also != nil {
		out = io.MultiWriter(w, also)
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: out, Level: level})
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Helper()
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
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
