package bench

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcoord/kcoord/internal/testkit"

	"github.com/kcoord/kcoord/cluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.RemoveBinary()
	os.Exit(code)
}

// kcoordBinary returns the path of a freshly built ./cmd/kcoord.
func kcoordBinary(t testing.TB) string { return testkit.KcoordBinary(t) }

// gone says whether process pid and every process of its group have
// exited and been reaped.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
}

func TestProcsServeCommitsAndStopLeavesNothingRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kcoord and starts three processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := StartProcs(ctx, ProcsConfig{Binary: kcoordBinary(t), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	st, err := p.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 || GroupShards(st) < 1 {
		t.Fatalf("status: %d nodes, %d group shards", len(st.Nodes), GroupShards(st))
	}

	c := DefaultCommitsConfig()
	c.Brokers, c.Clients, c.Duration, c.Warmup = p.Brokers(), 4, 500*time.Millisecond, 200*time.Millisecond
	r, err := Commits(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Commits == 0 || r.Errors != 0 {
		t.Errorf("commits through the processes: %v", r)
	}

	// A node killed and started again on its data is ready again.
	first, err := p.Pid(3)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(3); err != nil {
		t.Fatal(err)
	}
	if p.Running(3) || !gone(first) {
		t.Fatalf("node 3 (pid %d) still running after Kill", first)
	}
	if _, err := p.Restart(ctx, 3); err != nil {
		t.Fatal(err)
	}

	var pids []int
	for i := 1; i <= p.Nodes(); i++ {
		pid, err := p.Pid(i)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	p.Stop()
	p.Stop() // a second Stop is harmless
	for i, pid := range pids {
		if p.Running(i+1) || !gone(pid) {
			t.Errorf("node %d (pid %d) still running after Stop", i+1, pid)
		}
	}
	if err := p.CheckRunning(); !errors.Is(err, ErrProcExited) {
		t.Errorf("CheckRunning after Stop = %v, want ErrProcExited", err)
	}
}

func TestStartProcsShowsTheLogOfANodeThatExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kcoord")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := StartProcs(ctx, ProcsConfig{Binary: kcoordBinary(t), Dir: t.TempDir(), Extra: []string{"-c", "no.such.setting=1"}})
	if !errors.Is(err, ErrProcExited) || !strings.Contains(err.Error(), "no.such.setting") {
		t.Fatalf("StartProcs with a setting serve refuses: %v; want ErrProcExited with the log's last lines", err)
	}
}

func TestStartProcsNeedsABinary(t *testing.T) {
	if _, err := StartProcs(context.Background(), ProcsConfig{Dir: t.TempDir()}); !errors.Is(err, ErrNoBinary) {
		t.Errorf("err = %v, want ErrNoBinary", err)
	}
}

func TestProcCPUAndResidentMemoryOfThisProcess(t *testing.T) {
	before, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for t0 := time.Now(); time.Since(t0) < 100*time.Millisecond; { // spin: CPU time to see
	}
	after, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 10*time.Millisecond {
		t.Errorf("ProcCPU rose by %v over 100 ms of spinning", after-before)
	}
	mb, err := ResidentMB(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if mb < 1 || mb > 1<<20 {
		t.Errorf("resident memory %.1f MiB", mb)
	}
	if _, err := ProcCPU(-1); err == nil {
		t.Error("ProcCPU of no process answered")
	}
}

// status is a ClusterStatus of three reporting nodes over shards group
// shards, where leaders[i] leads group shard i.
func status(leaders ...int32) cluster.ClusterStatus {
	st := cluster.ClusterStatus{Shards: []cluster.ShardStatus{{Shard: cluster.MetaShard, Leader: 1}}}
	leads := map[int32]int{}
	for i, l := range leaders {
		st.Shards = append(st.Shards, cluster.ShardStatus{Shard: int32(i), Leader: l})
		leads[l]++
	}
	for id := int32(1); id <= 3; id++ {
		st.Nodes = append(st.Nodes, cluster.NodeStatus{ID: id, Leads: leads[id], Reported: true})
	}
	return st
}

func TestLeadersSpreadNeedsEveryNodeWithinOneShardOfEven(t *testing.T) {
	if st := status(1, 2, 3, 1); !leadersSpread(st, 3) {
		t.Error("4 shards led 2/1/1: not spread")
	}
	if st := status(1, 1, 1, 2); leadersSpread(st, 3) {
		t.Error("4 shards led 3/1/0: spread")
	}
	if st := status(1, 2, -1, 3); leadersSpread(st, 3) {
		t.Error("a shard without a leader: spread")
	}
	st := status(1, 2, 3, 1)
	st.Nodes[2].Reported = false
	if leadersSpread(st, 3) {
		t.Error("a node that did not report: spread")
	}
}
