package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// repeatWindow is how long a message logged by one shard's Raft hides the
// same message from every other shard.
const repeatWindow = 10 * time.Second

// minLevelLogger drops records below min and passes the rest to the wrapped
// logger, once per message per repeatWindow across all its children. It
// quiets hashicorp/raft, which logs every election of every shard at info
// (fifty shards make hundreds of lines per start) and, when a peer is down,
// the same dial error for every shard every few milliseconds.
type minLevelLogger struct {
	hclog.Logger
	min     hclog.Level
	repeats *repeats
}

// repeats remembers when each message was last logged.
type repeats struct {
	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

// allow reports whether msg may be logged now, and how many copies were
// suppressed since it last was.
func (r *repeats) allow(msg string) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if t, ok := r.last[msg]; ok && now.Sub(t) < repeatWindow {
		r.suppressed[msg]++
		return false, 0
	}
	r.last[msg] = now
	n := r.suppressed[msg]
	delete(r.suppressed, msg)
	return true, n
}

// quiet wraps l so that it keeps only records at min or above, each message
// at most once per repeatWindow, unless l is itself at debug or lower (then
// everything l would log is kept).
func quiet(l hclog.Logger, min hclog.Level) hclog.Logger {
	if l.IsDebug() {
		return l
	}
	return minLevelLogger{Logger: l, min: min, repeats: &repeats{last: make(map[string]time.Time), suppressed: make(map[string]int)}}
}

func (l minLevelLogger) Log(level hclog.Level, msg string, args ...any) {
	if level < l.min || firstElection(msg, args) {
		return
	}
	ok, suppressed := l.repeats.allow(msg)
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "repeats_suppressed", suppressed)
	}
	l.Logger.Log(level, msg, args...)
}

// firstElection reports whether a record is raft's warning that a shard
// starts an election after hearing from no leader at all: a starting node's
// or a new cluster's first election, not a lost leader (that warning names
// the last leader, and is kept).
func firstElection(msg string, args []any) bool {
	if msg != "heartbeat timeout reached, starting election" {
		return false
	}
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "last-leader-id" {
			return fmt.Sprint(args[i+1]) == ""
		}
	}
	return false
}

func (l minLevelLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l minLevelLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l minLevelLogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l minLevelLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l minLevelLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l minLevelLogger) IsTrace() bool { return l.min <= hclog.Trace && l.Logger.IsTrace() }
func (l minLevelLogger) IsDebug() bool { return l.min <= hclog.Debug && l.Logger.IsDebug() }
func (l minLevelLogger) IsInfo() bool  { return l.min <= hclog.Info && l.Logger.IsInfo() }

func (l minLevelLogger) With(args ...any) hclog.Logger {
	return minLevelLogger{Logger: l.Logger.With(args...), min: l.min, repeats: l.repeats}
}

func (l minLevelLogger) Named(name string) hclog.Logger {
	return minLevelLogger{Logger: l.Logger.Named(name), min: l.min, repeats: l.repeats}
}

func (l minLevelLogger) ResetNamed(name string) hclog.Logger {
	return minLevelLogger{Logger: l.Logger.ResetNamed(name), min: l.min, repeats: l.repeats}
}
