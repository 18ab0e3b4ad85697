package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/server"
	"github.com/kcoord/kcoord/transport"
)

// TestFailoverKeepsCommitsAndGenerations runs franz-go groups against an
// in-process three-node cluster, kills the node coordinating them (no
// leadership transfer, as a crash) and checks what users rely on: every
// acknowledged commit is still there, live members keep their member ids
// and generation (no rebalance callbacks fire), and the groups accept
// commits again soon after (the time is logged; election timeouts are in
// server.TestClusterConfig).
func TestFailoverKeepsCommitsAndGenerations(t *testing.T) {
	t.Parallel()
	servers, seeds := startTestCluster(t)
	ctx := testContext(t, 90*time.Second)
	adm := newAdmin(t, seeds[0])
	const topic, group = "failover-topic", "failover-group"
	createTopic(ctx, t, adm, topic, groupPartitions)

	members := make([]*kgoMember, 3)
	watch := &dialWatch{}
	for i := range members {
		// Each member bootstraps from a different node: routing must work
		// from any of them.
		// The session timeout must outlast the failover plus the client's
		// retry backoff (Kafka's default is 45s), or the client gives up on
		// its own membership and rejoins.
		members[i] = startKgoMember(ctx, t, seeds[i], group, topic, i, kgo.CooperativeStickyBalancer(), kgo.SeedBrokers(seeds[i]), kgo.SessionTimeout(15*time.Second), kgo.WithLogger(watch.logger(kgo.BasicLogger(logWriter(t, fmt.Sprintf("kgo-%d", i)), kgo.LogLevelInfo, nil))))
	}
	waitFor(ctx, t, "three members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, "cooperative-sticky", kgoView(members))
	})
	// Let the cooperative protocol's follow-up rebalance settle before
	// counting callbacks.
	time.Sleep(time.Second)
	idsBefore := memberIDs(members)
	callbacksBefore := callbackCount(members)

	// Acknowledged commits, round after round.
	acked := map[int32]int64{}
	for round := range 3 {
		for i, m := range members {
			offsets := map[int32]int64{}
			for _, p := range m.owned.list() {
				offsets[p] = commitOffsetFor(i, p, round)
			}
			if err := m.commit(ctx, topic, offsets); err != nil {
				t.Fatalf("commit before failover: %v", err)
			}
			for p, o := range offsets {
				acked[p] = o
			}
		}
	}

	victim := coordinatorIndex(ctx, t, adm, group, servers)
	t.Logf("killing node %d, the group's coordinator", victim+1)
	killed := time.Now()
	if err := servers[victim].Kill(); err != nil {
		t.Fatal(err)
	}
	survivor := seeds[(victim+1)%3]

	// The shard's new leader accepts a member's commit in its generation
	// within twice the election timeout (the follower timeout plus an
	// election round: server.TestClusterConfig's 500ms + 500ms).
	memberID, generation := members[0].cl.GroupMetadata()
	probe := members[0].owned.list()[0]
	took := rawCommitUntilAccepted(ctx, t, survivor, group, memberID, generation, topic, probe)
	acked[probe] = rawProbeOffset
	t.Logf("the group accepted a commit %v after the kill", took)
	if limit := 2 * (500 + 500) * time.Millisecond; took > limit {
		t.Errorf("failover took %v, more than twice the election timeout (%v)", took, limit)
	}

	// The members' own clients commit again (through their retries).
	survivorAdm := newAdmin(t, survivor)
	for i, m := range members {
		offsets := map[int32]int64{}
		for _, p := range m.owned.list() {
			offsets[p] = commitOffsetFor(i, p, 9)
		}
		for {
			err := m.commit(ctx, topic, offsets)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("member %d never committed after the failover: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if i == 0 {
			t.Logf("franz-go's first commit accepted %v after the kill", time.Since(killed))
		}
		for p, o := range offsets {
			acked[p] = o
		}
	}

	got, err := fetchOffsets(ctx, survivorAdm, group)
	if err != nil {
		t.Fatal(err)
	}
	for p, o := range acked {
		if got[topic][p].Offset != o {
			t.Fatalf("partition %d: offset %d after failover, acknowledged %d", p, got[topic][p].Offset, o)
		}
	}
	if after := memberIDs(members); !slices.Equal(after, idsBefore) {
		t.Fatalf("member ids changed across the failover: %v -> %v", idsBefore, after)
	}
	switch after := callbackCount(members); {
	case watch.gaveUp.Load():
		// franz-go ends a classic member's session when a heartbeat
		// cannot even dial the dead coordinator; the member rejoins (with
		// its member id), and a rejoining leader forces a rebalance, in
		// Kafka as here. The client chose it; the cluster answered no
		// error.
		t.Logf("a franz-go member gave up on the dead coordinator before the election ended (client behaviour): %d callbacks", after-callbacksBefore)
	case after != callbacksBefore:
		t.Fatalf("the failover caused a rebalance: %d partition callbacks fired", after-callbacksBefore)
	}
	waitFor(ctx, t, "the group to be Stable on its new coordinator", func(ctx context.Context) error {
		return checkGroup(ctx, survivorAdm, group, topic, groupPartitions, "cooperative-sticky", kgoView(members))
	})
}

// startTestCluster starts three in-process servers and returns them with
// their Kafka addresses.
func startTestCluster(t testing.TB) ([]*server.Server, []string) {
	t.Helper()
	servers := server.StartTestCluster(t, 3, nil)
	var seeds []string
	for _, s := range servers {
		seeds = append(seeds, s.KafkaAddr().String())
	}
	return servers, seeds
}

func memberIDs(members []*kgoMember) []string {
	var ids []string
	for _, m := range members {
		id, _ := m.cl.GroupMetadata()
		ids = append(ids, id)
	}
	return ids
}

func callbackCount(members []*kgoMember) int64 {
	var n int64
	for _, m := range members {
		n += m.callbacks.Load()
	}
	return n
}

// coordinatorIndex finds which server coordinates group.
func coordinatorIndex(ctx context.Context, t *testing.T, adm *kadm.Client, group string, servers []*server.Server) int {
	t.Helper()
	resp := adm.FindGroupCoordinators(ctx, group)
	c, ok := resp[group]
	if !ok || c.Err != nil {
		t.Fatalf("find coordinator: %+v", c)
	}
	for i, s := range servers {
		if s.Node().ID() == c.NodeID {
			return i
		}
	}
	t.Fatalf("coordinator %d is not a known node", c.NodeID)
	return -1
}

// rawProbeOffset is what the raw commit after the kill stores.
const rawProbeOffset = 424242

// rawCommitUntilAccepted asks a surviving node for the group's coordinator
// and sends it an OffsetCommit as the member, every 10ms, until one is
// accepted; it returns how long that took from the first try.
func rawCommitUntilAccepted(ctx context.Context, t *testing.T, survivor, group, memberID string, generation int32, topic string, partition int32) time.Duration {
	t.Helper()
	start := time.Now()
	for ctx.Err() == nil {
		if tryRawCommit(ctx, survivor, group, memberID, generation, topic, partition) == nil {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no commit accepted after the failover")
	return 0
}

func tryRawCommit(ctx context.Context, survivor, group, memberID string, generation int32, topic string, partition int32) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	found, err := findCoordinator(ctx, survivor, group)
	if err != nil {
		return err
	}
	cc, err := transport.Dial(ctx, net.JoinHostPort(found.Host, strconv.Itoa(int(found.Port))))
	if err != nil {
		return err
	}
	defer cc.Close()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, memberID, generation
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, rawProbeOffset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.SetVersion(8)
	r, err := cc.Do(ctx, req)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
}

// findCoordinator asks addr which node coordinates group (FindCoordinator
// v3), and returns its answer or its error code as an error.
func findCoordinator(ctx context.Context, addr, group string) (*kmsg.FindCoordinatorResponse, error) {
	c, err := transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = group
	fc.SetVersion(3)
	r, err := c.Do(ctx, fc)
	if err != nil {
		return nil, err
	}
	found := r.(*kmsg.FindCoordinatorResponse)
	return found, kerr.ErrorForCode(found.ErrorCode)
}

// dialWatch notices franz-go ending a group session because a heartbeat
// could not dial the (dead) coordinator.
type dialWatch struct{ gaveUp atomic.Bool }

func (w *dialWatch) logger(next kgo.Logger) kgo.Logger { return dialWatchLogger{next, w} }

type dialWatchLogger struct {
	kgo.Logger
	w *dialWatch
}

func (l dialWatchLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if msg == "heartbeat errored" && strings.Contains(fmt.Sprint(keyvals...), "unable to dial") {
		l.w.gaveUp.Store(true)
	}
	l.Logger.Log(level, msg, keyvals...)
}

// clientGaveUp reports whether kgo's group events show a heartbeat that
// could not dial the coordinator.
func clientGaveUp(events []string) bool {
	for _, e := range events {
		if strings.Contains(e, "heartbeat errored") && strings.Contains(e, "unable to dial") {
			return true
		}
	}
	return false
}
