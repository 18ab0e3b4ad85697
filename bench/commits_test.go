package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/server"
)

func TestCommitsAgainstKcoordAndKfake(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	kcoord := server.StartTestServer(t, server.TestConfig(t.TempDir()))
	for name, addr := range map[string]string{"kfake": fake.ListenAddrs()[0], "kcoord": kcoord.KafkaAddr().String()} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg := DefaultCommitsConfig()
			cfg.Brokers, cfg.Clients, cfg.Duration, cfg.Warmup = []string{addr}, 4, time.Second, 200*time.Millisecond
			r, err := Commits(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if r.Commits == 0 || r.Errors != 0 || r.P50 > r.P99 || r.P99 > r.Max || r.Clients != 4 {
				t.Errorf("result %+v", r)
			}
			// The groups hold what was committed: a second run on the
			// same topic and groups works too (the topic exists).
			cfg.Duration = 200 * time.Millisecond
			if _, err := Commits(ctx, cfg); err != nil {
				t.Errorf("second run: %v", err)
			}
		})
	}
}

// With Groups, clients share groups and each commits its own partition,
// as the members of a group do: every group ends up with a committed
// offset for each of its clients' partitions.
func TestCommitsSharesGroupsAmongClients(t *testing.T) {
	srv := server.StartTestServer(t, server.TestConfig(t.TempDir()))
	addr := srv.KafkaAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := DefaultCommitsConfig()
	cfg.Brokers, cfg.Clients, cfg.Groups, cfg.Duration, cfg.Warmup = []string{addr}, 6, 2, 500*time.Millisecond, 100*time.Millisecond
	cfg.Topic, cfg.Prefix = "shared", "shared"
	r, err := Commits(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Commits == 0 || r.Errors != 0 {
		t.Fatalf("result %+v", r)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for g := range 2 {
		group := fmt.Sprintf("shared-%d", g)
		offsets, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("%s: %v", group, err)
		}
		for p := range int32(3) {
			if o, ok := offsets.Lookup("shared", p); !ok || o.At < 1 {
				t.Errorf("%s partition %d: %+v, %v; want a commit from its client", group, p, o, ok)
			}
		}
		if _, ok := offsets.Lookup("shared", 3); ok {
			t.Errorf("%s has an offset for partition 3, which no client of it commits", group)
		}
	}
	// A topic too small for the clients a group has is named, not
	// committed to.
	cfg.Groups = 1
	if _, err := Commits(ctx, cfg); err == nil || !strings.Contains(err.Error(), "3 partitions, 6 needed") {
		t.Errorf("6 clients in one group on a 3-partition topic: %v", err)
	}
}

func TestCommitsRefusesNoClients(t *testing.T) {
	cfg := DefaultCommitsConfig()
	cfg.Clients = 0
	if _, err := Commits(context.Background(), cfg); err == nil {
		t.Error("0 clients accepted")
	}
	for _, groups := range []int{-1, 65} {
		cfg := DefaultCommitsConfig()
		cfg.Groups = groups
		if _, err := Commits(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "groups") {
			t.Errorf("%d groups for %d clients: %v", groups, cfg.Clients, err)
		}
	}
}

func TestQuantileIsNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if p99, p50 := quantile(d, 0.99), quantile(d, 0.5); p99 != 99 || p50 != 50 {
		t.Errorf("p99 %d, p50 %d of 1..100; want 99 and 50", p99, p50)
	}
	if got := quantile(d[:1], 0.99); got != 1 {
		t.Errorf("p99 of one sample = %d", got)
	}
}
