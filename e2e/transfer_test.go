package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/server"
)

// TestLeadershipTransferIsInvisibleToClients: the balance loop moves a
// shard's leadership with Raft's leadership transfer while groups of every
// client library run on it, with their default settings. No group's
// generation may change; a client that restarts its session in the same
// generation (kafka-go ends a generation on any heartbeat error, here the
// old coordinator's NOT_COORDINATOR) is logged. BenchmarkInvisibleTransfer
// runs many trials.
func TestLeadershipTransferIsInvisibleToClients(t *testing.T) {
	t.Parallel()
	res := runTransferTrial(testContext(t, 120*time.Second), t)
	if len(res.restarted) > 0 {
		t.Logf("sessions restarted in the same generation (client behaviour): %v", res.restarted)
	}
	if len(res.rebalanced) > 0 {
		t.Fatalf("%d of %d groups rebalanced across the transfer: %v", len(res.rebalanced), res.groups, res.rebalanced)
	}
}

// runTransferTrial runs the trial's groups on a fresh in-process
// three-node cluster, moves their shard's leadership away with the
// transfer the balance loop uses, and reports which groups rebalanced or
// restarted sessions. The cluster is stopped before it returns.
func runTransferTrial(ctx context.Context, t testing.TB) failoverTrial {
	t.Helper()
	servers, seeds := startTestCluster(t)
	defer func() {
		for _, s := range servers {
			_ = s.Kill()
		}
	}()
	const topic, shard = "transfer-topic", 5
	createTopic(ctx, t, newAdmin(t, seeds[0]), topic, 6)
	waitTopicEverywhere(ctx, t, seeds[1:], topic, 6)
	groups := startTrialGroups(ctx, t, seeds, topic, shard)
	defer closeGroups(groups)
	before := snapshotGroups(groups)

	var leader *server.Server
	for _, s := range servers {
		if s.Node().Shard(shard).IsLeader() {
			leader = s
		}
	}
	if leader == nil {
		t.Fatal("no leader of the groups' shard")
	}
	if err := leader.Node().Shard(shard).Raft.LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	t.Logf("moved shard %d's leadership away from node %d", shard, leader.Node().ID())
	time.Sleep(8 * time.Second) // past every client's 3 s heartbeat, twice
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	for _, g := range groups {
		waitFor(ctx, t, g.client+" group Stable after the transfer", func(ctx context.Context) error {
			return stableWith(ctx, adm, g)
		})
	}
	res := failoverTrial{groups: len(groups)}
	res.rebalanced, res.restarted = before.compare(groups)
	return res
}

// stableWith checks that DescribeGroups answers g Stable with all its
// members, each of which has had an assignment.
func stableWith(ctx context.Context, adm *kadm.Client, g *failoverGroup) error {
	d, err := adm.DescribeGroups(ctx, g.id)
	if err != nil {
		return err
	}
	dg := d[g.id]
	if dg.Err != nil {
		return dg.Err
	}
	if dg.State != "Stable" || len(dg.Members) != len(g.members) {
		return fmt.Errorf("%s with %d members", dg.State, len(dg.Members))
	}
	for i, n := range g.assignments() {
		if n == 0 {
			return fmt.Errorf("member %d has no assignment yet", i)
		}
	}
	return nil
}
