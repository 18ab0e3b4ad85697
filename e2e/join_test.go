package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// procMetric reads one metric (summed over labels) from a process's
// /metrics.
func procMetric(ctx context.Context, p *kcoordProc, name string) (float64, error) {
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
	v, ok := dcMetric(string(body), name)
	if !ok {
		return 0, fmt.Errorf("no %s in /metrics", name)
	}
	return v, nil
}

// kcoordCLI runs the kcoord binary with args and returns its output.
func kcoordCLI(ctx context.Context, t testing.TB, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, kcoordBinary(t), args...).CombinedOutput()
	return string(out), err
}

// TestNodesAddedWithJoinAndRemovedAsProcesses: a fourth kcoord process
// started with only --join next to a running three-node cluster, as an
// operator adding a node would, joins that cluster (it does not bootstrap
// one of its own), takes its placement share of replicas and leads its
// share of shards. "kcoord cluster remove-node 2" then drains node 2 to no
// replica; killing it afterwards loses no acknowledged commit, and a
// franz-go group committing through all of it never rebalances.
func TestNodesAddedWithJoinAndRemovedAsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four kcoord processes")
	}
	ctx := testContext(t, 6*time.Minute)
	config := []string{
		"-c", "group.min.session.timeout.ms=1000", // the members' 3 s sessions
		"-c", "offsets.topic.num.partitions=50", // Kafka's default and 0.1.0's, set as an operator of such a cluster runs it
	}
	procs := startProcCluster(ctx, t, 3, config...)
	const topic, partitions = "elastic", 4
	createTopic(ctx, t, newAdmin(t, procs[0].kafka), topic, partitions)

	// A franz-go group, seeded with nodes 1 and 3 (node 2 goes away).
	group := "elastic-group"
	var members []*kgoMember
	for i := range 2 {
		members = append(members, startKgoMember(ctx, t, procs[0].kafka, group, topic, i, kgo.RangeBalancer(),
			kgo.SeedBrokers(procs[0].kafka, procs[2].kafka)))
	}
	adm := newAdmin(t, procs[0].kafka)
	waitFor(ctx, t, "two franz-go members to own the partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, partitions, "range", kgoView(members))
	})
	time.Sleep(3 * heartbeatInterval)
	before := dcSnapshot(members)

	// Raw commits go on throughout, each group's last acknowledged offset
	// recorded.
	acked := map[string]int64{}
	var ackedMu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for off := int64(1); ; off++ {
			for g := range 12 {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("elastic-raw-%d", g)
				addr, _, err := rawCoordinator(ctx, procs[0].kafka, name)
				if err == nil && rawSimpleCommit(ctx, addr, name, topic, 0, off) == nil {
					ackedMu.Lock()
					acked[name] = off
					ackedMu.Unlock()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	fourth := newProc(t)
	fourth.extra = append([]string{"--node-id", "4", "--join", procs[0].gossip}, config...)
	fourth.start(ctx)
	// Node 4's share among four nodes: about 3/4 of the 50 shards' replicas
	// (rendezvous placement gives it between 30 and 45, 38 on average) and
	// floor or ceil of 50/4 leaderships, within two minutes.
	joinCtx, joinCancel := context.WithTimeout(ctx, 2*time.Minute)
	waitFor(joinCtx, t, "the joined node to hold replicas and lead its share", func(ctx context.Context) error {
		held, err := procMetric(ctx, fourth, "kcoord_shards")
		if err != nil {
			return err
		}
		led, err := procMetric(ctx, fourth, "kcoord_shards_led")
		if err != nil {
			return err
		}
		if held < 30 || held > 45 || led < 12 || led > 13 {
			return fmt.Errorf("node 4 holds %v replicas and leads %v shards", held, led)
		}
		return nil
	})
	joinCancel()
	out, err := kcoordCLI(ctx, t, "cluster", "status", "--http-addr", fourth.http)
	t.Logf("kcoord cluster status after the join:\n%s", out)
	if err != nil || !strings.Contains(out, "0 under-replicated") {
		t.Fatalf("status after the join: %v", err)
	}

	// Remove node 2 through node 3 (any node takes it).
	if out, err := kcoordCLI(ctx, t, "cluster", "remove-node", "2", "--http-addr", procs[2].http); err != nil {
		t.Fatalf("remove-node 2: %v\n%s", err, out)
	}
	waitFor(ctx, t, "node 2 to hold no replica", func(ctx context.Context) error {
		held, err := procMetric(ctx, procs[1], "kcoord_shards")
		if err != nil {
			return err
		}
		if held != 0 {
			out, _ := kcoordCLI(ctx, t, "cluster", "status", "--http-addr", procs[0].http)
			return fmt.Errorf("node 2 holds %v replicas:\n%s", held, out)
		}
		return nil
	})
	waitFor(ctx, t, "status to show node 2 drained", func(ctx context.Context) error {
		out, err := kcoordCLI(ctx, t, "cluster", "status", "--json", "--http-addr", procs[0].http)
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"state": "drained"`) || !strings.Contains(out, `"moving": 0`) {
			return fmt.Errorf("not drained yet")
		}
		return nil
	})
	procs[1].kill9()
	close(stop)
	wg.Wait()

	// Every acknowledged commit is there, read through each survivor.
	for _, p := range []*kcoordProc{procs[0], procs[2], fourth} {
		for name, off := range acked {
			waitFor(ctx, t, fmt.Sprintf("%s's offset through %s", name, p.kafka), func(ctx context.Context) error {
				addr, _, err := rawCoordinator(ctx, p.kafka, name)
				if err != nil {
					return err
				}
				of := kmsg.NewPtrOffsetFetchRequest()
				of.SetVersion(7)
				of.Group = name
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic, rt.Partitions = topic, []int32{0}
				of.Topics = append(of.Topics, rt)
				r, err := rawDo(ctx, addr, of)
				if err != nil {
					return err
				}
				resp := r.(*kmsg.OffsetFetchResponse)
				if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
					return err
				}
				if got := resp.Topics[0].Partitions[0].Offset; got < off {
					t.Fatalf("%s: offset %d read through %s, %d was acknowledged", name, got, p.kafka, off)
				}
				return nil
			})
		}
	}
	t.Logf("%d groups' acknowledged offsets readable through every survivor", len(acked))

	// The franz-go group went through the join, the moves, the removal and
	// the kill in its generation.
	// A fresh admin client: kgo keeps the coordinators it looked up.
	survivors := dcAdminSeeds(t, []string{procs[0].kafka, procs[2].kafka, fourth.kafka})
	waitFor(ctx, t, "the group Stable with its members", func(ctx context.Context) error {
		return checkGroup(ctx, survivors, group, topic, partitions, "range", kgoView(members))
	})
	if after := dcSnapshot(members); !slices.Equal(before, after) {
		t.Errorf("the group rebalanced: %+v -> %+v", before, after)
	}
}
