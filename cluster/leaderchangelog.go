package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// leaderChangeLogWindow is how long leaderChangeLog gathers changes before it
// logs them: a start, a failover, a balance round or a drain moves many
// shards within it.
const leaderChangeLogWindow = 500 * time.Millisecond

// handOffWindow is how long after this node asked Raft to hand a shard's
// leadership over a loss of it counts as that hand-off.
const handOffWindow = 10 * time.Second

// leaderChangeLog logs this node's leadership changes at info, one line per
// burst, saying which shards it gained, which it handed off (a transfer it
// asked for: balance, drain, shutdown) and which it was deposed from
// (another node won an election: this one was cut off, paused or slow).
// Each shard's change is logged at debug as it comes. The shards'
// leadership goroutines call note; the line is written on a timer
// goroutine; nothing blocks beyond a short mutex.
type leaderChangeLog struct {
	logger hclog.Logger

	mu                         sync.Mutex
	gained, handedOff, deposed []int32
	timer                      *time.Timer
}

// note records that this node gained (leader) or lost shard's leadership;
// handedOff says a lost one was handed over at this node's request.
func (l *leaderChangeLog) note(shard int32, leader, handedOff bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case leader:
		l.gained = append(l.gained, shard)
	case handedOff:
		l.handedOff = append(l.handedOff, shard)
	default:
		l.deposed = append(l.deposed, shard)
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(leaderChangeLogWindow, l.flush)
	}
}

// flush writes what was noted since the last line.
func (l *leaderChangeLog) flush() {
	l.mu.Lock()
	gained, handedOff, deposed := l.gained, l.handedOff, l.deposed
	l.gained, l.handedOff, l.deposed, l.timer = nil, nil, nil, nil
	l.mu.Unlock()
	var args []any
	for _, part := range []struct {
		key    string
		shards []int32
	}{{"gained", gained}, {"handed_off", handedOff}, {"deposed", deposed}} {
		if len(part.shards) > 0 {
			args = append(args, part.key, shardList(part.shards))
		}
	}
	if len(args) > 0 {
		l.logger.Info("shard leadership changed", args...)
	}
}
