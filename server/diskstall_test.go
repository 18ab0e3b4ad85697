package server

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kcoord/kcoord/cluster"
)

// TestSingleNodeServesAgainAfterItsDiskStalls: a single node (the embedded
// default) has no one to hand its shards to. While its disk stalls it
// fences itself: /readyz says why, the disk metrics say so, and commits
// are refused with a retriable error instead of hanging. Once the disk
// answers it serves again by itself, with every offset acknowledged
// before the stall.
func TestSingleNodeServesAgainAfterItsDiskStalls(t *testing.T) {
	cfg := TestConfig(t.TempDir())
	cfg.LogMaxSync = 300 * time.Millisecond
	reg := prometheus.NewRegistry()
	s, err := New(cfg, TestLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaAddr().String()), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	commit := func(offset int64) error {
		resp, err := adm.CommitOffsets(ctx, "stall-group", kadm.OffsetsFromRecords(kgo.Record{Topic: "t", Partition: 0, Offset: offset - 1}))
		if err != nil {
			return err
		}
		return resp.Error()
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	for commit(7) != nil { // the topic reaches the registry first
		if ctx.Err() != nil {
			t.Fatal("the first commit was never accepted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := commit(7); err != nil {
		t.Fatal(err)
	}

	resume := s.Node().DiskFaults().Stall()
	t.Cleanup(resume)
	// The commit that finds the disk stalled waits for it until the node
	// fences itself, then fails retriably; so do the ones after.
	for {
		err := commit(8)
		if err == nil {
			t.Fatal("a commit was acknowledged while the only node's disk stalled")
		}
		if !errors.Is(err, kerr.NotCoordinator) && !errors.Is(err, kerr.CoordinatorNotAvailable) && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("commit during the stall: %v", err)
		}
		if s.Node().DiskHealth().Fenced() {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the node never fenced itself")
		}
	}
	rec := httptest.NewRecorder()
	s.HTTPHandler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	if rec.Code != 503 || !strings.Contains(string(body), "fenced: disk stalled") || !strings.Contains(string(body), "kcoord.log.max.sync.ms") {
		t.Errorf("/readyz while fenced: %d %q", rec.Code, body)
	}
	if got := testutil.ToFloat64(collectorMetric(t, reg, "kcoord_log_disk_healthy")); got != 0 {
		t.Errorf("kcoord_log_disk_healthy while fenced = %v, want 0", got)
	}
	if err := commit(9); err == nil {
		t.Fatal("a commit was acknowledged by a fenced node")
	}

	resume()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("the node did not serve again after its disk answered: %v (disk %+v)", err, s.Node().DiskHealth())
	}
	for {
		if err := commit(10); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("no commit accepted after the stall: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	offsets, err := adm.FetchOffsets(ctx, "stall-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offsets.Lookup("t", 0); o.At != 10 {
		t.Fatalf("offset after the stall: %d, want 10", o.At)
	}
	if h := s.Node().DiskHealth(); h.State != cluster.DiskHealthy {
		t.Fatalf("disk after recovery: %+v", h)
	}
	if got := testutil.ToFloat64(collectorMetric(t, reg, "kcoord_log_disk_fences_total")); got != 1 {
		t.Errorf("kcoord_log_disk_fences_total = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(reg, "kcoord_log_sync_seconds"); n != 1 {
		t.Errorf("kcoord_log_sync_seconds: %d series, want 1", n)
	}
}

// collectorMetric is the one series of name among what reg gathers, as a
// collector testutil.ToFloat64 reads.
func collectorMetric(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: name}, func() float64 { return v })
		}
	}
	t.Fatalf("no single series %s", name)
	return nil
}
