package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/server"
)

// Group timings used by every client library here: short enough that a
// departure is noticed within a second, long enough not to flap on a loaded
// two-core machine. TestConfig's group.min.session.timeout.ms is 100ms.
const (
	sessionTimeout    = 3 * time.Second
	heartbeatInterval = 300 * time.Millisecond
	rebalanceTimeout  = 10 * time.Second
	// groupPartitions is the size of the topic each group test consumes.
	groupPartitions = 12
)

// testContext returns a context that ends after d or when the test ends.
func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// startServer starts an in-process single kcoord node (server.TestConfig:
// loopback ports, 8 shards, 100ms initial rebalance delay) and returns its
// Kafka bootstrap address. It shuts down when the test ends.
func startServer(t testing.TB) string {
	t.Helper()
	s := server.StartTestServer(t, server.TestConfig(t.TempDir()))
	return s.KafkaAddr().String()
}

// newClient returns a plain (non-group) kgo client closed when the test ends.
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.RetryTimeout(15 * time.Second),
		kgo.WithLogger(kgo.BasicLogger(logWriter(t, "kgo-admin"), kgo.LogLevelWarn, nil)),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client over a plain kgo client to addr.
func newAdmin(t testing.TB, addr string) *kadm.Client {
	return kadm.NewClient(newClient(t, addr))
}

// createTopic registers topic with n partitions (replication factor 1) and
// waits until Metadata lists it with n partitions. It returns the topic id
// kcoord reports.
func createTopic(ctx context.Context, t testing.TB, adm *kadm.Client, topic string, n int32) kadm.TopicID {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, n, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	var id kadm.TopicID
	waitFor(ctx, t, "topic "+topic+" in metadata", func(ctx context.Context) error {
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		td, ok := tds[topic]
		if !ok {
			return fmt.Errorf("topic %s not listed", topic)
		}
		if td.Err != nil {
			return td.Err
		}
		if len(td.Partitions) != int(n) {
			return fmt.Errorf("topic %s has %d partitions, want %d", topic, len(td.Partitions), n)
		}
		id = td.ID
		return nil
	})
	return id
}

// waitFor polls cond every 50ms until it returns nil, failing the test with
// cond's last error when ctx ends. Call it from the test goroutine.
func waitFor(ctx context.Context, t testing.TB, what string, cond func(context.Context) error) {
	t.Helper()
	start := time.Now()
	for tries := 1; ; tries++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := cond(cctx)
		cancel()
		if err == nil {
			if tries > 1 { // only a wait is worth a line
				t.Logf("%s: after %v", what, time.Since(start).Round(time.Millisecond))
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s: %v", time.Since(start).Round(time.Millisecond), what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// groupView is what a client library says each live member owns: member
// id → partitions of the test topic.
type groupView map[string][]int32

// checkGroup compares the group as kcoord describes it with what the
// clients believe, and checks the assignment itself. It returns nil when:
// DescribeGroups answers the group Stable, with protocol type "consumer"
// and protocol wantProtocol; its members are exactly view's member ids;
// each member's decoded assignment (only topic) equals what its client says
// it owns; the assignments are disjoint and cover 0..n-1; and they are
// balanced (sizes differ by at most one).
func checkGroup(ctx context.Context, adm *kadm.Client, group, topic string, n int32, wantProtocol string, view groupView) error {
	if len(view) == 0 {
		return fmt.Errorf("no client reports membership yet")
	}
	for id := range view {
		if id == "" {
			return fmt.Errorf("a client has no member id yet")
		}
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describe: %w", err)
	}
	g, ok := described[group]
	if !ok {
		return fmt.Errorf("group %s not in describe response", group)
	}
	if g.Err != nil {
		return fmt.Errorf("describe group: %w", g.Err)
	}
	if g.State != "Stable" {
		return fmt.Errorf("group state %q, want Stable", g.State)
	}
	if g.ProtocolType != "consumer" || g.Protocol != wantProtocol {
		return fmt.Errorf("group protocol %q/%q, want consumer/%q", g.ProtocolType, g.Protocol, wantProtocol)
	}
	if len(g.Members) != len(view) {
		return fmt.Errorf("described %d members %v, clients report %d %v", len(g.Members), describedIDs(g), len(view), slices.Sorted(maps.Keys(view)))
	}
	owners := make(map[int32]string)
	minSize, maxSize := int(n), 0
	for _, m := range g.Members {
		clientOwned, ok := view[m.MemberID]
		if !ok {
			return fmt.Errorf("described member %s is not a live client (clients: %v)", m.MemberID, slices.Sorted(maps.Keys(view)))
		}
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return fmt.Errorf("member %s: assignment not decodable as consumer protocol", m.MemberID)
		}
		var assigned []int32
		for _, at := range a.Topics {
			if at.Topic != topic {
				return fmt.Errorf("member %s assigned foreign topic %q", m.MemberID, at.Topic)
			}
			assigned = append(assigned, at.Partitions...)
		}
		slices.Sort(assigned)
		if !slices.Equal(assigned, sorted(clientOwned)) {
			return fmt.Errorf("member %s: described assignment %v, client owns %v", m.MemberID, assigned, sorted(clientOwned))
		}
		for _, p := range assigned {
			if p < 0 || p >= n {
				return fmt.Errorf("member %s assigned partition %d outside 0..%d", m.MemberID, p, n-1)
			}
			if prev, dup := owners[p]; dup {
				return fmt.Errorf("partition %d assigned to both %s and %s", p, prev, m.MemberID)
			}
			owners[p] = m.MemberID
		}
		minSize, maxSize = min(minSize, len(assigned)), max(maxSize, len(assigned))
	}
	for p := range n {
		if _, ok := owners[p]; !ok {
			return fmt.Errorf("partition %d has no owner", p)
		}
	}
	if maxSize-minSize > 1 {
		return fmt.Errorf("unbalanced assignment: sizes from %d to %d", minSize, maxSize)
	}
	return nil
}

func describedIDs(g kadm.DescribedGroup) []string {
	var ids []string
	for _, m := range g.Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}

func sorted(ps []int32) []int32 {
	s := slices.Clone(ps)
	slices.Sort(s)
	if s == nil {
		s = []int32{}
	}
	return s
}

// committed is one committed offset as OffsetFetch reports it.
type committed struct {
	Offset   int64
	Metadata string
}

// fetchOffsets reads the group's committed offsets with kadm; any error,
// per-partition ones included, fails.
func fetchOffsets(ctx context.Context, adm *kadm.Client, group string) (map[string]map[int32]committed, error) {
	resps, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := resps.Error(); err != nil {
		return nil, err
	}
	out := make(map[string]map[int32]committed)
	resps.Each(func(o kadm.OffsetResponse) {
		if out[o.Topic] == nil {
			out[o.Topic] = make(map[int32]committed)
		}
		out[o.Topic][o.Partition] = committed{o.At, o.Metadata}
	})
	return out, nil
}

// checkOffsets waits until the group's committed offsets are exactly want
// (topic → partition → offset and metadata), nothing more. Commits the
// callers made were acknowledged, so the first read should already match;
// the wait only absorbs client libraries whose commit call does not report
// the broker's answer (sarama).
func checkOffsets(ctx context.Context, t testing.TB, adm *kadm.Client, group string, want map[string]map[int32]committed) {
	t.Helper()
	waitFor(ctx, t, "committed offsets of "+group, func(ctx context.Context) error {
		got, err := fetchOffsets(ctx, adm, group)
		if err != nil {
			return fmt.Errorf("fetch offsets: %w", err)
		}
		return diffOffsets(got, want)
	})
}

func diffOffsets(got, want map[string]map[int32]committed) error {
	var diffs []string
	for topic, ps := range want {
		for p, w := range ps {
			g, ok := got[topic][p]
			switch {
			case !ok:
				diffs = append(diffs, fmt.Sprintf("%s/%d missing (want %+v)", topic, p, w))
			case g != w:
				diffs = append(diffs, fmt.Sprintf("%s/%d = %+v, want %+v", topic, p, g, w))
			}
		}
	}
	for topic, ps := range got {
		for p, g := range ps {
			if _, ok := want[topic][p]; !ok {
				diffs = append(diffs, fmt.Sprintf("unexpected %s/%d = %+v", topic, p, g))
			}
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		return fmt.Errorf("offsets differ: %s", strings.Join(diffs, "; "))
	}
	return nil
}

// commitOffsetFor is the distinct offset member idx commits for partition p
// in round r: no two (member, partition, round) share one.
func commitOffsetFor(idx int, p int32, round int) int64 {
	return int64(100000*(round+1) + 1000*(idx+1) + int(p))
}

// ownedSet tracks the partitions one member owns, from its client's
// callbacks.
type ownedSet struct {
	mu    sync.Mutex
	parts map[int32]bool
}

func (o *ownedSet) add(ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.parts == nil {
		o.parts = make(map[int32]bool)
	}
	for _, p := range ps {
		o.parts[p] = true
	}
}

func (o *ownedSet) remove(ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		delete(o.parts, p)
	}
}

func (o *ownedSet) set(ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.parts = make(map[int32]bool)
	for _, p := range ps {
		o.parts[p] = true
	}
}

func (o *ownedSet) list() []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return sorted(slices.Collect(maps.Keys(o.parts)))
}

// logWriter is an io.Writer to t.Log with a prefix, silent once the test
// ended (client goroutines may outlive it briefly).
func logWriter(t testing.TB, prefix string) io.Writer {
	w := &testWriter{t: t, prefix: prefix}
	t.Cleanup(func() {
		w.mu.Lock()
		w.stopped.Store(true)
		w.mu.Unlock()
	})
	return w
}

type testWriter struct {
	t       testing.TB
	prefix  string
	mu      sync.Mutex
	stopped atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped.Load() {
		w.t.Log(w.prefix + ": " + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// logf logs through w (for client loggers that take printf functions).
func (w *testWriter) logf(format string, args ...any) {
	fmt.Fprintf(w, format, args...)
}
