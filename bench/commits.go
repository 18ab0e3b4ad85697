package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitsConfig is one OffsetCommit benchmark run.
type CommitsConfig struct {
	// Brokers are the bootstrap servers, host:port.
	Brokers []string
	// Clients is how many clients commit at once, each with its own
	// connection, one commit in flight each.
	Clients int
	// Groups is how many groups the clients commit to: 0 (the default)
	// gives each client its own group and partition 0; otherwise client i
	// commits partition i/Groups of group i%Groups, as members of a group
	// each commit their own partitions, and the topic has as many
	// partitions as a group has clients.
	Groups int
	// Duration is how long commits are timed, after Warmup.
	Duration, Warmup time.Duration
	// Topic is the topic committed to; it is created (one partition) if it
	// does not exist. Prefix names the groups: Prefix-0, Prefix-1, ...
	Topic, Prefix string
	// Opts are added to every client's options.
	Opts []kgo.Opt
}

// DefaultCommitsConfig is 64 clients for 10 s after a 2 s warm-up.
func DefaultCommitsConfig() CommitsConfig {
	return CommitsConfig{
		Brokers:  []string{"127.0.0.1:9092"},
		Clients:  64,
		Duration: 10 * time.Second,
		Warmup:   2 * time.Second,
		Topic:    "kcoord-bench",
		Prefix:   "kcoord-bench",
	}
}

// CommitsResult is what a run measured.
type CommitsResult struct {
	Clients  int
	Commits  int           // acknowledged in the timed window
	Errors   int           // failed in the timed window (the client's retries included)
	Elapsed  time.Duration // the timed window
	P50, P99 time.Duration // of acknowledged commits
	Max      time.Duration
}

// PerSecond is acknowledged commits per second.
func (r CommitsResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Commits) / r.Elapsed.Seconds()
}

func (r CommitsResult) String() string {
	return fmt.Sprintf("%d clients: %.0f commits/s, p50 %v, p99 %v, max %v (%d commits, %d errors in %v)",
		r.Clients, r.PerSecond(), r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond),
		r.Commits, r.Errors, r.Elapsed.Round(time.Millisecond))
}

// ErrNoCommits means no commit was acknowledged in the timed window.
var ErrNoCommits = errors.New("bench: no commit was acknowledged")

// Commits runs the OffsetCommit benchmark: every client commits a rising
// offset of one partition of the topic (as a group admin does: generation
// -1, no member), one at a time, each through franz-go's usual coordinator
// lookup; each to its own group, or, with cfg.Groups, clients share groups
// and each commits its own partition. Commits in the warm-up are not counted. It
// returns when the duration is over or ctx ends.
func Commits(ctx context.Context, cfg CommitsConfig) (CommitsResult, error) {
	if cfg.Clients < 1 {
		return CommitsResult{}, fmt.Errorf("bench: %d clients; at least 1", cfg.Clients)
	}
	if cfg.Groups < 0 || cfg.Groups > cfg.Clients {
		return CommitsResult{}, fmt.Errorf("bench: %d groups for %d clients; between 1 and the clients, or 0 for a group each", cfg.Groups, cfg.Clients)
	}
	groups := cfg.Groups
	if groups == 0 {
		groups = cfg.Clients
	}
	partitions := int32((cfg.Clients + groups - 1) / groups)
	if len(cfg.Brokers) == 0 {
		return CommitsResult{}, errors.New("bench: no broker to connect to")
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.RetryTimeout(10 * time.Second)}, cfg.Opts...)
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return CommitsResult{}, err
	}
	defer admin.Close()
	topicID, err := ensureTopicPartitions(ctx, kadm.NewClient(admin), cfg.Topic, partitions)
	if err != nil {
		return CommitsResult{}, err
	}

	clients := make([]*kgo.Client, cfg.Clients)
	for i := range clients {
		if clients[i], err = kgo.NewClient(opts...); err != nil {
			return CommitsResult{}, err
		}
		defer clients[i].Close()
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errs      int
	)
	start := time.Now().Add(cfg.Warmup)
	end := start.Add(cfg.Duration)
	// A commit started before the end is waited for (a stall across the
	// end counts), up to the grace.
	runCtx, cancel := context.WithDeadline(ctx, end.Add(commitGrace))
	defer cancel()
	var wg sync.WaitGroup
	for i, cl := range clients {
		group, partition := fmt.Sprintf("%s-%d", cfg.Prefix, i%groups), int32(i/groups)
		wg.Go(func() {
			var local []time.Duration
			localErrs := 0
			for offset := int64(1); time.Now().Before(end) && runCtx.Err() == nil; offset++ {
				t0 := time.Now()
				err := commitPartition(runCtx, cl, group, cfg.Topic, topicID, partition, offset)
				d := time.Since(t0)
				if err != nil {
					if !t0.Before(start) {
						localErrs++
					}
					time.Sleep(errorPause) // no busy loop on a server that refuses at once
					continue
				}
				if !t0.Before(start) {
					local = append(local, d)
				}
			}
			mu.Lock()
			latencies = append(latencies, local...)
			errs += localErrs
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return CommitsResult{}, err
	}
	r := CommitsResult{Clients: cfg.Clients, Commits: len(latencies), Errors: errs, Elapsed: cfg.Duration}
	if len(latencies) == 0 {
		return r, ErrNoCommits
	}
	slices.Sort(latencies)
	r.P50, r.P99, r.Max = quantile(latencies, 0.50), quantile(latencies, 0.99), latencies[len(latencies)-1]
	return r, nil
}

// quantile is the nearest-rank q-quantile of sorted, which is not empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

const (
	// commitGrace is how long a commit started before the end of the
	// timed window may take and still count.
	commitGrace = 10 * time.Second
	// errorPause is how long a client waits after a failed commit.
	errorPause = 10 * time.Millisecond
	// topicWait bounds the wait for the benchmark's topic to appear.
	topicWait = 30 * time.Second
)

// CommitOffset commits offset for partition 0 of topic to group as a
// group admin does (generation -1, no member) and returns the error the
// partition got, if any. The benchmarks of package e2e use it too.
func CommitOffset(ctx context.Context, cl *kgo.Client, group, topic string, topicID [16]byte, offset int64) error {
	return commitPartition(ctx, cl, group, topic, topicID, 0, offset)
}

// commitPartition is CommitOffset of any partition.
func commitPartition(ctx context.Context, cl *kgo.Client, group, topic string, topicID [16]byte, partition int32, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("bench: commit answered %d topics", len(resp.Topics))
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// ensureTopic creates topic with one partition unless it exists, and
// returns its id once the cluster's metadata has it.
func ensureTopic(ctx context.Context, adm *kadm.Client, topic string) ([16]byte, error) {
	return ensureTopicPartitions(ctx, adm, topic, 1)
}

// ensureTopicPartitions is ensureTopic of a topic of partitions
// partitions; one that exists with fewer is an error.
func ensureTopicPartitions(ctx context.Context, adm *kadm.Client, topic string, partitions int32) ([16]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, topicWait)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return [16]byte{}, fmt.Errorf("bench: create topic %s: %w", topic, err)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			td, ok := md.Topics[topic]
			switch {
			case !ok:
				err = errors.New("not in the metadata")
			case td.Err != nil:
				err = td.Err
			case len(td.Partitions) == 0:
				err = errors.New("no partitions in the metadata")
			case len(td.Partitions) < int(partitions):
				return [16]byte{}, fmt.Errorf("bench: topic %s has %d partitions, %d needed; name another --topic", topic, len(td.Partitions), partitions)
			default:
				return [16]byte(td.ID), nil
			}
		}
		select {
		case <-ctx.Done():
			return [16]byte{}, fmt.Errorf("bench: topic %s not usable after %v: %w", topic, topicWait, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
