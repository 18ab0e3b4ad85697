package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/server"
)

// TestStalledDiskIsInvisibleToClients: the disk of a group's coordinator
// stops answering (every write and fsync blocks; the process and its
// sockets stay, as with a dying disk). The node fences itself within
// kcoord.log.max.sync.ms: it stops leading, its shards elect elsewhere,
// and its /readyz says why. The group's franz-go members, on a 10 s
// session, keep their member ids and generation (no callback fires), every
// acknowledged commit stays, and they commit again through the new
// coordinator. When the disk answers again the node unfences and is ready,
// with nothing acknowledged lost.
func TestStalledDiskIsInvisibleToClients(t *testing.T) {
	t.Parallel()
	servers, seeds := startTestCluster(t)
	ctx := testContext(t, 90*time.Second)
	adm := newAdmin(t, seeds[0])
	const topic, group = "stall-topic", "stall-group"
	createTopic(ctx, t, adm, topic, groupPartitions)

	members := make([]*kgoMember, 3)
	for i := range members {
		members[i] = startKgoMember(ctx, t, seeds[i], group, topic, i, kgo.CooperativeStickyBalancer(),
			kgo.SeedBrokers(seeds...), kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second),
			kgo.WithLogger(kgo.BasicLogger(logWriter(t, fmt.Sprintf("kgo-%d", i)), kgo.LogLevelInfo, nil)))
	}
	waitFor(ctx, t, "three members to own all partitions", func(ctx context.Context) error {
		return checkGroup(ctx, adm, group, topic, groupPartitions, "cooperative-sticky", kgoView(members))
	})
	time.Sleep(time.Second) // the cooperative follow-up rebalance
	idsBefore, callbacksBefore := memberIDs(members), callbackCount(members)
	acked := map[int32]int64{}
	commitRound := func(round int, what string) {
		for i, m := range members {
			offsets := map[int32]int64{}
			for _, p := range m.owned.list() {
				offsets[p] = commitOffsetFor(i, p, round)
			}
			for {
				err := m.commit(ctx, topic, offsets)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("member %d never committed %s: %v", i, what, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for p, o := range offsets {
				acked[p] = o
			}
		}
	}
	commitRound(0, "before the stall")

	victim := coordinatorIndex(ctx, t, adm, group, servers)
	node := servers[victim].Node()
	t.Logf("stalling the disk of node %d, the group's coordinator", node.ID())
	stalled := time.Now()
	resume := node.DiskFaults().Stall()
	t.Cleanup(resume) // before the servers stop: their Raft waits on the disk
	survivor := seeds[(victim+1)%3]

	// A commit on the stalled coordinator makes a write that cannot
	// complete; the members' own commits do too. The raw probe finds the
	// new coordinator through a survivor.
	memberID, generation := members[0].cl.GroupMetadata()
	probe := members[0].owned.list()[0]
	took := rawCommitUntilAccepted(ctx, t, survivor, group, memberID, generation, topic, probe)
	acked[probe] = rawProbeOffset
	t.Logf("the group accepted a commit %v after the stall began (kcoord.log.max.sync.ms %v)", took, server.DefaultConfig().LogMaxSync)
	if h := node.DiskHealth(); !h.Fenced() {
		t.Fatalf("the stalled node is not fenced: %+v", h)
	}
	code, body := readyz(t, servers[victim])
	if code != 503 || !strings.Contains(body, "fenced: disk stalled") {
		t.Errorf("/readyz of the stalled node: %d %q, want 503 naming the stall", code, body)
	}
	commitRound(1, "during the stall")
	t.Logf("every member committed again %v after the stall began", time.Since(stalled))

	resume()
	waitFor(ctx, t, "the node to unfence and be ready", func(context.Context) error {
		if !servers[victim].Ready() {
			return fmt.Errorf("not ready: disk %+v", node.DiskHealth())
		}
		return nil
	})
	commitRound(2, "after the stall")
	got, err := fetchOffsets(ctx, newAdmin(t, seeds[victim]), group)
	if err != nil {
		t.Fatal(err)
	}
	for p, o := range acked {
		if got[topic][p].Offset != o {
			t.Fatalf("partition %d: offset %d after the stall, acknowledged %d", p, got[topic][p].Offset, o)
		}
	}
	if after := memberIDs(members); !slices.Equal(after, idsBefore) {
		t.Fatalf("member ids changed across the stall: %v -> %v", idsBefore, after)
	}
	if after := callbackCount(members); after != callbacksBefore {
		t.Fatalf("the stall caused a rebalance: %d partition callbacks fired", after-callbacksBefore)
	}
}

// readyz is a server's /readyz answer.
func readyz(t *testing.T, s *server.Server) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.HTTPHandler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}
