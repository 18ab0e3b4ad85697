package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
	request := func(opt kgo.Opt) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := pinnedRequest(ctx, addr, kmsg.NewPtrMetadataRequest(), opt)
		return err
	}
	metadata := func() error { return request(scram512(testSuperuser, testSuperPass)) }
	// A stored user logs in through the store (the bootstrap superuser's
	// password is the node's own).
	cl, err := kgo.NewClient(kgo.SeedBrokers(servers[0].KafkaAddr().String()), scram512(testSuperuser, testSuperPass))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-pw"}}); err != nil {
		t.Fatal(err)
	}
	carol := func() error { return request(scram512("carol", "carol-pw")) }
	if err := metadata(); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	if err := carol(); err != nil {
		t.Fatalf("carol before the cut: %v", err)
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
	// A login it cannot check is no answer: the connection closes, and
	// the client does not take it for a wrong password.
	if err := carol(); err == nil || errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("carol logging in through the cut-off node: %v, want a closed connection", err)
	} else {
		t.Logf("carol, cut off: %v", err)
	}
	heal()
	for err := metadata(); err != nil; err = metadata() {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("the healed node does not serve: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
