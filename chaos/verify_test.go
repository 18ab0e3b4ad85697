package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kcoord/kcoord/cluster"
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

// TestVerifyFindsNoAnomaliesAcrossACoordinatorKill runs the verifier's
// workload against a three-node in-process cluster and kills the node
// coordinating the register group halfway: every checker must pass.
func TestVerifyFindsNoAnomaliesAcrossACoordinatorKill(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20 s workload")
	}
	t.Parallel()
	servers, brokers := startCluster(t)
	cfg := shortWorkload(brokers)
	cfg.Prefix = "kill"
	rep, err := Run(testCtx(t), RunConfig{
		Workload: cfg,
		Duration: 16 * time.Second,
		Faults: func(ctx context.Context, hist *History) {
			sleep(ctx, 6*time.Second)
			leader, ok := leaderOf(servers, cfg.Prefix+"-r0")
			if !ok {
				t.Error("no leader for the register group's shard")
				return
			}
			f := FaultRecord{Name: "kill", Target: fmt.Sprint("node ", leader), Start: hist.Now()}
			if err := servers[leader-1].Kill(); err != nil {
				t.Error(err)
			}
			f.Healed = hist.Now()
			hist.AddFault(f)
			sleep(ctx, 6*time.Second)
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
	if rep.Ops < 200 {
		t.Fatalf("only %d operations: the run says nothing", rep.Ops)
	}
}

// TestVerifyFindsNoAnomaliesUnderInProcessRaftFaults runs the workload
// over a three-node in-process cluster while the Raft mux's hooks cut the
// register group's coordinator's outbound traffic (it hears its peers but
// cannot reach them), then delay every node's Raft writes by 100 ms.
func TestVerifyFindsNoAnomaliesUnderInProcessRaftFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20 s workload")
	}
	t.Parallel()
	servers, brokers := startCluster(t)
	cfg := shortWorkload(brokers)
	cfg.Prefix = "oneway"
	rep, err := Run(testCtx(t), RunConfig{
		Workload: cfg,
		Duration: 30 * time.Second,
		Faults: func(ctx context.Context, hist *History) {
			sleep(ctx, 4*time.Second)
			leader, ok := leaderOf(servers, cfg.Prefix+"-r0")
			if !ok {
				t.Error("no leader for the register group's shard")
				return
			}
			f := FaultRecord{Name: "one-way", Target: fmt.Sprint("node ", leader), Start: hist.Now()}
			heal := servers[leader-1].Node().Faults().Add(cluster.Fault{Dir: cluster.DirOutbound, Drop: true})
			sleep(ctx, 5*time.Second)
			heal()
			f.Healed = hist.Now()
			hist.AddFault(f)
			sleep(ctx, 3*time.Second)
			f = FaultRecord{Name: "raft-delay", Target: "all", Start: hist.Now()}
			var heals []func()
			for _, s := range servers {
				heals = append(heals, s.Node().Faults().Add(cluster.Fault{Delay: 100 * time.Millisecond}))
			}
			sleep(ctx, 5*time.Second)
			for _, h := range heals {
				h()
			}
			f.Healed = hist.Now()
			hist.AddFault(f)
			sleep(ctx, 3*time.Second)
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
	var port int
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			port = atoi(t, addr[i+1:])
			break
		}
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

// leaderOf names the node leading group's shard, as servers[0] sees
// it, and whether there is one.
func leaderOf(servers []*server.Server, group string) (int32, bool) {
	b, ok := servers[0].Node().LeaderOf(servers[0].Node().ShardFor(group))
	return b.NodeID, ok
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func atoi(t *testing.T, s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a port: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}
