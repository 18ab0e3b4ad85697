package raftnet

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The shards of a node share its snapshot throttle: two snapshots sent
// at once by two shards' transports arrive whole, and together no faster
// than the one rate. (The bound checked is a floor, which a slow machine
// cannot break.)
func TestShardsShareTheSnapshotThrottle(t *testing.T) {
	throttle, err := NewSnapshotThrottle(MinSnapshotRate)
	if err != nil {
		t.Fatal(err)
	}
	recv, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 10*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	got := make(chan []byte, 2)
	go func() {
		for rpc := range recv.Consumer() {
			var b bytes.Buffer
			_, err := io.Copy(&b, rpc.Reader)
			got <- b.Bytes()
			rpc.Respond(&raft.InstallSnapshotResponse{Term: 1, Success: err == nil}, err)
		}
	}()

	const size = 3 * MinSnapshotRate / 2 // each; the two take 2 s at the rate, 1 s of it the burst
	var wg sync.WaitGroup
	start := time.Now()
	sent := make([][]byte, 2)
	for i := range sent {
		sent[i] = make([]byte, size)
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		for j := range sent[i] {
			sent[i][j] = byte(rng.Uint32())
		}
		nt, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 10*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		defer nt.Close()
		tr := Transport{unpipelinedTransport: unpipelinedTransport{nt}, match: newMatchTracker(), snapshots: throttle}
		wg.Go(func() {
			var resp raft.InstallSnapshotResponse
			args := &raft.InstallSnapshotRequest{Term: 1, LastLogIndex: 10, Size: size}
			if err := tr.InstallSnapshot("follower", recv.LocalAddr(), args, &resp, bytes.NewReader(sent[i])); err != nil || !resp.Success {
				t.Errorf("snapshot %d: %v, success %v", i, err, resp.Success)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	for range sent {
		b := <-got
		if !bytes.Equal(b, sent[0]) && !bytes.Equal(b, sent[1]) {
			t.Fatalf("a snapshot of %d bytes arrived changed (%d bytes)", size, len(b))
		}
	}
	if floor := time.Duration(float64(2*size-MinSnapshotRate) / MinSnapshotRate * float64(time.Second)); took < floor*9/10 {
		t.Fatalf("two snapshots of %d bytes took %v at %d bytes a second: the throttle let them through faster than %v", size, took, MinSnapshotRate, floor)
	}
}

func TestASnapshotThrottleBelowTheMinimumIsRefused(t *testing.T) {
	for _, r := range []int64{-1, 0, MinSnapshotRate - 1} {
		if _, err := NewSnapshotThrottle(r); !errors.Is(err, ErrSnapshotRate) {
			t.Errorf("rate %d: %v, want ErrSnapshotRate", r, err)
		}
	}
	if th, err := NewSnapshotThrottle(UnthrottledSnapshotRate); th != nil || err != nil {
		t.Errorf("the unthrottled rate gave %v, %v", th, err)
	}
	r := bytes.NewReader(nil)
	if got := (*SnapshotThrottle)(nil).reader(r); got != io.Reader(r) {
		t.Error("no throttle wrapped the reader")
	}
}
