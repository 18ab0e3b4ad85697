package nodestore

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// The replay's per-shard log is the map it replaced: for any writes and
// deletes, in any order (relocated copies arrive below what is there), it
// holds the same entries at the same places, and rebuild finds the same
// run, or the same hole.
func TestReplayLogHoldsWhatAMapWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	for trial := range 2000 {
		rl, ref := &replayLog{}, map[uint64]loc{}
		for op := range 1 + rng.IntN(30) {
			lo := 1 + uint64(rng.IntN(200))
			hi := lo + uint64(rng.IntN(40))
			if rng.IntN(3) == 0 {
				rl.delete(lo, hi)
				for k := lo; k <= hi; k++ {
					delete(ref, k)
				}
				continue
			}
			var indexes []uint64
			var entries []loc
			for k := lo; k <= hi; k++ {
				if rng.IntN(5) == 0 {
					continue // sparse records too
				}
				l := loc{seq: uint32(trial), off: int64(op*1000) + int64(k), n: 100}
				indexes, entries = append(indexes, k), append(entries, l)
				ref[k] = l
			}
			if err := rl.set(0, indexes, entries); err != nil {
				t.Fatal(err)
			}
		}
		if rl.count != len(ref) {
			t.Fatalf("trial %d: %d entries, the map holds %d", trial, rl.count, len(ref))
		}
		for i, l := range rl.locs {
			if want, ok := ref[rl.base+uint64(i)]; l.n != 0 && (!ok || want != l) || l.n == 0 && ok {
				t.Fatalf("trial %d: index %d holds %+v, the map %+v (%v)", trial, rl.base+uint64(i), l, want, ok)
			}
		}
		segs := map[uint32]*segment{uint32(trial): {}}
		x := newShardIndex(0)
		err := x.rebuild(rl, segs)
		first, last := ^uint64(0), uint64(0)
		for k := range ref {
			first, last = min(first, k), max(last, k)
		}
		oneRun := len(ref) == 0 || last-first+1 == uint64(len(ref))
		switch {
		case oneRun && err != nil:
			t.Fatalf("trial %d: one run of %d entries refused: %v", trial, len(ref), err)
		case !oneRun && !errors.Is(err, ErrCorrupt):
			t.Fatalf("trial %d: a hole among %d entries not found: %v", trial, len(ref), err)
		case oneRun && len(ref) > 0 && (x.first != first || len(x.locs) != len(ref) || segs[uint32(trial)].live != len(ref)):
			t.Fatalf("trial %d: rebuilt %d entries from %d, want %d from %d", trial, len(x.locs), x.first, len(ref), first)
		}
	}
}

// An index far from the rest is refused before it allocates.
func TestReplayLogRefusesAnIndexFarFromTheRest(t *testing.T) {
	rl := &replayLog{}
	if err := rl.set(3, []uint64{5}, []loc{{n: 10}}); err != nil {
		t.Fatal(err)
	}
	if err := rl.set(3, []uint64{5 + maxReplaySpan}, []loc{{n: 10}}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an entry %d indexes away: %v, want ErrCorrupt", uint64(maxReplaySpan), err)
	}
}
