package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/server"
)

const (
	// shardsProbeRetry is how long a probe waits between attempts, in the
	// client's own retries (its coordinator lookups) and between commits:
	// the resolution of a failover time.
	shardsProbeRetry = 20 * time.Millisecond
	// shardsProbeAttempt bounds one commit attempt with the client's
	// retries in it.
	shardsProbeAttempt = 2 * time.Second
)

// failover kills the live node leading the most group shards, without
// handing its leaderships over, and times for each shard it led how long
// until a commit to a group of that shard is acknowledged: by the shard's
// new leader, which a franz-go client on the surviving nodes finds by
// looking the group's coordinator up again. One goroutine per shard
// probes; failover returns when every shard answered, or with an error
// when one did not within phase.
func (c *shardsCluster) failover(ctx context.Context, phase time.Duration) (ShardsFailover, error) {
	var victim *server.Server
	most := -1
	for _, s := range c.servers() {
		if l := leads(s); l > most {
			victim, most = s, l
		}
	}
	id := victim.Node().ID()
	probes, err := probeGroups(int32(c.shards))
	if err != nil {
		return ShardsFailover{}, err
	}
	var survivors []string
	for _, s := range c.servers() {
		if s != victim {
			survivors = append(survivors, s.KafkaAddr().String())
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(survivors...),
		kgo.RetryBackoffFn(func(int) time.Duration { return shardsProbeRetry }), kgo.RetryTimeout(phase))
	if err != nil {
		return ShardsFailover{}, err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, phase)
	defer cancel()
	topicID, err := ensureTopic(pctx, kadm.NewClient(cl), shardsTopic)
	if err != nil {
		return ShardsFailover{}, err
	}
	// Each probe's coordinator is in the client's cache before the kill,
	// as a running consumer's would be.
	for _, sh := range ledBy(victim) {
		if _, err := commitUntilAcked(pctx, cl, probes[sh], topicID, 1); err != nil {
			return ShardsFailover{}, fmt.Errorf("shard %d before the kill: %w", sh, err)
		}
	}

	led := ledBy(victim) // again: balance may have moved one meanwhile
	if len(led) == 0 {
		return ShardsFailover{}, fmt.Errorf("node %d leads no shard any more", id)
	}
	t0 := time.Now()
	c.kill(id)
	took := make([]time.Duration, len(led))
	errs := make([]error, len(led))
	var wg sync.WaitGroup
	for i, sh := range led {
		wg.Go(func() {
			at, err := commitUntilAcked(pctx, cl, probes[sh], topicID, 2)
			took[i] = at.Sub(t0)
			if err != nil {
				errs[i] = fmt.Errorf("shard %d after the kill of node %d: %w", sh, id, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return ShardsFailover{}, err
	}
	slices.Sort(took)
	return ShardsFailover{Node: id, Shards: len(led), P50: quantile(took, 0.5), Max: took[len(took)-1]}, nil
}

// ledBy lists the group shards s leads, by its own Raft instances.
func ledBy(s *server.Server) []int32 {
	var out []int32
	for _, sh := range s.Node().Shards() {
		if sh.IsLeader() {
			out = append(out, sh.ID)
		}
	}
	return out
}

// commitUntilAcked commits rising offsets from offset to group, one
// attempt at a time, shardsProbeRetry apart, until one is acknowledged, and
// returns when it was; it fails when ctx ends first.
func commitUntilAcked(ctx context.Context, cl *kgo.Client, group string, topicID [16]byte, offset int64) (time.Time, error) {
	for ; ; offset++ {
		actx, cancel := context.WithTimeout(ctx, shardsProbeAttempt)
		err := CommitOffset(actx, cl, group, shardsTopic, topicID, offset)
		cancel()
		if err == nil {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Now(), fmt.Errorf("no commit acknowledged (last error: %v): %w", err, ctx.Err())
		case <-time.After(shardsProbeRetry):
		}
	}
}

// probeGroups names one group per shard of shards: the first of
// kcoord-failover-0, -1, ... that Kafka's partitionFor puts there.
func probeGroups(shards int32) (map[int32]string, error) {
	out := make(map[int32]string, shards)
	for i := 0; len(out) < int(shards); i++ {
		if i == probeSearch {
			return nil, fmt.Errorf("bench: no group of %d names found for each of %d shards", probeSearch, shards)
		}
		g := fmt.Sprintf("kcoord-failover-%d", i)
		if p := groups.PartitionFor(g, shards); out[p] == "" {
			out[p] = g
		}
	}
	return out, nil
}

// probeSearch bounds probeGroups' search (a few hundred names cover 50
// shards).
const probeSearch = 1 << 20
