package bench

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Stopping the probe waits for the commit in flight and counts it: the
// slowest commits of a phase are the ones still in flight at its end.
func TestStoppingTheProbeCountsTheCommitInFlight(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	topicID, err := ensureTopic(ctx, kadm.NewClient(adm), "probe")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	commits := 0
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if commits++; commits == 2 { // hold the second commit until released
			close(entered)
			<-release
		}
		return nil, nil, false
	})
	p, err := startCommitProbe(ctx, fake.ListenAddrs(), 1, 3, func(k int) string { return "g" }, "probe", topicID, 1)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	stopped := make(chan struct{})
	go func() { p.stop(); close(stopped) }()
	time.Sleep(100 * time.Millisecond) // stop is waiting for the commit in flight
	close(release)
	<-stopped
	w := p.window(time.Time{}, time.Now(), nil)
	if w.Commits != 2 || w.Errors != 0 {
		t.Fatalf("%v; want both commits counted, the one in flight at stop too", w)
	}
}
