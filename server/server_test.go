package server

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsReportShardsLed(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := TestConfig(t.TempDir())
	s, err := New(cfg, TestLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "kcoord_shards_led"); err != nil || n != 1 {
		t.Fatalf("kcoord_shards_led series: %d %v", n, err)
	}
	c := newCollector(s)
	if got := testutil.ToFloat64(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		all := make(chan prometheus.Metric, 64) // more than Collect sends
		c.Collect(all)
		close(all)
		for m := range all {
			if m.Desc() == c.shardsLed {
				ch <- m
			}
		}
	})); got != float64(s.ShardCount()) || s.ShardCount() != cfg.OffsetsTopicNumPartitions {
		t.Fatalf("shards led %v of %d, want all %d configured", got, s.ShardCount(), cfg.OffsetsTopicNumPartitions)
	}
}

func TestShutdownAfterFailedStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := TestConfig(t.TempDir())
	cfg.KafkaAddr = l.Addr().String() // taken
	s, err := New(cfg, TestLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("start on a taken port succeeded")
	}
	if s.Ready() {
		t.Fatal("a server that failed to start is ready")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal("second shutdown:", err)
	}
}

func TestInvalidConfigIsRefused(t *testing.T) {
	cfg := TestConfig(t.TempDir())
	cfg.OffsetsTopicNumPartitions = -1
	if _, err := New(cfg, nil, nil); err == nil {
		t.Fatal("a negative shard count accepted")
	}
}

func TestQuietLoggerKeepsWarnings(t *testing.T) {
	var buf strings.Builder
	base := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	l := quiet(base, hclog.Warn).Named("raft").With("shard", 3)
	l.Info("entering leader state")
	l.Warn("heartbeat failed")
	if out := buf.String(); strings.Contains(out, "entering leader") || !strings.Contains(out, "heartbeat failed") || !strings.Contains(out, "shard=3") {
		t.Fatalf("quiet logger wrote %q", out)
	}
	// The same message from every shard is logged once per window.
	buf.Reset()
	for shard := range 50 {
		quietRaft := l.With("shard", shard)
		quietRaft.Error("failed to dial peer")
	}
	if n := strings.Count(buf.String(), "failed to dial peer"); n != 1 {
		t.Fatalf("repeated error logged %d times:\n%s", n, buf.String())
	}
	// A shard's first election (no leader ever heard of) is a start, not
	// a warning; one after a lost leader is.
	buf.Reset()
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
	if buf.Len() != 0 {
		t.Errorf("a first election logged %q", buf.String())
	}
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "127.0.0.1:9093", "last-leader-id", "2")
	if !strings.Contains(buf.String(), "last-leader-id=2") {
		t.Errorf("an election after a lost leader logged %q", buf.String())
	}
	debug := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Debug})
	if quiet(debug, hclog.Warn) != debug {
		t.Fatal("a debug logger must not be quieted")
	}
}
