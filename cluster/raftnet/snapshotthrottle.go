package raftnet

import (
	"context"
	"fmt"
	"io"
	"math"

	"golang.org/x/time/rate"
)

// SnapshotThrottle bounds the bytes a node sends of Raft snapshots per
// second, over every shard at once: leader.replication.throttled.rate,
// the bound Kafka puts on the replication of replicas being moved. A
// snapshot goes to a replica placement adds (a replica move) or to one
// that fell behind the leader's log, and at a million groups one is tens
// of megabytes: sent at the speed of loopback, several at once take the
// CPU and the disk the shards' commits need. The shards' transports share
// one throttle (TransportConfig.SnapshotThrottle); the replication
// goroutines of raft that send snapshots wait on it, nothing else does.
type SnapshotThrottle struct {
	lim *rate.Limiter
}

// snapshotChunk is the most a throttled snapshot read asks of the
// throttle at once (and the throttle's burst): a second's worth at the
// smallest rate.
const snapshotChunk = MinSnapshotRate

// MinSnapshotRate is the smallest rate a SnapshotThrottle takes, in bytes
// a second. raft's NetworkTransport gives a snapshot's send a deadline of
// its Timeout per 256 KiB, and the snapshots a node sends at once share
// the rate: at 1 MiB/s and serve's 10 s Timeout, some forty can be under
// way before a send would outlast its deadline (placement moves at most
// kcoord.placement.max.concurrent.moves shards at a time).
const MinSnapshotRate = 1 << 20

// UnthrottledSnapshotRate is the rate that leaves snapshots unthrottled
// (Kafka's default for leader.replication.throttled.rate, Long.MAX_VALUE).
const UnthrottledSnapshotRate = math.MaxInt64

// NewSnapshotThrottle returns a throttle of bytesPerSecond, at least
// MinSnapshotRate; UnthrottledSnapshotRate gives nil, which throttles
// nothing.
func NewSnapshotThrottle(bytesPerSecond int64) (*SnapshotThrottle, error) {
	if bytesPerSecond == UnthrottledSnapshotRate {
		return nil, nil
	}
	if bytesPerSecond < MinSnapshotRate {
		return nil, fmt.Errorf("%w: %d bytes a second, at least %d", ErrSnapshotRate, bytesPerSecond, MinSnapshotRate)
	}
	return &SnapshotThrottle{lim: rate.NewLimiter(rate.Limit(bytesPerSecond), snapshotChunk)}, nil
}

// reader returns r read no faster than the throttle allows (r itself
// when t is nil).
func (t *SnapshotThrottle) reader(r io.Reader) io.Reader {
	if t == nil {
		return r
	}
	return &throttledReader{r: r, lim: t.lim}
}

// throttledReader reads at most snapshotChunk bytes at a time and waits
// for the throttle's leave for what it read before it hands it over.
type throttledReader struct {
	r   io.Reader
	lim *rate.Limiter
}

func (t *throttledReader) Read(p []byte) (int, error) {
	if len(p) > snapshotChunk {
		p = p[:snapshotChunk]
	}
	n, err := t.r.Read(p)
	if n > 0 {
		// Waits until the rate allows n more bytes, behind the other
		// snapshots sending meanwhile; it cannot fail (n ≤ the burst, and
		// the context never ends).
		_ = t.lim.WaitN(context.Background(), n)
	}
	return n, err
}
