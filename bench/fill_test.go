package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/server"
)

func TestFillStoresEveryPartitionOfEveryGroup(t *testing.T) {
	s := server.StartTestServer(t, server.TestConfig(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := DefaultFillConfig()
	cfg.Brokers, cfg.Groups, cfg.Partitions, cfg.Committers = []string{s.KafkaAddr().String()}, 30, 4, 3
	r, err := Fill(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	if r.Groups != 30 || r.Lost != 0 || r.Errors != 0 || r.PerSecond() <= 0 {
		t.Errorf("result %+v", r)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, g := range []string{"kcoord-fill-0", "kcoord-fill-17", "kcoord-fill-29"} {
		offsets, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		if n := len(offsets[cfg.Topic]); n != 4 {
			t.Errorf("%s holds offsets of %d partitions, want 4", g, n)
		}
		for p, o := range offsets[cfg.Topic] {
			if o.Err != nil || o.At < 1 {
				t.Errorf("%s partition %d: offset %d, %v", g, p, o.At, o.Err)
			}
		}
	}
	if offsets, err := adm.FetchOffsets(ctx, "kcoord-fill-30"); err != nil || len(offsets) != 0 {
		t.Errorf("a group past the fill: %v, %v", offsets, err)
	}
}

func TestFillRefusesNoGroups(t *testing.T) {
	cfg := DefaultFillConfig()
	cfg.Groups = 0
	if _, err := Fill(context.Background(), cfg); !errors.Is(err, ErrFillConfig) {
		t.Errorf("err = %v, want ErrFillConfig", err)
	}
}
