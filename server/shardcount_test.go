package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/groups"
)

// A node restarted on its data dir with offsets.topic.num.partitions
// unset runs the count the data dir records (the harness's 8, not the
// default), so every group is still on its shard and its offsets are
// where they were; restarted with another count set, it refuses to start
// (ErrDataDirMismatch).
func TestARestartedServerKeepsItsShardCount(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	cfg := TestConfig(t.TempDir())
	s := StartTestServer(t, cfg)
	ids := make([]string, 24)
	for i := range ids {
		ids[i] = fmt.Sprintf("kept-%d", i)
	}
	withAdmin(t, s, func(adm *kadm.Client) {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
			t.Fatal(err)
		}
		for i, g := range ids {
			deadline := time.Now().Add(10 * time.Second)
			for { // the topic reaches the registry first
				resp, err := adm.CommitOffsets(ctx, g, kadm.OffsetsFromRecords(kgo.Record{Topic: "t", Partition: 0, Offset: int64(i)}))
				if err == nil {
					err = resp.Error()
				}
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("commit of %s: %v", g, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	cfg = s.BoundConfig()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	cfg.OffsetsTopicNumPartitions = 0
	s = StartTestServer(t, cfg)
	if got := s.ShardCount(); got != 8 || len(s.Node().Shards()) != 8 {
		t.Fatalf("restarted with the count unset: %d shards, want the recorded 8", got)
	}
	withAdmin(t, s, func(adm *kadm.Client) {
		for i, g := range ids {
			fetched, err := adm.FetchOffsets(ctx, g)
			if err != nil {
				t.Fatalf("fetch of %s: %v", g, err)
			}
			if o, ok := fetched.Lookup("t", 0); !ok || o.Err != nil || o.At != int64(i+1) {
				t.Errorf("%s after the restart: %+v, %v; want offset %d", g, o, ok, i+1)
			}
		}
	})
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	cfg.OffsetsTopicNumPartitions = 16
	err := startOnce(t, cfg)
	if !errors.Is(err, cluster.ErrDataDirMismatch) {
		t.Fatalf("restart with offsets.topic.num.partitions=16 on a data dir of 8: %v, want ErrDataDirMismatch", err)
	}
	t.Logf("refused: %v", err)
}

// A node added to a cluster of 8 shards with offsets.topic.num.partitions
// unset runs 8, and its FindCoordinator names, for every group, the node
// that leads the group's shard among 8, as the other nodes do. A node
// added with another count set is refused before it writes anything to
// its data dir.
func TestAJoinerRoutesGroupsAsTheCluster(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	servers := StartTestCluster(t, 3, nil)
	waitAllReady(t, servers)

	t.Run("a count set to another is refused", func(t *testing.T) {
		cfg := TestClusterConfig(t.TempDir(), 4, 0)
		cfg.BootstrapExpect, cfg.OffsetsTopicNumPartitions = 0, 16
		for _, o := range servers {
			cfg.Join = append(cfg.Join, o.BoundConfig().GossipAddr)
		}
		err := startOnce(t, cfg)
		if !errors.Is(err, cluster.ErrShardCountMismatch) {
			t.Fatalf("joiner with 16 shards in a cluster of 8: %v, want ErrShardCountMismatch", err)
		}
		t.Logf("refused: %v", err)
		if entries, err := os.ReadDir(cfg.DataDir); err != nil || len(entries) != 0 {
			t.Fatalf("the refused joiner's data dir holds %v (%v); want it empty", entries, err)
		}
	})

	joiner := AddTestNode(t, servers, 4, func(c *Config) { c.OffsetsTopicNumPartitions = 0 })
	if got := joiner.ShardCount(); got != 8 {
		t.Fatalf("the joiner runs %d shards, want the cluster's 8", got)
	}
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = fmt.Sprintf("routed-%d", i)
	}
	// Leadership balance may move a shard between two looks: retry until
	// one pass agrees throughout.
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		last = routingDisagreement(ctx, t, servers, joiner, ids)
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// routingDisagreement asks the joiner and servers[0] for the coordinators
// of ids and returns how one answer differs from the other or from the
// leader of the group's shard among 8; "" when all agree.
func routingDisagreement(ctx context.Context, t *testing.T, servers []*Server, joiner *Server, ids []string) string {
	t.Helper()
	fromJoiner := coordinators(ctx, t, joiner, ids)
	fromFirst := coordinators(ctx, t, servers[0], ids)
	for _, g := range ids {
		shard := groups.PartitionFor(g, 8)
		leader := int32(-1)
		for _, s := range servers {
			if s.Node().Shard(shard).IsLeader() {
				leader = s.cfg.NodeID
			}
		}
		if fromJoiner[g] != leader || fromFirst[g] != leader {
			return fmt.Sprintf("group %s (shard %d of 8, led by node %d): the joiner names node %d, node 1 names node %d", g, shard, leader, fromJoiner[g], fromFirst[g])
		}
	}
	return ""
}

// coordinators is FindCoordinator of ids asked of s alone: each group's
// coordinator node id, -1 for an error.
func coordinators(ctx context.Context, t *testing.T, s *Server, ids []string) map[string]int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = ids
	resp, err := pinnedRequest(ctx, s.KafkaAddr().String(), req) // v4+: a batch of keys
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, c := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
		out[c.Key] = c.NodeID
		if kerr.ErrorForCode(c.ErrorCode) != nil {
			out[c.Key] = -1
		}
	}
	return out
}

// startOnce starts a server with cfg that is expected to fail, and
// returns Start's error (shutting it down either way).
func startOnce(t *testing.T, cfg Config) error {
	t.Helper()
	s, err := New(cfg, TestLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	_ = s.Shutdown(context.Background())
	return err
}

// withAdmin runs f with an admin client of s alone.
func withAdmin(t *testing.T, s *Server, f func(*kadm.Client)) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f(kadm.NewClient(cl))
}
