package bench

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

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

func TestCommitsRefusesNoClients(t *testing.T) {
	cfg := DefaultCommitsConfig()
	cfg.Clients = 0
	if _, err := Commits(context.Background(), cfg); err == nil {
		t.Error("0 clients accepted")
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
