package raftnet

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestPeerDeathsProbe: a probe of a closed port proves a death, a probe of
// a listening one clears it, and a connection opening clears it too.
func TestPeerDeathsProbe(t *testing.T) {
	d := newPeerDeaths(testLogger(t))
	defer d.close()
	var changes atomic.Int32
	deaths := make(chan string, 4)
	d.Watch(func(addr string) { deaths <- addr }, func() { changes.Add(1) })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	d.Suspect(addr)
	time.Sleep(100 * time.Millisecond)
	if d.IsDead(addr) {
		t.Fatal("a listening peer was declared dead")
	}
	_ = ln.Close()
	d.Suspect(addr)
	select {
	case got := <-deaths:
		if got != addr {
			t.Fatalf("death of %s told, want %s", got, addr)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a closed port was not proven dead")
	}
	if !d.IsDead(addr) {
		t.Fatal("death not recorded")
	}
	d.alive(addr)
	if d.IsDead(addr) {
		t.Fatal("an opened connection did not clear the death")
	}
	if n := changes.Load(); n != 2 {
		t.Fatalf("%d changes told, want 2 (death, revival)", n)
	}
}

// TestARestartedPeerIsAliveAgainWithoutTraffic: a peer recorded dead that
// listens again on its address is found alive by the periodic re-probe,
// even when nothing dials it (a restarted node that leads nothing this
// node follows); and a refused dial older than a connection that opened
// since proves nothing.
func TestARestartedPeerIsAliveAgainWithoutTraffic(t *testing.T) {
	d := newPeerDeaths(testLogger(t))
	defer d.close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	d.Suspect(addr)
	eventually(t, 2*time.Second, "the closed port proven dead", func() bool { return d.IsDead(addr) })
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	defer ln.Close()
	eventually(t, 3*reprobeInterval, "the re-probe finds the peer alive", func() bool { return !d.IsDead(addr) })

	staleDial := time.Now().Add(-time.Second)
	d.alive(addr)
	d.declare(addr, staleDial)
	if d.IsDead(addr) {
		t.Fatal("a refusal older than the peer's last connection was recorded as a death")
	}
}
