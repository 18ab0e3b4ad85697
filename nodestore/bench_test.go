package nodestore

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftbench "github.com/hashicorp/raft/bench"
)

// BenchmarkConcurrentStoreLogs appends from N shards at once, one writer
// per shard as Raft's main goroutine is, each StoreLogs holding 4 entries
// of 128 bytes. "node" is this package (one write-ahead log for every
// shard, group commit); "raft-boltdb" is a raft-boltdb file per shard, the
// baseline. One iteration is one StoreLogs call; compare appends/s.
//
//	go test ./nodestore -run '^$' -bench ConcurrentStoreLogs -benchtime 2000x -count 5
func BenchmarkConcurrentStoreLogs(b *testing.B) {
	for _, shards := range []int{1, 8, 16, 50} {
		b.Run(fmt.Sprintf("shards-%d/node", shards), func(b *testing.B) {
			syncs := &syncTimes{}
			s := openTestStoreWith(b, filepath.Join(b.TempDir(), "wal"), Options{ObserveSync: syncs.observe})
			stores := make([]raft.LogStore, shards)
			for i := range stores {
				stores[i] = shard(b, s, int32(i))
			}
			before := s.Stats()
			benchConcurrentStoreLogs(b, stores)
			st := s.Stats()
			b.ReportMetric(float64(st.Writes-before.Writes)/float64(st.Commits-before.Commits), "writes/commit")
			syncs.report(b)
		})
		b.Run(fmt.Sprintf("shards-%d/raft-boltdb", shards), func(b *testing.B) {
			dir := b.TempDir()
			stores := make([]raft.LogStore, shards)
			for i := range stores {
				bs, err := raftboltdb.NewBoltStore(filepath.Join(dir, fmt.Sprintf("%d.db", i)))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = bs.Close() })
				stores[i] = bs
			}
			benchConcurrentStoreLogs(b, stores)
		})
	}
}

// BenchmarkSyncLatencyBesideBulkWrites measures what
// kcoord.log.max.sync.ms must stay above: the slowest group commit of 50
// shards appending at once while another writer on the same file system
// writes and fsyncs 8 MiB at a time (a noisy neighbour: a backup, a
// compaction, another database). It reports the group commits' p50, p99,
// p99.9 and max write+fdatasync times.
//
//	go test ./nodestore -run '^$' -bench SyncLatencyBesideBulkWrites -benchtime 20000x
func BenchmarkSyncLatencyBesideBulkWrites(b *testing.B) {
	dir := b.TempDir()
	syncs := &syncTimes{}
	s := openTestStoreWith(b, filepath.Join(dir, "wal"), Options{ObserveSync: syncs.observe})
	stores := make([]raft.LogStore, 50)
	for i := range stores {
		stores[i] = shard(b, s, int32(i))
	}
	stop := make(chan struct{})
	var bulk sync.WaitGroup
	bulk.Go(func() {
		f, err := os.Create(filepath.Join(dir, "bulk"))
		if err != nil {
			b.Error(err)
			return
		}
		defer f.Close()
		chunk := make([]byte, 8<<20)
		for off := int64(0); ; off = (off + int64(len(chunk))) % (256 << 20) {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := f.WriteAt(chunk, off); err != nil {
				b.Error(err)
				return
			}
			_ = f.Sync()
		}
	})
	benchConcurrentStoreLogs(b, stores)
	close(stop)
	bulk.Wait()
	syncs.report(b)
}

// syncTimes collects Options.ObserveSync's durations.
type syncTimes struct {
	mu sync.Mutex
	d  []time.Duration
}

func (t *syncTimes) observe(d time.Duration) {
	t.mu.Lock()
	t.d = append(t.d, d)
	t.mu.Unlock()
}

// report adds the group commits' sync-time quantiles to b's results.
func (t *syncTimes) report(b *testing.B) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.d) == 0 {
		return
	}
	slices.Sort(t.d)
	q := func(p float64) float64 {
		return float64(t.d[min(int(p*float64(len(t.d))), len(t.d)-1)].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "sync-p50-ms")
	b.ReportMetric(q(0.99), "sync-p99-ms")
	b.ReportMetric(q(0.999), "sync-p99.9-ms")
	b.ReportMetric(float64(t.d[len(t.d)-1].Microseconds())/1000, "sync-max-ms")
}

func benchConcurrentStoreLogs(b *testing.B, stores []raft.LogStore) {
	const perCall = 4
	data := make([]byte, 128)
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, st := range stores {
		wg.Go(func() {
			next := uint64(1)
			logs := make([]*raft.Log, perCall)
			for left.Add(-1) >= 0 {
				for i := range logs {
					logs[i] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data}
					next++
				}
				if err := st.StoreLogs(logs); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// The single-store benchmarks raft-boltdb runs (hashicorp/raft/bench), on
// one shard of a node store: what a shard pays when it writes alone.
// raftbench's StoreLog stores index 0 and its DeleteRange deletes ranges
// of a log with gaps, which a monotonic store refuses (ErrNonSequential);
// storeLogBench and deleteRangeBench measure the same calls on the log
// shape Raft gives it.
func BenchmarkShardStore(b *testing.B) {
	for _, bench := range []struct {
		name string
		run  func(*testing.B, *ShardStore)
	}{
		{"FirstIndex", func(b *testing.B, ss *ShardStore) { raftbench.FirstIndex(b, ss) }},
		{"LastIndex", func(b *testing.B, ss *ShardStore) { raftbench.LastIndex(b, ss) }},
		{"GetLog", func(b *testing.B, ss *ShardStore) { raftbench.GetLog(b, ss) }},
		{"StoreLog", storeLogBench},
		{"StoreLogs", func(b *testing.B, ss *ShardStore) { raftbench.StoreLogs(b, ss) }},
		{"DeleteRange", deleteRangeBench},
		{"Set", func(b *testing.B, ss *ShardStore) { raftbench.Set(b, ss) }},
		{"Get", func(b *testing.B, ss *ShardStore) { raftbench.Get(b, ss) }},
		{"SetUint64", func(b *testing.B, ss *ShardStore) { raftbench.SetUint64(b, ss) }},
		{"GetUint64", func(b *testing.B, ss *ShardStore) { raftbench.GetUint64(b, ss) }},
	} {
		b.Run(bench.name, func(b *testing.B) { bench.run(b, shard(b, openTestStore(b), 0)) })
	}
}

// storeLogBench is raftbench.StoreLog from index 1: one entry per call.
func storeLogBench(b *testing.B, ss *ShardStore) {
	for n := range b.N {
		if err := ss.StoreLog(&raft.Log{Index: uint64(n) + 1, Data: []byte("data")}); err != nil {
			b.Fatal(err)
		}
	}
}

// deleteRangeBench is raftbench.DeleteRange on a log without gaps: each
// call deletes the oldest 3 entries, as a compaction does.
func deleteRangeBench(b *testing.B, ss *ShardStore) {
	var logs []*raft.Log
	for i := range 3 * b.N {
		logs = append(logs, &raft.Log{Index: uint64(i) + 1, Data: []byte("data")})
	}
	if err := ss.StoreLogs(logs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for n := range b.N {
		if err := ss.DeleteRange(uint64(3*n)+1, uint64(3*n)+3); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoneStoreLog is one shard storing one entry per call, nothing
// else writing: a commit's whole latency, a write and a flush. "append"
// grows the file with every commit (no zeroed room); "zeroed" writes over
// the room zeroAhead keeps, as the store does by default. Compare ns/op.
//
//	go test ./nodestore -run '^$' -bench LoneStoreLog -benchtime 2000x -count 5
func BenchmarkLoneStoreLog(b *testing.B) {
	for _, tc := range []struct {
		name string
		room int64
	}{{"append", -1}, {"zeroed", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			s := openTestStoreWith(b, filepath.Join(b.TempDir(), "wal"), Options{zeroRoom: tc.room})
			storeLogBench(b, shard(b, s, 0))
		})
	}
}

// BenchmarkOpen is a node's restart as far as its log goes: Open replays
// every segment of a log that 16 shards filled as a busy node does
// (entries of 400 bytes, 4 a write, each shard compacted to its last
// 10,240 entries every 8,192, as Raft's snapshots do). One iteration is
// an Open and a Close of the same directory; compare ns/op, and MB/s over
// the segments' bytes.
//
//	go test ./nodestore -run '^$' -bench 'BenchmarkOpen$' -benchtime 5x
func BenchmarkOpen(b *testing.B) {
	const (
		shards    = 16
		perShard  = 40_000
		batch     = 4
		threshold = 8192
		trailing  = 10240
	)
	dir := filepath.Join(b.TempDir(), "wal")
	s, err := Open(dir, Options{UnsafeSkipSync: true, Logger: testLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 400)
	var wg sync.WaitGroup
	for id := range int32(shards) {
		ss := shard(b, s, id)
		wg.Go(func() {
			snapshotAt := uint64(threshold)
			for i := uint64(1); i <= perShard; i += batch {
				logs := make([]*raft.Log, batch)
				for j := range logs {
					logs[j] = &raft.Log{Index: i + uint64(j), Term: 1, Type: raft.LogCommand, Data: data}
				}
				if err := ss.StoreLogs(logs); err != nil {
					b.Error(err)
					return
				}
				if last := i + batch - 1; last >= snapshotAt {
					snapshotAt += threshold
					if last > trailing {
						first, _ := ss.FirstIndex()
						if err := ss.DeleteRange(first, last-trailing); err != nil {
							b.Error(err)
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	var size int64
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	for _, p := range segs {
		if fi, err := os.Stat(p); err == nil {
			size += fi.Size()
		}
	}
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(segs)), "segments")
}
