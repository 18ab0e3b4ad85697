package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kcoord/kcoord/chaos"
	"github.com/kcoord/kcoord/chaos/faultfs"
	"github.com/kcoord/kcoord/cluster"
)

// The disk-stall trial: the groups of every client library kcoord
// supports (startTrialGroups: franz-go with defaults and with a 10 s
// session, sarama, kafka-go and kcat) and a raw committer, all on one
// shard of three `kcoord serve` processes whose data dirs are FUSE fault
// file systems (faultfs). The disk of the shard's leader stalls for
// diskStallHold: every write and fsync blocks, the process and its sockets
// stay. The trial times the fence (the node's own log), the election of
// the shard elsewhere (the survivors' logs) and the raw committer's first
// accepted commit, counts the groups that rebalanced or restarted their
// sessions, and checks that nothing acknowledged was lost and that the
// node leads again once its disk answers.

// diskStallHold is how long the trial's stall lasts.
const diskStallHold = 30 * time.Second

// diskStallTrial is one trial's outcome.
type diskStallTrial struct {
	fenced, elected, committed, ledAgain time.Duration
	groups                               int
	rebalanced, restarted                []string
}

var fencedLine = regexp.MustCompile(`^(\S+) \[ERROR\]\s+\S*cluster: node disk unhealthy`)

// runDiskStallTrial runs one trial on a fresh cluster.
func runDiskStallTrial(ctx context.Context, t testing.TB) diskStallTrial {
	t.Helper()
	procs := make([]*kcoordProc, 3)
	disks := make([]*faultfs.FS, 3)
	for i := range procs {
		p := newProc(t)
		d, err := faultfs.Mount(filepath.Join(filepath.Dir(p.dataDir), "disk"), p.dataDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // before newProc's: the process first, then its disk
			d.Heal()
			if p.running() {
				p.kill9()
			}
			_ = d.Unmount()
		})
		p.extra = []string{"--node-id", strconv.Itoa(i + 1), "--bootstrap-expect", "3", "--log-level", "debug"}
		if i > 0 {
			p.extra = append(p.extra, "--join", procs[0].gossip)
		}
		procs[i], disks[i] = p, d
	}
	for _, p := range procs {
		p.launch()
	}
	for _, p := range procs {
		p.waitReady(ctx)
	}
	var seeds []string
	for _, p := range procs {
		seeds = append(seeds, p.kafka)
	}
	const topic, partitions, shard = "stalled", 6, 3
	createTopic(ctx, t, newAdmin(t, seeds[0]), topic, partitions)
	waitTopicEverywhere(ctx, t, seeds[1:], topic, partitions)
	groups := startTrialGroups(ctx, t, seeds, topic, shard)
	// The stall must meet a settled cluster: the leadership balance
	// moves shards in the first seconds, and a move just before the
	// stall would be a second move of the groups' coordinator.
	waitLeadershipSettled(ctx, t, procs[0].http, 3*time.Second)
	before := snapshotGroups(groups)

	// The raw committer: a simple consumer's commit every 20 ms, wherever
	// FindCoordinator says, each value higher than the last.
	raw := groupOnShard("stall-raw", shard)
	var acked atomic.Int64
	var mu sync.Mutex
	var accepted []time.Time
	stop := make(chan struct{})
	var committer sync.WaitGroup
	committer.Go(func() {
		for n := int64(1); ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			addr, _, err := rawCoordinator(ctx, seeds[int(n)%len(seeds)], raw)
			if err == nil {
				err = rawSimpleCommit(ctx, addr, raw, topic, 0, n)
			}
			if err == nil {
				acked.Store(n)
				mu.Lock()
				accepted = append(accepted, time.Now())
				mu.Unlock()
			}
		}
	})

	_, coordID, err := rawCoordinator(ctx, seeds[0], groups[0].id)
	if err != nil {
		t.Fatal(err)
	}
	victim := procs[coordID-1]
	t.Logf("stalling the disk of node %d, coordinator of shard %d and its %d groups, for %v", coordID, shard, len(groups), diskStallHold)
	stalled := time.Now()
	resume := disks[coordID-1].Stall()
	time.Sleep(diskStallHold)
	resume()
	victim.waitReady(ctx)
	res := diskStallTrial{groups: len(groups)}
	waitFor(ctx, t, "the node to lead shards again", func(ctx context.Context) error {
		led, err := shardsLedBy(ctx, victim.http, coordID)
		if err != nil {
			return err
		}
		if led == 0 {
			return fmt.Errorf("node %d leads no shard yet", coordID)
		}
		res.ledAgain = time.Since(stalled) - diskStallHold
		return nil
	})
	time.Sleep(12 * time.Second) // past the 10 s sessions: a member that gave up has rejoined by now
	close(stop)
	committer.Wait()

	mu.Lock()
	for _, at := range accepted {
		if at.After(stalled) {
			res.committed = at.Sub(stalled)
			break
		}
	}
	mu.Unlock()
	res.rebalanced, res.restarted = before.compare(groups)
	res.fenced = firstLogLine(t, victim.logPath, fencedLine, stalled)
	var survivors []string
	for _, p := range procs {
		if p != victim {
			survivors = append(survivors, p.logPath)
		}
	}
	_, res.elected, _ = resumedAfter(t, survivors, stalled)

	addr, _, err := rawCoordinator(ctx, seeds[0], raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fetchOffsets(ctx, newAdmin(t, addr), raw)
	if err != nil {
		t.Fatal(err)
	}
	if o := got[topic][0].Offset; o < acked.Load() {
		t.Fatalf("the raw committer's partition holds %d after the stall; %d was acknowledged", o, acked.Load())
	}
	closeGroups(groups)
	return res
}

// shardsLedBy is how many group shards node id leads, by the cluster
// status of the node at httpAddr.
func shardsLedBy(ctx context.Context, httpAddr string, id int32) (int, error) {
	st, err := clusterStatus(ctx, httpAddr)
	if err != nil {
		return 0, err
	}
	for _, n := range st.Nodes {
		if n.ID == id {
			return n.Leads, nil
		}
	}
	return 0, fmt.Errorf("node %d not in the status", id)
}

// clusterStatus is GET /v1/cluster/status of the node at httpAddr.
func clusterStatus(ctx context.Context, httpAddr string) (cluster.ClusterStatus, error) {
	var st cluster.ClusterStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/v1/cluster/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// waitLeadershipSettled waits until the shards' leaders, by the cluster
// status of the node at httpAddr, are spread within one of even and have
// not changed for quiet.
func waitLeadershipSettled(ctx context.Context, t testing.TB, httpAddr string, quiet time.Duration) {
	t.Helper()
	var last string
	var since time.Time
	waitFor(ctx, t, "the leadership balance to settle", func(ctx context.Context) error {
		counts, err := leadCounts(ctx, httpAddr)
		if err != nil {
			return err
		}
		if k := fmt.Sprint(counts); k != last {
			last, since = k, time.Now()
		}
		lo, hi := slices.Min(counts), slices.Max(counts)
		if hi-lo > 1 || time.Since(since) < quiet {
			return fmt.Errorf("shards led per node %v, unchanged for %v", counts, time.Since(since).Round(time.Millisecond))
		}
		return nil
	})
}

// leadCounts is how many shards each node leads, in node id order, by the
// cluster status of the node at httpAddr.
func leadCounts(ctx context.Context, httpAddr string) ([]int, error) {
	st, err := clusterStatus(ctx, httpAddr)
	if err != nil {
		return nil, err
	}
	nodes := slices.Clone(st.Nodes)
	slices.SortFunc(nodes, func(a, b cluster.NodeStatus) int { return int(a.ID - b.ID) })
	counts := make([]int, 0, len(nodes))
	for _, n := range nodes {
		counts = append(counts, n.Leads)
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("no nodes in the status")
	}
	return counts, nil
}

// firstLogLine is the time from since to the first line of the log at
// path that re matches (its first group is the line's timestamp); 0 when
// none does.
func firstLogLine(t testing.TB, path string, re *regexp.Regexp, since time.Time) time.Duration {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1]); err == nil && at.After(since) {
			return at.Sub(since)
		}
	}
	return 0
}

// BenchmarkDiskStall runs b.N disk-stall trials and reports, at p50 and
// max, the time from the stall to the fence, to the shard's election
// elsewhere and to the first commit accepted again, with the groups that
// rebalanced or restarted their sessions. The bar: every group
// committable again within 8 s, none losing its session.
//
//	go test ./e2e -run '^$' -bench DiskStall -benchtime 10x -timeout 60m
func BenchmarkDiskStall(b *testing.B) {
	if err := chaos.FaultFSSupported(); err != nil {
		b.Skip(err)
	}
	var fenced, elected, committed, ledAgain []time.Duration
	rebalanced, restarted, groups := 0, 0, 0
	for i := range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		res := runDiskStallTrial(ctx, b)
		cancel()
		fenced, elected, committed, ledAgain = append(fenced, res.fenced), append(elected, res.elected), append(committed, res.committed), append(ledAgain, res.ledAgain)
		groups += res.groups
		rebalanced += len(res.rebalanced)
		restarted += len(res.restarted)
		fmt.Fprintf(os.Stderr, "disk stall trial %d: fenced %v, elected %v, first commit %v, leads again %v after the heal; rebalanced %v; restarted %v\n",
			i+1, res.fenced, res.elected, res.committed, res.ledAgain, res.rebalanced, res.restarted)
	}
	for _, s := range []struct {
		name string
		ds   []time.Duration
	}{{"fenced", fenced}, {"elected", elected}, {"commit", committed}, {"leads-again", ledAgain}} {
		slices.Sort(s.ds)
		b.ReportMetric(float64(quantile(s.ds, 0.5).Milliseconds()), s.name+"-p50-ms")
		b.ReportMetric(float64(quantile(s.ds, 1).Milliseconds()), s.name+"-max-ms")
	}
	reportTrials(b, rebalanced, restarted, 0, groups)
}
