package cluster

import (
	"sync"
	"testing"
	"time"
)

// GossipAddr may be read while the node re-announces its meta (the disk
// watch does, every second), and two goroutines may announce at once:
// memberlist rewrites its local node then, without a lock of its own, so
// the address is read once at start and announcements take turns (the
// race detector caught both in CI).
func TestGossipAddrIsSafeWhileTheNodeAnnounces(t *testing.T) {
	n := startGossipCluster(t, 1, 1)[0].Node
	want := n.GossipAddr()
	var wg sync.WaitGroup
	stop := time.Now().Add(200 * time.Millisecond)
	wg.Go(func() {
		for time.Now().Before(stop) {
			n.gossip.updateSelf(func(m *nodeMeta) { m.SyncMicros++ })
			n.gossip.announce()
		}
	})
	for time.Now().Before(stop) {
		if got := n.GossipAddr(); got != want {
			t.Fatalf("GossipAddr changed from %s to %s", want, got)
		}
	}
	wg.Wait()
}
