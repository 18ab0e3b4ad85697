package server

import "github.com/hashicorp/go-hclog"

// minLevelLogger drops records below min and passes the rest to the wrapped
// logger. It quiets hashicorp/raft, which logs every election of every shard
// at info: fifty shards make hundreds of lines per start.
type minLevelLogger struct {
	hclog.Logger
	min hclog.Level
}

// quiet wraps l so that it keeps only records at min or above, unless l is
// itself at debug or lower (then everything l would log is kept).
func quiet(l hclog.Logger, min hclog.Level) hclog.Logger {
	if l.IsDebug() {
		return l
	}
	return minLevelLogger{Logger: l, min: min}
}

func (l minLevelLogger) Log(level hclog.Level, msg string, args ...any) {
	if level >= l.min {
		l.Logger.Log(level, msg, args...)
	}
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
	return minLevelLogger{Logger: l.Logger.With(args...), min: l.min}
}

func (l minLevelLogger) Named(name string) hclog.Logger {
	return minLevelLogger{Logger: l.Logger.Named(name), min: l.min}
}

func (l minLevelLogger) ResetNamed(name string) hclog.Logger {
	return minLevelLogger{Logger: l.Logger.ResetNamed(name), min: l.min}
}
