package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FillConfig is one fill (Fill): Groups groups of Partitions partitions
// each, committed through Committers clients.
type FillConfig struct {
	// Brokers are the bootstrap servers, host:port.
	Brokers []string
	// Groups, Partitions and Committers are 100 000, 10 and 64 by
	// default.
	Groups, Partitions, Committers int
	// Topic is the topic committed to; it is created with Partitions
	// partitions if it does not exist. Prefix names the groups: Prefix-0,
	// Prefix-1, ...
	Topic, Prefix string
}

// DefaultFillConfig is 100 k groups × 10 partitions through 64
// committers.
func DefaultFillConfig() FillConfig {
	return FillConfig{
		Brokers:    []string{"127.0.0.1:9092"},
		Groups:     100_000,
		Partitions: 10,
		Committers: 64,
		Topic:      "kcoord-fill",
		Prefix:     "kcoord-fill",
	}
}

// FillResult is what a fill did.
type FillResult struct {
	// Groups counts the groups whose commit was acknowledged; Lost those
	// whose every attempt failed.
	Groups, Lost int
	// Errors counts failed attempts (the client's own retries inside
	// one attempt not counted), retried or not.
	Errors  int
	Elapsed time.Duration
}

// PerSecond is acknowledged group commits per second.
func (r FillResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Groups) / r.Elapsed.Seconds()
}

func (r FillResult) String() string {
	return fmt.Sprintf("%d groups in %v: %.0f group commits/s (%d errors, %d groups lost)",
		r.Groups, r.Elapsed.Round(time.Millisecond), r.PerSecond(), r.Errors, r.Lost)
}

// fillAttempts is how many times a committer tries one group's commit.
const fillAttempts = 3

// ErrFillConfig means a fill's sizes are not positive.
var ErrFillConfig = errors.New("bench: a fill needs positive groups, partitions and committers")

// Fill stores committed offsets for cfg.Groups groups of cfg.Partitions
// partitions each. Every committer, one goroutine and client each, takes
// the next group id and commits offsets for all the partitions in one
// OffsetCommit (an admin commit: generation -1, no member, as
// CommitOffset), one request in flight; a group whose commit fails is
// tried again up to fillAttempts times. It returns when every group was
// tried, or with ctx's error.
func Fill(ctx context.Context, cfg FillConfig) (FillResult, error) {
	if cfg.Groups < 1 || cfg.Partitions < 1 || cfg.Committers < 1 {
		return FillResult{}, fmt.Errorf("%w: %d × %d through %d", ErrFillConfig, cfg.Groups, cfg.Partitions, cfg.Committers)
	}
	if len(cfg.Brokers) == 0 {
		return FillResult{}, errors.New("bench: no broker to connect to")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.RetryTimeout(10 * time.Second)}
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return FillResult{}, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	tctx, cancel := context.WithTimeout(ctx, topicWait)
	_, err = adm.CreateTopic(tctx, int32(cfg.Partitions), -1, nil, cfg.Topic)
	cancel()
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return FillResult{}, fmt.Errorf("bench: create topic %s: %w", cfg.Topic, err)
	}
	topicID, err := ensureTopic(ctx, adm, cfg.Topic) // waits until the metadata has it
	if err != nil {
		return FillResult{}, err
	}

	clients := make([]*kgo.Client, cfg.Committers)
	for i := range clients {
		if clients[i], err = kgo.NewClient(opts...); err != nil {
			return FillResult{}, err
		}
		defer clients[i].Close()
	}
	var (
		next                 atomic.Int64
		stored, lost, failed atomic.Int64
		wg                   sync.WaitGroup
	)
	t0 := time.Now()
	for _, cl := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				g := next.Add(1) - 1
				if g >= int64(cfg.Groups) {
					return
				}
				req := FillRequest(fillGroup(cfg.Prefix, g), cfg.Topic, topicID, cfg.Partitions, g+1)
				ok := false
				for range fillAttempts {
					if err := commitGroup(ctx, cl, req); err == nil {
						ok = true
						break
					}
					failed.Add(1)
					if ctx.Err() != nil {
						return
					}
					time.Sleep(errorPause)
				}
				if ok {
					stored.Add(1)
				} else {
					lost.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r := FillResult{Groups: int(stored.Load()), Lost: int(lost.Load()), Errors: int(failed.Load()), Elapsed: time.Since(t0)}
	return r, ctx.Err()
}

// FillRequest is an admin OffsetCommit (generation -1, no member) of
// offset for partitions 0 to partitions-1 of topic, to group: Fill's, and
// e2e's replica-move benchmark's.
func FillRequest(group, topic string, topicID [16]byte, partitions int, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	for p := range int32(partitions) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, offset, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return req
}

// commitGroup sends req and returns the first partition's error, or an
// error if the answer does not hold every partition.
func commitGroup(ctx context.Context, cl *kgo.Client, req *kmsg.OffsetCommitRequest) error {
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	want := len(req.Topics[0].Partitions)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != want {
		return fmt.Errorf("bench: a commit of %d partitions answered %d topics", want, len(resp.Topics))
	}
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}

// fillGroup is the id of the k-th group a fill with prefix commits to.
func fillGroup(prefix string, k int64) string { return fmt.Sprintf("%s-%d", prefix, k) }
