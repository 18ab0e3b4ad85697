package server

import (
	"time"
)

// retentionLoop expires committed offsets (KIP-211) on the shards this
// node leads, every offsets.retention.check.interval.ms, until stop closes.
// It runs on its own goroutine; each pass only enqueues Raft writes.
func (s *Server) retentionLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.cfg.OffsetsRetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.expireOffsets()
		}
	}
}

// expireOffsets runs one retention pass over every coordinator.
func (s *Server) expireOffsets() {
	s.mu.Lock()
	coords := s.coords
	s.mu.Unlock()
	now, retention := time.Now().UnixMilli(), s.cfg.OffsetsRetention.Milliseconds()
	var offsets, groups int
	for _, c := range coords {
		if c == nil {
			continue
		}
		o, g := c.ExpireOffsets(now, retention)
		offsets, groups = offsets+o, groups+g
	}
	if offsets+groups > 0 {
		s.logger.Info("retention pass", "offsets_expired", offsets, "groups_removed", groups)
	}
}
