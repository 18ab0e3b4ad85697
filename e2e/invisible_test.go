package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/groups"
)

// The failover trial: consumer groups of every client library kcoord
// supports, each with the settings its users run (the library's defaults,
// and franz-go also with heartbeat 1 s / session 10 s), all on one shard of
// a three-node cluster of `kcoord serve` processes; then the shard's leader
// is killed (SIGKILL) or stopped (SIGTERM). The trial counts the groups
// that rebalanced (from each client's own assign callbacks), and times each
// member's first heartbeat on the new coordinator (from that node's log).

// failoverShards is the processes' offsets.topic.num.partitions (newProc).
const failoverShards = 8

// failoverMember is one consumer group member under test.
type failoverMember interface {
	// assignments counts the assignments the client delivered so far (each
	// rebalance delivers one to every member).
	assignments() int64
	// generation is the generation of the latest assignment (-1 where the
	// client does not tell: kcat).
	generation() int32
	close()
}

// failoverGroup is a group of one client library's members.
type failoverGroup struct {
	client  string
	id      string
	members []failoverMember
}

func (g *failoverGroup) assignments() []int64 {
	out := make([]int64, len(g.members))
	for i, m := range g.members {
		out[i] = m.assignments()
	}
	return out
}

func (g *failoverGroup) generations() []int32 {
	out := make([]int32, len(g.members))
	for i, m := range g.members {
		out[i] = m.generation()
	}
	return out
}

// groupsSnapshot is every group's assignment counts and generations.
type groupsSnapshot struct {
	assignments [][]int64
	generations [][]int32
}

func snapshotGroups(groups []*failoverGroup) groupsSnapshot {
	var s groupsSnapshot
	for _, g := range groups {
		s.assignments = append(s.assignments, g.assignments())
		s.generations = append(s.generations, g.generations())
	}
	return s
}

// compare lists the groups that rebalanced since the snapshot (a member's
// generation changed; for kcat, which does not tell its generation, a new
// assignment) and those some of whose members restarted their sessions in
// the same generation.
func (s groupsSnapshot) compare(groups []*failoverGroup) (rebalanced, restarted []string) {
	for i, g := range groups {
		after, afterGen := g.assignments(), g.generations()
		before, beforeGen := s.assignments[i], s.generations[i]
		switch {
		case !slices.Equal(afterGen, beforeGen) || (afterGen[0] < 0 && !slices.Equal(after, before)):
			rebalanced = append(rebalanced, fmt.Sprintf("%s (generations %v -> %v, assignments %v -> %v)", g.client, beforeGen, afterGen, before, after))
		case !slices.Equal(after, before):
			restarted = append(restarted, fmt.Sprintf("%s (assignments %v -> %v in generation %d)", g.client, before, after, afterGen[0]))
		}
	}
	return rebalanced, restarted
}

// failoverTrial is what one trial measured.
type failoverTrial struct {
	groups     int
	rebalanced []string        // groups whose generation changed (kcat: whose members got a new assignment)
	restarted  []string        // groups some of whose members restarted their session in the same generation
	resumed    []time.Duration // kill to each member's first heartbeat on the new coordinator
	missing    int             // members not seen heartbeating on the new coordinator
	elected    time.Duration   // kill to the new coordinator's activation
	reasons    []string        // why the survivors started rebalances after the fault (their log)
}

// waitTopicEverywhere waits until every node at addrs lists topic with n
// partitions: librdkafka rereads a topic it was told is unknown only every
// 5 minutes, so no client may ask a node that has not applied the creation.
func waitTopicEverywhere(ctx context.Context, t testing.TB, addrs []string, topic string, n int) {
	t.Helper()
	for _, addr := range addrs {
		adm := newAdmin(t, addr)
		waitFor(ctx, t, "topic listed by "+addr, func(ctx context.Context) error {
			tds, err := adm.ListTopics(ctx, topic)
			if err != nil {
				return err
			}
			if td := tds[topic]; td.Err != nil || len(td.Partitions) != n {
				return fmt.Errorf("topic %s: %v, %d partitions", topic, td.Err, len(td.Partitions))
			}
			return nil
		})
	}
}

// groupOnShard returns a group id starting with prefix that kcoord places on
// shard.
func groupOnShard(prefix string, shard int32) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if groups.PartitionFor(id, failoverShards) == shard {
			return id
		}
	}
}

// startTrialGroups starts the trial's groups on shard, two members each,
// every member bootstrapping from all seeds, and returns them once each
// group is Stable and heartbeating.
func startTrialGroups(ctx context.Context, t testing.TB, seeds []string, topic string, shard int32) []*failoverGroup {
	t.Helper()
	var groups []*failoverGroup
	add := func(client string, start func(group string) failoverMember) {
		g := &failoverGroup{client: client, id: groupOnShard("inv-"+client, shard)}
		for range 2 {
			g.members = append(g.members, start(g.id))
		}
		groups = append(groups, g)
	}
	add("kgo-eager", func(group string) failoverMember {
		return startDefaultKgo(ctx, t, seeds, group, topic, kgo.RangeBalancer())
	})
	add("kgo-coop", func(group string) failoverMember {
		return startDefaultKgo(ctx, t, seeds, group, topic, kgo.CooperativeStickyBalancer())
	})
	add("kgo-eager-1s", func(group string) failoverMember {
		return startDefaultKgo(ctx, t, seeds, group, topic, kgo.RangeBalancer(), kgo.HeartbeatInterval(time.Second), kgo.SessionTimeout(10*time.Second))
	})
	add("kgo-coop-1s", func(group string) failoverMember {
		return startDefaultKgo(ctx, t, seeds, group, topic, kgo.CooperativeStickyBalancer(), kgo.HeartbeatInterval(time.Second), kgo.SessionTimeout(10*time.Second))
	})
	add("sarama", func(group string) failoverMember { return startDefaultSarama(ctx, t, seeds, group, topic) })
	add("kafka-go", func(group string) failoverMember { return startDefaultKafkaGo(ctx, t, seeds, group, topic) })
	if kcat, err := exec.LookPath("kcat"); err == nil {
		add("kcat", func(group string) failoverMember { return startKcat(ctx, t, kcat, seeds, group, topic) })
	} else {
		t.Log("kcat is not installed: librdkafka is left out of the trial")
	}

	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	for _, g := range groups {
		waitFor(ctx, t, g.client+" group Stable with every member", func(ctx context.Context) error {
			return stableWith(ctx, adm, g)
		})
	}
	// Cooperative groups rebalance a second time, and every client's
	// heartbeats must be flowing before the fault.
	time.Sleep(4 * time.Second)
	return groups
}

// closeGroups stops every member of groups.
func closeGroups(groups []*failoverGroup) {
	for _, g := range groups {
		for _, m := range g.members {
			m.close()
		}
	}
}

// runFailoverTrial runs one trial on a fresh three-node cluster; stop kills
// or stops the node given.
func runFailoverTrial(ctx context.Context, t testing.TB, signal syscall.Signal) failoverTrial {
	t.Helper()
	procs := startProcCluster(ctx, t, 3, "--log-level", "debug")
	var seeds []string
	for _, p := range procs {
		seeds = append(seeds, p.kafka)
	}
	const topic, partitions = "invisible", 6
	createTopic(ctx, t, newAdmin(t, seeds[0]), topic, partitions)
	waitTopicEverywhere(ctx, t, seeds[1:], topic, partitions)

	const shard = 3
	groups := startTrialGroups(ctx, t, seeds, topic, shard)
	before := snapshotGroups(groups)

	_, coordID, err := rawCoordinator(ctx, seeds[0], groups[0].id)
	if err != nil {
		t.Fatal(err)
	}
	victim := procs[coordID-1]
	t.Logf("%s of node %d, coordinator of shard %d and its %d groups", signal, coordID, shard, len(groups))
	killed := time.Now()
	switch signal {
	case syscall.SIGKILL:
		victim.kill9()
	default:
		victim.stop(signal)
	}

	// Time for a member that gave up to rejoin and for its group to
	// rebalance: well past the 10 s sessions.
	deadline := time.Now().Add(15 * time.Second)
	var survivors []string
	for _, p := range procs {
		if p != victim {
			survivors = append(survivors, p.kafka)
		}
	}
	for _, g := range groups {
		waitFor(ctx, t, g.client+" group Stable after the failover", func(ctx context.Context) error {
			// A fresh client each time: one that asked for the coordinator
			// in the instant before the death was proven would keep
			// dialling the dead node (kgo caches the coordinator).
			cl, err := kgo.NewClient(kgo.SeedBrokers(survivors...))
			if err != nil {
				return err
			}
			defer cl.Close()
			d, err := kadm.NewClient(cl).DescribeGroups(ctx, g.id)
			if err != nil {
				return err
			}
			if dg := d[g.id]; dg.Err != nil || dg.State != "Stable" {
				return fmt.Errorf("%s: %v", dg.State, dg.Err)
			}
			return nil
		})
	}
	time.Sleep(time.Until(deadline))

	res := failoverTrial{groups: len(groups)}
	res.rebalanced, res.restarted = before.compare(groups)
	var logs []string
	for _, p := range procs {
		if p != victim {
			logs = append(logs, p.logPath)
		}
	}
	members := 0
	for _, g := range groups {
		members += len(g.members)
	}
	res.resumed, res.elected, res.reasons = resumedAfter(t, logs, killed)
	res.missing = members - len(res.resumed)
	closeGroups(groups)
	return res
}

// resumeLine is the coordinator's log line for a member's first heartbeat
// after an activation (or its rejoin in the same generation), and
// activeLine the activation itself.
var (
	resumeLine = regexp.MustCompile(`^(\S+) \[(?:DEBUG|INFO)\]\s+\S*groups: (?:member resumed on the new coordinator|member rejoined after its coordinator moved; generation kept): .*member=("[^"]*"|\S+)`)
	activeLine = regexp.MustCompile(`^(\S+) \[INFO\]\s+\S*groups: coordinator active: shard=3 `)
	reasonLine = regexp.MustCompile(`^(\S+) \[INFO\]\s+\S*groups: preparing rebalance: .*(group=\S+) .*(reason=.*)$`)
)

// resumedAfter reads the survivors' logs for heartbeats resumed after
// killed: the time from it to each member's first one (a member counted
// once), to the shard's activation, and the reasons of the rebalances
// started since.
func resumedAfter(t testing.TB, logs []string, killed time.Time) (resumed []time.Duration, elected time.Duration, reasons []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if m := activeLine.FindStringSubmatch(line); m != nil {
				// The earliest activation in any survivor's log (a later
				// one is the balance moving the shard again).
				if at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1]); err == nil && at.After(killed) && (elected == 0 || at.Sub(killed) < elected) {
					elected = at.Sub(killed)
				}
				continue
			}
			if m := reasonLine.FindStringSubmatch(line); m != nil {
				if at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1]); err == nil && at.After(killed) {
					reasons = append(reasons, fmt.Sprintf("+%v %s %s", at.Sub(killed), m[2], m[3]))
				}
				continue
			}
			m := resumeLine.FindStringSubmatch(line)
			if m == nil || seen[m[2]] {
				continue
			}
			at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1])
			if err != nil || at.Before(killed) {
				continue
			}
			seen[m[2]] = true
			resumed = append(resumed, at.Sub(killed))
		}
		f.Close()
	}
	slices.Sort(resumed)
	return resumed, elected, reasons
}

// TestFailoverIsInvisibleToClients runs one trial per fault: kill -9 and
// SIGTERM of the coordinator. No group may rebalance because of it (its
// generation must stay). A member whose client restarts its session in the
// same generation is logged: sarama and kafka-go do so whenever their
// coordinator's connection breaks, which no server can prevent (see
// docs/architecture.md, Failover). BenchmarkInvisibleFailover runs many
// trials and reports the times.
func TestFailoverIsInvisibleToClients(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx := testContext(t, 150*time.Second)
			res := runFailoverTrial(ctx, t, sig)
			t.Logf("elected %v after the fault; first heartbeats on the new coordinator %v; %d members not seen; sessions restarted in the same generation: %v",
				res.elected, res.resumed, res.missing, res.restarted)
			if len(res.rebalanced) > 0 {
				t.Fatalf("%d of %d groups rebalanced because of the %s: %v; the coordinator's reasons: %v", len(res.rebalanced), res.groups, sig, res.rebalanced, res.reasons)
			}
		})
	}
}

// BenchmarkInvisibleFailover runs b.N failover trials per fault (run it
// with -benchtime 20x) and reports the groups that rebalanced and those
// with restarted sessions, per trial, and the time from the fault to the
// members' first heartbeats on the new coordinator (p50, p99, max) beside
// the new coordinator's activation.
func BenchmarkInvisibleFailover(b *testing.B) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		b.Run(sig.String(), func(b *testing.B) {
			var all []time.Duration
			var elected []time.Duration
			rebalanced, restarted, missing, groups := 0, 0, 0, 0
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
				res := runFailoverTrial(ctx, b, sig)
				cancel()
				groups += res.groups
				rebalanced += len(res.rebalanced)
				restarted += len(res.restarted)
				missing += res.missing
				all = append(all, res.resumed...)
				elected = append(elected, res.elected)
				// To stderr: a benchmark's log is cut when the clients log
				// much, and these lines are the result.
				fmt.Fprintf(os.Stderr, "%s trial %d: rebalanced %v (%v); restarted %v; elected %v; resumed %v\n", sig, i+1, res.rebalanced, res.reasons, res.restarted, res.elected, res.resumed)
			}
			slices.Sort(all)
			slices.Sort(elected)
			reportTrials(b, rebalanced, restarted, missing, groups)
			b.ReportMetric(quantile(elected, 0.5).Seconds()*1000, "elected-p50-ms")
			b.ReportMetric(quantile(all, 0.5).Seconds()*1000, "heartbeat-p50-ms")
			b.ReportMetric(quantile(all, 0.99).Seconds()*1000, "heartbeat-p99-ms")
			b.ReportMetric(quantile(all, 1).Seconds()*1000, "heartbeat-max-ms")
		})
	}
}

// reportTrials reports the per-trial group counts of b.N trials.
func reportTrials(b *testing.B, rebalanced, restarted, missing, groups int) {
	b.ReportMetric(float64(rebalanced)/float64(b.N), "rebalanced-groups/trial")
	b.ReportMetric(float64(restarted)/float64(b.N), "restarted-groups/trial")
	b.ReportMetric(float64(missing)/float64(b.N), "unseen-members/trial")
	b.ReportMetric(float64(groups)/float64(b.N), "groups/trial")
}

// BenchmarkInvisibleTransfer runs b.N trials of the balance loop's move:
// the same groups on an in-process three-node cluster, the shard's
// leadership transferred away (run it with -benchtime 20x).
func BenchmarkInvisibleTransfer(b *testing.B) {
	rebalanced, restarted, groups := 0, 0, 0
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		res := runTransferTrial(ctx, b)
		cancel()
		groups += res.groups
		rebalanced += len(res.rebalanced)
		restarted += len(res.restarted)
		fmt.Fprintf(os.Stderr, "transfer trial %d: rebalanced %v; restarted %v\n", i+1, res.rebalanced, res.restarted)
	}
	reportTrials(b, rebalanced, restarted, 0, groups)
}

// quantile is the q-quantile of sorted ds (0 when empty).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q * float64(len(ds)-1))
	return ds[i]
}

// startDefaultKgo starts a franz-go group member with the library's
// defaults (but for opts) and all three seeds, as a user would.
func startDefaultKgo(ctx context.Context, t testing.TB, seeds []string, group, topic string, balancer kgo.GroupBalancer, opts ...kgo.Opt) failoverMember {
	m := &countingMember{}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(balancer),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, _ map[string][]int32) {
			_, gen := cl.GroupMetadata()
			m.assigned(gen)
		}),
		kgo.WithLogger(kgo.BasicLogger(logWriter(t, group), kgo.LogLevelWarn, nil)),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if cl.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	m.stop = func() { cl.Close(); <-done }
	t.Cleanup(m.close)
	return m
}

// startDefaultSarama starts a sarama member with the library's defaults:
// each session's Setup is an assignment.
func startDefaultSarama(ctx context.Context, t testing.TB, seeds []string, group, topic string) failoverMember {
	m := &countingMember{}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cg, err := sarama.NewConsumerGroup(seeds, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	logw := logWriter(t, group).(*testWriter)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, saramaCounter{m}); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				logw.logf("consume: %v", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	m.stop = func() { cancel(); _ = cg.Close(); <-done }
	t.Cleanup(m.close)
	return m
}

type saramaCounter struct{ m *countingMember }

func (s saramaCounter) Setup(sess sarama.ConsumerGroupSession) error {
	s.m.assigned(sess.GenerationID())
	return nil
}
func (s saramaCounter) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (s saramaCounter) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	return awaitClaimEnd(sess, claim)
}

// startDefaultKafkaGo starts a kafka-go ConsumerGroup member with the
// library's defaults: each generation is an assignment.
func startDefaultKafkaGo(ctx context.Context, t testing.TB, seeds []string, group, topic string) failoverMember {
	m := &countingMember{}
	logw := logWriter(t, group).(*testWriter)
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:          group,
		Brokers:     seeds,
		Topics:      []string{topic},
		ErrorLogger: kafka.LoggerFunc(logw.logf),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			gen, err := cg.Next(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
					return
				}
				continue
			}
			m.assigned(gen.ID)
			gen.Start(func(gctx context.Context) { <-gctx.Done() })
		}
	}()
	m.stop = func() { _ = cg.Close(); <-done }
	t.Cleanup(m.close)
	return m
}

// kcatAssigned is kcat's line for a rebalance that assigned partitions.
var kcatAssigned = regexp.MustCompile(`rebalanced .*assigned`)

// startKcat runs kcat's balanced consumer (librdkafka, its defaults): each
// "rebalanced ... assigned" line it prints is an assignment.
func startKcat(ctx context.Context, t testing.TB, kcat string, seeds []string, group, topic string) failoverMember {
	m := &countingMember{}
	cmd := exec.CommandContext(ctx, kcat, "-b", strings.Join(seeds, ","), "-G", group, topic)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logw := logWriter(t, group).(*testWriter)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if kcatAssigned.MatchString(sc.Text()) {
				m.assigned(-1)
			}
			logw.logf("%s", sc.Text())
		}
	}()
	m.stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = cmd.Wait()
	}
	t.Cleanup(m.close)
	return m
}

// countingMember counts a member's assignments and keeps the latest's
// generation; stop ends the client.
type countingMember struct {
	n    atomic.Int64
	gen  atomic.Int32
	stop func()
	once sync.Once
}

func (m *countingMember) assigned(generation int32) {
	m.gen.Store(generation)
	m.n.Add(1)
}

func (m *countingMember) assignments() int64 { return m.n.Load() }
func (m *countingMember) generation() int32  { return m.gen.Load() }
func (m *countingMember) close()             { m.once.Do(m.stop) }
