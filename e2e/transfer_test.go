package e2e

import (
	"context"
	"fmt"
	"os/exec"
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
// old coordinator's NOT_COORDINATOR) is logged.
func TestLeadershipTransferIsInvisibleToClients(t *testing.T) {
	t.Parallel()
	servers, seeds := startTestCluster(t)
	ctx := testContext(t, 90*time.Second)
	const topic, shard = "transfer-topic", 5
	createTopic(ctx, t, newAdmin(t, seeds[0]), topic, 6)
	waitTopicEverywhere(ctx, t, seeds[1:], topic, 6)

	var groups []*failoverGroup
	add := func(client string, start func(group string) failoverMember) {
		g := &failoverGroup{client: client, id: groupOnShard("transfer-"+client, shard)}
		for range 2 {
			g.members = append(g.members, start(g.id))
		}
		groups = append(groups, g)
	}
	add("kgo-coop", func(group string) failoverMember {
		return startDefaultKgo(ctx, t, seeds, group, topic, kgo.CooperativeStickyBalancer())
	})
	add("sarama", func(group string) failoverMember { return startDefaultSarama(ctx, t, seeds, group, topic) })
	add("kafka-go", func(group string) failoverMember { return startDefaultKafkaGo(ctx, t, seeds, group, topic) })
	if kcat, err := exec.LookPath("kcat"); err == nil {
		add("kcat", func(group string) failoverMember { return startKcat(ctx, t, kcat, seeds, group, topic) })
	}
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	for _, g := range groups {
		waitFor(ctx, t, g.client+" group Stable with every member", func(ctx context.Context) error {
			return stableWith(ctx, adm, g)
		})
	}
	time.Sleep(4 * time.Second) // the cooperative group's second rebalance; heartbeats flowing
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
	for _, g := range groups {
		waitFor(ctx, t, g.client+" group Stable after the transfer", func(ctx context.Context) error {
			return stableWith(ctx, adm, g)
		})
	}
	rebalanced, restarted := before.compare(groups)
	if len(restarted) > 0 {
		t.Logf("sessions restarted in the same generation (client behaviour): %v", restarted)
	}
	if len(rebalanced) > 0 {
		t.Fatalf("groups rebalanced across the transfer: %v", rebalanced)
	}
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
