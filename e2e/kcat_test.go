package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKcatJoinsAFranzGoGroup runs kcat's balanced consumer (librdkafka) and a
// franz-go member in one group: both must end with disjoint assignments that
// cover the topic. kcat comes from Debian's package, which .ci/run installs.
func TestKcatJoinsAFranzGoGroup(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat; .ci/run installs it)")
	}
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	addr := startServer(t)
	adm := newAdmin(t, addr)
	const topic, group, partitions = "kcat-topic", "kcat-group", 12
	createTopic(ctx, t, adm, topic, partitions)

	cmd := exec.CommandContext(ctx, kcat, "-b", addr, "-G", group, "-q",
		"-X", "partition.assignment.strategy=range",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
		"-X", "topic.metadata.refresh.interval.ms=1000",
		topic)
	cmd.Stdout, cmd.Stderr = logWriter(t, "kcat"), logWriter(t, "kcat")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	cl := newClient(t, addr,
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
	)
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()

	waitFor(ctx, t, "kcat and franz-go share the partitions", func(ctx context.Context) error {
		return checkSharedGroup(ctx, t, addr, group, topic, partitions, 2)
	})
}

// checkSharedGroup describes the group: Stable with n members of protocol
// range, assignments disjoint and covering every partition.
func checkSharedGroup(ctx context.Context, t testing.TB, addr, group, topic string, partitions int32, n int) error {
	described, err := newAdmin(t, addr).DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	g := described[group]
	if g.State != "Stable" || len(g.Members) != n || g.Protocol != "range" {
		return fmt.Errorf("group %s with %d members, protocol %q", g.State, len(g.Members), g.Protocol)
	}
	var all []int32
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return fmt.Errorf("member %s: undecodable assignment", m.MemberID)
		}
		owned := 0
		for _, at := range a.Topics {
			if at.Topic == topic {
				all = append(all, at.Partitions...)
				owned += len(at.Partitions)
			}
		}
		if owned == 0 {
			return fmt.Errorf("member %s (%s) owns nothing", m.MemberID, m.ClientID)
		}
	}
	slices.Sort(all)
	want := make([]int32, partitions)
	for i := range want {
		want[i] = int32(i)
	}
	if !slices.Equal(all, want) {
		return fmt.Errorf("assigned partitions %v, want each of 0..%d once", all, partitions-1)
	}
	return nil
}
