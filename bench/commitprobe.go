package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// commitProbe keeps a few clients committing to groups that already hold
// offsets, one commit in flight each, and records when each commit began,
// how long it took and whether it failed, so that the latencies of one
// phase (before a node is added, while replicas move) can be read apart
// from another's. Its goroutines run from startCommitProbe until stop.
type commitProbe struct {
	cancel   context.CancelFunc
	stopping atomic.Bool // no new commit starts
	wg       sync.WaitGroup

	mu      sync.Mutex
	samples []probeSample
}

// probeSample is one commit of the probe, to group(key); prev is when
// the client's commit to that group before it began (zero for its
// first): franz-go keeps each group's coordinator from then on.
type probeSample struct {
	at, prev time.Time
	took     time.Duration
	key      int
	err      bool
}

// ProbeWindow is what the probe's commits that began within a phase did.
type ProbeWindow struct {
	Commits, Errors int
	P50, P99, Max   time.Duration
}

func (w ProbeWindow) String() string {
	return fmt.Sprintf("%d commits (%d errors), p50 %v, p99 %v, max %v", w.Commits, w.Errors,
		w.P50.Round(time.Microsecond), w.P99.Round(time.Microsecond), w.Max.Round(time.Microsecond))
}

// startCommitProbe starts clients committers against brokers (groups
// must be positive). Client c
// commits all partitions of topic to group(c), group(c+clients), ...,
// wrapping at groups, with rising offsets.
func startCommitProbe(ctx context.Context, brokers []string, clients, groups int, group func(int) string, topic string, topicID [16]byte, partitions int) (*commitProbe, error) {
	ctx, cancel := context.WithCancel(ctx)
	p := &commitProbe{cancel: cancel}
	cls := make([]*kgo.Client, clients)
	for i := range cls {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RetryTimeout(30*time.Second))
		if err != nil {
			cancel()
			for _, c := range cls[:i] {
				c.Close()
			}
			return nil, err
		}
		cls[i] = cl
	}
	for c, cl := range cls {
		p.wg.Go(func() {
			defer cl.Close()
			last := map[int]time.Time{} // this client's groups only
			for k, offset := c, int64(1_000_000); ctx.Err() == nil && !p.stopping.Load(); k, offset = (k+clients)%groups, offset+1 {
				start := time.Now()
				err := commitGroup(ctx, cl, FillRequest(group(k), topic, topicID, partitions, offset))
				if ctx.Err() != nil {
					return // stopped: the commit in flight is not counted
				}
				p.mu.Lock()
				p.samples = append(p.samples, probeSample{at: start, prev: last[k], took: time.Since(start), key: k, err: err != nil})
				p.mu.Unlock()
				last[k] = start
				if err != nil {
					time.Sleep(errorPause)
				}
			}
		})
	}
	return p, nil
}

// stop ends the probe and waits for its clients: a commit in flight is
// waited for, up to commitGrace, and counted (the slowest are the ones a
// window must not lose).
func (p *commitProbe) stop() {
	defer p.cancel()
	p.stopping.Store(true)
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(commitGrace):
		p.cancel()
		<-done
	}
}

// window sums the commits that began in [from, to) and that keep
// (nil: all of them).
func (p *commitProbe) window(from, to time.Time, keep func(probeSample) bool) ProbeWindow {
	p.mu.Lock()
	defer p.mu.Unlock()
	var w ProbeWindow
	var lat []time.Duration
	for _, s := range p.samples {
		if s.at.Before(from) || !s.at.Before(to) || keep != nil && !keep(s) {
			continue
		}
		if s.err {
			w.Errors++
			continue
		}
		lat = append(lat, s.took)
	}
	w.Commits = len(lat)
	if len(lat) > 0 {
		slices.Sort(lat)
		w.P50, w.P99, w.Max = quantile(lat, 0.50), quantile(lat, 0.99), lat[len(lat)-1]
	}
	return w
}
