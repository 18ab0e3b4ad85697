package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/cluster"
)

// A node cut off from the metadata leader for longer than
// kcoord.metadata.max.staleness.ms may hold an ACL or a user the others
// have removed: it serves an authenticated client only after catching up
// with the leader, and closes the connection when it cannot, so the client
// goes to a node that knows. Healed, it serves again.
func TestACutOffNodeStopsServingAuthenticatedClients(t *testing.T) {
	const maxStaleness = 400 * time.Millisecond
	servers := StartTestCluster(t, 3, func(i int, c *Config) {
		c.SASLEnabledMechanisms, c.SASLSuperuser, c.SASLSuperuserPassword = "SCRAM-SHA-512", testSuperuser, testSuperPass
		c.MetadataMaxStaleness = maxStaleness
	})
	waitAllReady(t, servers)
	ctx := testCtx(t, 60*time.Second)
	var victim *Server
	for _, s := range servers {
		if !s.Node().Shard(cluster.MetaShard).IsLeader() {
			victim = s
			break
		}
	}
	addr := victim.KafkaAddr().String()
	metadata := func() error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := pinnedRequest(ctx, addr, kmsg.NewPtrMetadataRequest(), scram512(testSuperuser, testSuperPass))
		return err
	}
	if err := metadata(); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	heal := victim.Node().Faults().Isolate()
	defer heal()
	deadline := time.Now().Add(10 * time.Second)
	for victim.Node().MetadataFresh(maxStaleness) {
		if time.Now().After(deadline) {
			t.Fatal("the isolated node still trusts its replica")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := metadata(); err == nil {
		t.Fatal("a node cut off from the metadata leader served an authenticated client")
	} else {
		t.Logf("cut off: %v", err)
	}
	heal()
	for err := metadata(); err != nil; err = metadata() {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("the healed node does not serve: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
