package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shardsLed reads kcoord_shards_led from a process's /metrics.
func shardsLed(ctx context.Context, p *kcoordProc) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.http+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	led, ok := dcMetric(string(body), "kcoord_shards_led")
	if !ok {
		return 0, fmt.Errorf("no kcoord_shards_led in /metrics")
	}
	return led, nil
}

// TestNodeAddedWithJoinAloneJoinsTheRunningCluster starts a fourth kcoord
// process with only --join next to a running three-node cluster, as an
// operator adding a node would. It must join that cluster, not bootstrap
// one of its own: it leads no shard, every node (itself included) names
// one of the three as each group's coordinator, and a commit made through
// it is the cluster's.
func TestNodeAddedWithJoinAloneJoinsTheRunningCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four kcoord processes")
	}
	ctx := testContext(t, 3*time.Minute)
	procs := startProcCluster(ctx, t, 3)
	const topic = "joined"
	createTopic(ctx, t, newAdmin(t, procs[0].kafka), topic, 1)

	fourth := newProc(t)
	fourth.extra = []string{"--node-id", "4", "--join", procs[0].gossip}
	fourth.start(ctx)

	// Give a would-be second cluster time to elect itself: the bug's
	// fourth node led every shard within a second of starting.
	time.Sleep(2 * time.Second)
	if led, err := shardsLed(ctx, fourth); err != nil || led != 0 {
		t.Fatalf("the joined node leads %v shards (%v), want 0", led, err)
	}
	for i := range 32 {
		group := fmt.Sprintf("joined-%d", i)
		for _, p := range append(procs, fourth) {
			var node int32
			waitFor(ctx, t, "coordinator of "+group+" from "+p.kafka, func(ctx context.Context) error {
				var err error
				_, node, err = rawCoordinator(ctx, p.kafka, group)
				return err
			})
			if node < 1 || node > 3 {
				t.Fatalf("%s asked %s: coordinator node %d, not one of the cluster's three", group, p.kafka, node)
			}
		}
	}

	// A commit routed through the new node is read back through an old one.
	const group = "joined-commit"
	waitFor(ctx, t, "commit through the joined node", func(ctx context.Context) error {
		addr, _, err := rawCoordinator(ctx, fourth.kafka, group)
		if err != nil {
			return err
		}
		return rawSimpleCommit(ctx, addr, group, topic, 0, 77)
	})
	addr, _, err := rawCoordinator(ctx, procs[0].kafka, group)
	if err != nil {
		t.Fatal(err)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(7)
	of.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	of.Topics = append(of.Topics, rt)
	r, err := rawDo(ctx, addr, of)
	if err != nil {
		t.Fatal(err)
	}
	resp := r.(*kmsg.OffsetFetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].Partitions[0].Offset; got != 77 {
		t.Fatalf("offset read through node 1: %d, want 77 (committed through the joined node)", got)
	}
	if led, err := shardsLed(ctx, fourth); err != nil || led != 0 {
		t.Fatalf("the joined node leads %v shards (%v), want 0", led, err)
	}
}
