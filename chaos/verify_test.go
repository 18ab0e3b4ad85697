package chaos

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/server"
)

// shortWorkload is a small load for in-process runs: two consumer groups
// (one eager with a static member, one cooperative), one register group.
func shortWorkload(brokers []string) WorkloadConfig {
	return WorkloadConfig{
		Brokers: brokers, Partitions: 4,
		Groups: 2, Members: 2,
		RegisterGroups: 1, RegisterPartitions: 2, Workers: 3, ColdGroups: 2,
		Churn: 3 * time.Second, SessionTimeout: 6 * time.Second,
	}
}

// runInProcess runs the workload (groups named after prefix) over a
// three-node in-process cluster while faults runs, and fails the test on
// any anomaly. faults gets the node leading the first register group's
// shard when it is called.
func runInProcess(t *testing.T, prefix string, bound time.Duration, faults func(ctx context.Context, hist *History, servers []*server.Server, leader int32)) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("a 20 s workload")
	}
	t.Parallel()
	servers, brokers := startCluster(t)
	cfg := shortWorkload(brokers)
	cfg.Prefix = prefix
	rep, err := Run(testCtx(t), RunConfig{
		Workload: cfg,
		Duration: bound,
		Faults: func(ctx context.Context, hist *History) {
			sleep(ctx, 4*time.Second)
			b, ok := servers[0].Node().LeaderOf(servers[0].ShardFor(prefix + "-r0"))
			if !ok {
				t.Error("no leader for the register group's shard")
				return
			}
			faults(ctx, hist, servers, b.NodeID)
		},
		Progress: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	if rep.Anomalies() != 0 {
		t.Fatalf("%d anomalies", rep.Anomalies())
	}
	return rep
}

// TestVerifyFindsNoAnomaliesAcrossACoordinatorKill kills the node
// coordinating the register group during the run: every checker must
// pass.
func TestVerifyFindsNoAnomaliesAcrossACoordinatorKill(t *testing.T) {
	rep := runInProcess(t, "kill", 16*time.Second, func(ctx context.Context, hist *History, servers []*server.Server, leader int32) {
		sleep(ctx, 2*time.Second)
		f := FaultRecord{Name: "kill", Target: fmt.Sprint("node ", leader), Start: hist.Now()}
		if err := servers[leader-1].Kill(); err != nil {
			t.Error(err)
		}
		f.Healed = hist.Now()
		hist.AddFault(f)
		sleep(ctx, 6*time.Second)
	})
	if rep.Ops < 200 {
		t.Fatalf("only %d operations: the run says nothing", rep.Ops)
	}
}

// TestVerifyFindsNoAnomaliesUnderInProcessRaftFaults cuts the register
// group's coordinator's outbound Raft traffic through the mux's hooks (it
// hears its peers but cannot reach them), then delays every node's Raft
// writes by 100 ms.
func TestVerifyFindsNoAnomaliesUnderInProcessRaftFaults(t *testing.T) {
	runInProcess(t, "oneway", 30*time.Second, func(ctx context.Context, hist *History, servers []*server.Server, leader int32) {
		f := FaultRecord{Name: "one-way", Target: fmt.Sprint("node ", leader), Start: hist.Now()}
		heal := servers[leader-1].Node().Faults().Add(raftnet.Fault{Dir: raftnet.DirOutbound, Drop: true})
		sleep(ctx, 5*time.Second)
		heal()
		f.Healed = hist.Now()
		hist.AddFault(f)
		sleep(ctx, 3*time.Second)
		f = FaultRecord{Name: "raft-delay", Target: "all", Start: hist.Now()}
		var heals []func()
		for _, s := range servers {
			heals = append(heals, s.Node().Faults().Add(raftnet.Fault{Delay: 100 * time.Millisecond}))
		}
		sleep(ctx, 5*time.Second)
		for _, h := range heals {
			h()
		}
		f.Healed = hist.Now()
		hist.AddFault(f)
		sleep(ctx, 3*time.Second)
	})
}

// TestVerifyReportsOffsetsLostWhenKfakeRestarts runs the verifier against
// franz-go's in-memory kfake and restarts it, empty, on the same port
// halfway: the acknowledged commits before the restart are gone, and the
// durability checker must say so.
func TestVerifyReportsOffsetsLostWhenKfakeRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("a 12 s workload")
	}
	t.Parallel()
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "kcoord-verify"))
	if err != nil {
		t.Fatal(err)
	}
	addr := fake.ListenAddrs()[0]
	_, portText, _ := net.SplitHostPort(addr)
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatalf("kfake listens on %q", addr)
	}
	t.Cleanup(func() { fake.Close() })
	cfg := shortWorkload([]string{addr})
	cfg.Prefix = "kfake"
	cfg.Groups, cfg.Churn = 0, 0 // kfake's restart takes the groups too
	rep, err := Run(testCtx(t), RunConfig{
		Workload: cfg,
		Duration: 10 * time.Second,
		Faults: func(ctx context.Context, hist *History) {
			sleep(ctx, 5*time.Second)
			f := FaultRecord{Name: "restart-in-memory", Target: addr, Start: hist.Now()}
			fake.Close()
			fake, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(4, "kcoord-verify"))
			if err != nil {
				t.Error(err)
			}
			f.Healed = hist.Now()
			hist.AddFault(f)
			sleep(ctx, 4*time.Second)
		},
		Progress: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	var durable CheckResult
	for _, c := range rep.Checks {
		if c.Name == "durable" {
			durable = c
		}
	}
	if len(durable.Anomalies) == 0 {
		t.Fatalf("kfake lost its offsets and the durability checker found nothing: %s", durable.Summary)
	}
	if !strings.HasSuffix(strings.TrimSpace(rep.String()), "anomalies") {
		t.Fatal("the report does not end with the summary line")
	}
}

// startCluster starts a three-node in-process cluster and returns its
// servers and Kafka addresses.
func startCluster(t *testing.T) ([]*server.Server, []string) {
	servers := server.StartTestCluster(t, 3, nil)
	var brokers []string
	for _, s := range servers {
		brokers = append(brokers, s.KafkaAddr().String())
	}
	return servers, brokers
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
