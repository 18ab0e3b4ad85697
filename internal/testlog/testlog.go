package testlog

import (
	"io"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// T is the part of testing.TB the writer needs; *testing.T and
// *testing.B satisfy it.
type T interface {
	Helper()
	Log(args ...any)
	Cleanup(func())
}

// Writer returns an io.Writer whose every Write is one t.Log line (less
// its trailing newline). Once the test's cleanups run it drops what it is
// given: servers and Raft goroutines may log after their test, and
// package testing panics on a Log after the test completed. The cleanup
// waits for a Write in progress, so none can reach t.Log late. Safe for
// concurrent use.
func Writer(t T) io.Writer {
	w := &writer{t: t}
	t.Cleanup(w.stop)
	return w
}

// Logger returns an hclog.Logger named name writing to Writer(t), and to
// also when it is not nil, at the level KCOORD_TEST_LOG names (info when
// unset).
func Logger(t T, name string, also io.Writer) hclog.Logger {
	level := hclog.Info
	if l := os.Getenv("KCOORD_TEST_LOG"); l != "" {
		level = hclog.LevelFromString(l)
	}
	out := Writer(t)
	if also != nil {
		out = io.MultiWriter(out, also)
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: out, Level: level})
}

type writer struct {
	mu   sync.Mutex
	t    T
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Helper()
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *writer) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
