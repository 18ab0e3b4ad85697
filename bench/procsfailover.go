package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/groups"
)

// FailoverConfig is one failover measurement on processes
// (ProcsFailover).
type FailoverConfig struct {
	// Trials is how many nodes are killed, one after the other (3 by
	// default).
	Trials int
	// Topic is the topic committed to (created with one partition);
	// Prefix names the groups.
	Topic, Prefix string
	// SpreadBound bounds the wait, after each restart, until leadership
	// is spread again (3 minutes by default).
	SpreadBound time.Duration
}

// FailoverResult is what ProcsFailover measured.
type FailoverResult struct {
	Trials int
	// Victims is the node killed in each trial.
	Victims []int
	// Shards holds, for every shard a killed node led, in every trial,
	// the time from the kill until a commit to a group of that shard
	// succeeded; sorted.
	Shards   []time.Duration
	P50, Max time.Duration
}

const (
	// failoverBound is how long a shard may take to accept commits again
	// after its leader was killed before the measurement fails.
	failoverBound = time.Minute
	// failoverAttempt bounds one commit attempt; failoverPause is the
	// wait between two attempts for one shard.
	failoverAttempt = time.Second
	failoverPause   = 20 * time.Millisecond
)

// ProcsFailover measures leader failover on a running cluster of
// processes whose leadership is spread. Each trial picks the node leading
// the most group shards (from the status API), SIGKILLs it, and for every
// shard it led measures the time from the kill until a commit to a group
// of that shard (a group id groups.PartitionFor maps to it) succeeds
// through a fresh client seeded with the surviving nodes; then it
// restarts the node and waits until it is ready and leadership is spread
// again. Every attempt is a new kgo client making one try (no retries
// inside it: no coordinator cached from before the kill and no client
// backoff in the figure), failoverPause after the last; the figures are
// that precise. The shards are measured at once, one goroutine each.
func ProcsFailover(ctx context.Context, p *Procs, cfg FailoverConfig) (FailoverResult, error) {
	if cfg.Trials == 0 {
		cfg.Trials = 3
	}
	if cfg.SpreadBound == 0 {
		cfg.SpreadBound = 3 * time.Minute
	}
	if cfg.Topic == "" {
		cfg.Topic = "kcoord-bench-failover"
	}
	if cfg.Prefix == "" {
		cfg.Prefix = cfg.Topic
	}
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(p.Brokers()...), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		return FailoverResult{}, err
	}
	defer adminCl.Close()
	topicID, err := ensureTopic(ctx, kadm.NewClient(adminCl), cfg.Topic)
	if err != nil {
		return FailoverResult{}, err
	}
	r := FailoverResult{Trials: cfg.Trials}
	for trial := range cfg.Trials {
		st, err := p.Status(ctx)
		if err != nil {
			return r, err
		}
		n := GroupShards(st)
		victim, led := busiest(st)
		if len(led) == 0 {
			return r, fmt.Errorf("bench: no node leads a group shard (%s)", leadsString(st))
		}
		shardGroup := map[int32]string{}
		for _, sh := range led {
			shardGroup[sh] = groupOfShard(cfg.Prefix, sh, int32(n))
			// The commit path works before the kill.
			if err := CommitOffset(ctx, adminCl, shardGroup[sh], cfg.Topic, topicID, 1); err != nil {
				return r, fmt.Errorf("bench: commit to %s before the kill: %w", shardGroup[sh], err)
			}
		}
		var survivors []string
		for i := 1; i <= p.Nodes(); i++ {
			if i != victim {
				survivors = append(survivors, p.KafkaAddr(i))
			}
		}
		took, err := killAndMeasure(ctx, p, victim, survivors, shardGroup, cfg.Topic, topicID, int64(trial+2))
		if err != nil {
			return r, err
		}
		r.Victims = append(r.Victims, victim)
		r.Shards = append(r.Shards, took...)
		if _, err := p.Restart(ctx, victim); err != nil {
			return r, err
		}
		sctx, cancel := context.WithTimeout(ctx, cfg.SpreadBound)
		err = p.WaitLeadersSpread(sctx)
		cancel()
		if err != nil {
			return r, err
		}
		p.cfg.Logger.Info("failover trial", "trial", trial+1, "killed", victim, "shards", len(took),
			"slowest", slices.Max(took).Round(time.Millisecond))
	}
	slices.Sort(r.Shards)
	r.P50, r.Max = quantile(r.Shards, 0.5), r.Shards[len(r.Shards)-1]
	return r, nil
}

// killAndMeasure SIGKILLs node victim and returns, for each shard of
// shardGroup, the time from the kill until a commit of offset to its
// group succeeded through a fresh client seeded with survivors.
func killAndMeasure(ctx context.Context, p *Procs, victim int, survivors []string, shardGroup map[int32]string, topic string, topicID [16]byte, offset int64) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, failoverBound)
	defer cancel()
	t0 := time.Now()
	if err := p.Kill(victim); err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		took []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	for shard, group := range shardGroup {
		wg.Go(func() {
			var last error
			for ctx.Err() == nil {
				if last = commitFresh(ctx, survivors, group, topic, topicID, offset); last == nil {
					mu.Lock()
					took = append(took, time.Since(t0))
					mu.Unlock()
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(failoverPause):
				}
			}
			mu.Lock()
			errs = append(errs, fmt.Errorf("bench: shard %d (group %s) took no commit within %v of node %d's kill: %w", shard, group, failoverBound, victim, last))
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return took, nil
}

// commitFresh commits offset to group through a new client seeded with
// seeds, which makes one try.
func commitFresh(ctx context.Context, seeds []string, group, topic string, topicID [16]byte, offset int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(0), kgo.DialTimeout(failoverAttempt))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, failoverAttempt)
	defer cancel()
	return CommitOffset(ctx, cl, group, topic, topicID, offset)
}

// busiest is the node leading the most group shards in st (the lowest id
// of those tied) and the group shards it leads.
func busiest(st cluster.ClusterStatus) (int, []int32) {
	node, most := 0, -1
	for _, n := range st.Nodes {
		if n.Leads > most {
			node, most = int(n.ID), n.Leads
		}
	}
	var led []int32
	for _, sh := range st.Shards {
		if sh.Shard != cluster.MetaShard && int(sh.Leader) == node {
			led = append(led, sh.Shard)
		}
	}
	return node, led
}

// groupOfShard is the first of prefix-shard-0, prefix-shard-1, ... that
// Kafka's partitionFor maps to shard of n.
func groupOfShard(prefix string, shard, n int32) string {
	for k := 0; ; k++ {
		g := fmt.Sprintf("%s-%d-%d", prefix, shard, k)
		if groups.PartitionFor(g, n) == shard {
			return g
		}
	}
}
