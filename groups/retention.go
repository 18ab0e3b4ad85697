package groups

import (
	"time"

	"github.com/hashicorp/go-hclog"
)

// RunRetention is the node's offset retention sweep (KIP-211, Kafka's
// offsets.retention.check.interval.ms task): every interval it runs
// ExpireOffsets with retention (offsets.retention.minutes) on each
// coordinator of coords (nil entries are skipped; coordinators of shards
// led elsewhere do nothing), until stop closes, and then closes done. The
// server starts it on a goroutine of its own once its coordinators exist;
// each pass only enqueues Raft writes, so it never blocks on Raft.
func RunRetention(stop <-chan struct{}, done chan<- struct{}, coords []*Coordinator, interval, retention time.Duration, logger hclog.Logger) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			sweepOffsets(coords, time.Now().UnixMilli(), retention.Milliseconds(), logger)
		}
	}
}

// sweepOffsets runs one retention pass over every coordinator and logs a
// summary when it removed anything.
func sweepOffsets(coords []*Coordinator, now, retention int64, logger hclog.Logger) {
	var offsets, groups int
	for _, c := range coords {
		if c == nil {
			continue
		}
		o, g := c.ExpireOffsets(now, retention)
		offsets, groups = offsets+o, groups+g
	}
	if offsets+groups > 0 {
		logger.Info("retention pass", "offsets_expired", offsets, "groups_removed", groups)
	}
}
