package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kcoord/kcoord/cluster"
)

// A small load runs every step on three processes: the fill in its
// segments, memory and data directories before and after, the restart of
// a killed node, and a fourth node added under load until it holds
// replicas; failover is left to TestReport's run.
func TestLoadMeasuresEveryStep(t *testing.T) {
	if testing.Short() || raceOn {
		t.Skip("builds kcoord and starts three processes; make test runs it without -race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := LoadConfig{Binary: kcoordBinary(t), Dir: t.TempDir(), Groups: 201, Partitions: 3, Committers: 4, Segments: 2,
		AddNode: true, MoveBaseline: 2 * time.Second}
	r, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Segments) != 2 || r.Segments[0].Groups != 101 || r.Segments[1].Groups != 100 {
		t.Errorf("segments %+v; want 101 and 100 groups", r.Segments)
	}
	if r.Fill.Groups != 201 || r.Fill.Lost != 0 || r.Offsets() != 603 {
		t.Errorf("fill %+v, %d offsets; want 201 groups, 603 offsets", r.Fill, r.Offsets())
	}
	if len(r.RSSBeforeMB) != 3 || len(r.RSSAfterMB) != 3 || len(r.DataMB) != 3 {
		t.Fatalf("memory %v → %v, data %v: want three nodes each", r.RSSBeforeMB, r.RSSAfterMB, r.DataMB)
	}
	for i := range 3 {
		if r.RSSAfterMB[i] <= 0 || r.DataMB[i] <= 0 {
			t.Errorf("node %d: %v MiB resident, %v MiB of data", i+1, r.RSSAfterMB[i], r.DataMB[i])
		}
	}
	if r.Restarted < 1 || r.Restarted > 3 || r.Restart <= 0 {
		t.Errorf("restart of node %d took %v", r.Restarted, r.Restart)
	}
	if a := r.Added; a.Node != 4 || a.Replicas < 1 || a.Share <= 0 || a.Settled < a.Share || a.Before.Commits == 0 || a.During.Commits+a.During.Errors == 0 {
		t.Errorf("added node %+v; want node 4 voting in shards, and commits timed before and during", a)
	}
	var b strings.Builder
	if err := WriteLoad(&b, r); err != nil {
		t.Fatal(err)
	}
	t.Log(b.String())
	for _, want := range []string{"## Scale: 201 groups × 3 partitions", "bytes an offset", "ready again after", "Fill rate by segment", "node 4 added under load", "commit p99 before → while replicas move"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the section lacks %q", want)
		}
	}
	if strings.Contains(b.String(), "| failover p50") {
		t.Error("a load without failover trials reports one")
	}
}

// WriteLoad's failover rows give both clusters' figures and their ratio,
// and bytes an offset come from the memory the fill added.
func TestWriteLoadReportsFailoverAndMemory(t *testing.T) {
	r := LoadResult{
		Config:      LoadConfig{Groups: 1000, Partitions: 10, Committers: 64, Segments: 2, FailoverTrials: 1},
		Segments:    []FillResult{{Groups: 500, Elapsed: time.Second}, {Groups: 500, Elapsed: 2 * time.Second}},
		Fill:        FillResult{Groups: 1000, Elapsed: 3 * time.Second},
		RSSBeforeMB: []float64{30, 30, 30},
		RSSAfterMB:  []float64{40, 40, 40},
		DataMB:      []float64{5, 5, 5},
		Empty:       FailoverResult{Trials: 1, Shards: []time.Duration{time.Second}, P50: time.Second, Max: time.Second},
		Full:        FailoverResult{Trials: 1, Shards: []time.Duration{1500 * time.Millisecond}, P50: 1500 * time.Millisecond, Max: 1500 * time.Millisecond},
		Restarted:   2, Restart: 1200 * time.Millisecond,
	}
	r.Config.AddNode, r.Config.MoveBaseline, r.Config.ServeArgs = true, 10*time.Second, []string{"-c=leader.replication.throttled.rate=10485760"}
	r.Added = AddNodeResult{Node: 4, Target: 12, Replicas: 12, Share: 20 * time.Second, Settled: 25 * time.Second, LeaderChanges: 7,
		Before: ProbeWindow{Commits: 1000, P50: 2 * time.Millisecond, P99: 10 * time.Millisecond},
		During: ProbeWindow{Commits: 2000, Errors: 1, P50: 3 * time.Millisecond, P99: 250 * time.Millisecond},
		Steady: ProbeWindow{Commits: 1900, P99: 20 * time.Millisecond},
		Moved:  ProbeWindow{Commits: 100, P50: 240 * time.Millisecond, P99: 300 * time.Millisecond}}
	if got := r.BytesPerOffset(1); got != 10*(1<<20)/10000.0 {
		t.Errorf("bytes an offset %v", got)
	}
	var b strings.Builder
	if err := WriteLoad(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Scale: 1 k groups × 10 partitions", "333 group commits/s", "500 and 250 group commits/s (last ÷ first 0.50)",
		"30 → 40 MiB (1049 bytes an offset)", "1.00 s / 1.00 s", "p50 full ÷ empty 1.50", "node 2 SIGKILLed, ready again after | 1.20 s",
		"--serve-arg=-c=leader.replication.throttled.rate=10485760", "serve's defaults but -c=leader.replication.throttled.rate=10485760",
		"its share (12 replicas), placement settled | 20.00 s, 25.00 s", "10.00 ms → 250.00 ms (25.00×",
		"one of the 7 leader changes | 20.00 ms (2.00× before; 1900 commits, 0 errors); 100 commits, 0 errors, p50 240.00 ms, p99 300.00 ms"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the section lacks %q:\n%s", want, b.String())
		}
	}
}

func TestLoadRefusesSizesThatDoNotFit(t *testing.T) {
	for _, c := range []LoadConfig{
		{Groups: 0, Partitions: 1, Committers: 1, Segments: 1},
		{Groups: 5, Partitions: 1, Committers: 1, Segments: 6},
		{Groups: 5, Partitions: 0, Committers: 1, Segments: 1},
		{Groups: 5, Partitions: 1, Committers: 1, Segments: 1, FailoverTrials: -1},
		{Groups: 5, Partitions: 1, Committers: 1, Segments: 1, AddNode: true},
	} {
		if _, err := Load(context.Background(), c); !errors.Is(err, ErrLoadConfig) {
			t.Errorf("%+v: %v, want ErrLoadConfig", c, err)
		}
	}
}

// A commit met a leadership change when its shard's leader differs
// between the polls around it, or is unknown in either.
func TestLeaderTimelineTellsCommitsThatMetALeaderChange(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(100, 0).Add(time.Duration(ms) * time.Millisecond) }
	tl := leaderTimeline{
		{at: at(0), leaders: map[int32]int32{0: 1, 1: 2}},
		{at: at(500), leaders: map[int32]int32{0: 1, 1: 3}},
		{at: at(1000), leaders: map[int32]int32{0: 1, 1: -1}},
		{at: at(1500), leaders: map[int32]int32{0: 1, 1: 2}},
	}
	for _, tc := range []struct {
		shard    int32
		from, to int
		want     bool
	}{
		{0, 10, 900, false},    // shard 0 kept its leader
		{1, 10, 400, true},     // across the change at 500
		{1, 600, 700, true},    // leader unknown at 1000
		{1, 510, 520, true},    // ends before the next poll, which knows none
		{2, 10, 20, true},      // a shard no poll knows
		{0, 1200, 1300, false}, // shard 0 kept its leader across polls
		{0, 1600, 1700, false}, // after the last poll: compared with it
	} {
		if got := tl.changed(tc.shard, at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("shard %d, %d–%d ms: changed %v, want %v", tc.shard, tc.from, tc.to, got, tc.want)
		}
	}
	if n := tl.changes(); n != 2 {
		t.Errorf("%d leader changes, want 2 (shard 1: node 2 → 3, none, → 2)", n)
	}
}

// The pause between two batches of moves is not the end of the add:
// placement has settled only once quiet for settleQuiet, counted from the
// first of the quiet statuses after the last busy one.
func TestSettleWatchWaitsOutThePauseBetweenBatches(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(100, 0).Add(time.Duration(ms) * time.Millisecond) }
	var w settleWatch
	for _, step := range []struct {
		ms          int
		quiet, done bool
	}{
		{0, false, false},
		{500, true, false},   // the first batch is done...
		{1000, true, false},  // ...and the next not yet started
		{1500, false, false}, // it started
		{2000, true, false},
		{4500, true, false},
		{5000, true, true}, // quiet for settleQuiet since 2000
	} {
		if got := w.observe(at(step.ms), step.quiet); got != step.done {
			t.Fatalf("at %d ms (quiet %v): settled %v, want %v", step.ms, step.quiet, got, step.done)
		}
	}
	if !w.since.Equal(at(2000)) {
		t.Errorf("settled since %v, want the quiet that began at 2000 ms", w.since)
	}
}

// A status whose leader's own report was missing names the leader from
// gossip with no term: the same leader, not a change.
func TestALeaderWithoutItsTermIsTheSameLeader(t *testing.T) {
	st := func(term uint64) cluster.ClusterStatus {
		return cluster.ClusterStatus{Shards: []cluster.ShardStatus{{Shard: -1, Leader: 1, Term: 9}, {Shard: 0, Leader: 2, Term: term}}}
	}
	t0 := time.Unix(100, 0)
	tl := leaderTimeline{{at: t0, leaders: shardLeaders(st(4))}, {at: t0.Add(time.Second), leaders: shardLeaders(st(0))}}
	if tl.changed(0, t0, t0.Add(time.Second)) || tl.changes() != 0 {
		t.Error("a missing term counted as a leader change")
	}
	if _, ok := tl[0].leaders[-1]; ok {
		t.Error("the metadata group is in the group shards' timeline")
	}
}
