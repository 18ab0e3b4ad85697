package fsm

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// clusterFSM is what ShardFSM and MetaFSM share for the cluster id.
type clusterFSM interface {
	raft.FSM
	ClusterID() string
}

func bothFSMs() map[string]func() clusterFSM {
	return map[string]func() clusterFSM{
		"shard": func() clusterFSM { return NewShardFSM(3, nil) },
		"meta":  func() clusterFSM { return NewMetaFSM(nil) },
	}
}

func TestFirstClusterStampSetsTheClusterID(t *testing.T) {
	for name, newFSM := range bothFSMs() {
		t.Run(name, func(t *testing.T) {
			f := newFSM()
			if id := f.ClusterID(); id != "" {
				t.Fatalf("new FSM has cluster id %q", id)
			}
			if r := apply(t, f, 1, &ClusterStamp{ID: "cluster-\xfe"}); r != nil {
				t.Fatalf("first stamp: %v", r)
			}
			if id := f.ClusterID(); id != "cluster-\xfe" {
				t.Fatalf("cluster id %q after the first stamp", id)
			}
		})
	}
}

func TestRepeatedClusterStampChangesNothing(t *testing.T) {
	for name, newFSM := range bothFSMs() {
		t.Run(name, func(t *testing.T) {
			f := newFSM()
			apply(t, f, 1, &ClusterStamp{ID: "c1"})
			if r := apply(t, f, 2, &ClusterStamp{ID: "c1"}); r != nil {
				t.Fatalf("repeated stamp: %v", r)
			}
			if id := f.ClusterID(); id != "c1" {
				t.Fatalf("cluster id %q", id)
			}
		})
	}
}

func TestStampOfAnotherClusterIsRefusedAndKeepsTheClusterID(t *testing.T) {
	for name, newFSM := range bothFSMs() {
		t.Run(name, func(t *testing.T) {
			f := newFSM()
			apply(t, f, 1, &ClusterStamp{ID: "c1"})
			// Ids that a text encoding would confuse are different clusters too.
			for i, other := range []string{"c2", "", "c1\x00", "C1"} {
				r := apply(t, f, uint64(i+2), &ClusterStamp{ID: other})
				if err, _ := r.(error); !errors.Is(err, ErrClusterIDMismatch) {
					t.Fatalf("stamp %q: response %v, want ErrClusterIDMismatch", other, r)
				}
			}
			if id := f.ClusterID(); id != "c1" {
				t.Fatalf("cluster id %q after refused stamps", id)
			}
		})
	}
	f := NewMetaFSM(nil)
	apply(t, f, 1, &ClusterStamp{ID: "x-a\xfe"})
	if r := apply(t, f, 2, &ClusterStamp{ID: "x-a\xff"}); r != ErrClusterIDMismatch {
		t.Fatalf("FFFD-equal ids: %v", r)
	}
}

func TestEmptyClusterStampLeavesAnUnstampedFSMUnstamped(t *testing.T) {
	for name, newFSM := range bothFSMs() {
		t.Run(name, func(t *testing.T) {
			f := newFSM()
			if r := apply(t, f, 1, &ClusterStamp{}); r != nil {
				t.Fatalf("empty stamp: %v", r)
			}
			if r := apply(t, f, 2, &ClusterStamp{ID: "c1"}); r != nil || f.ClusterID() != "c1" {
				t.Fatalf("stamp after an empty one: %v, id %q", r, f.ClusterID())
			}
		})
	}
}

func TestClusterIDSurvivesSnapshotAndRestore(t *testing.T) {
	for name, newFSM := range bothFSMs() {
		t.Run(name, func(t *testing.T) {
			f := newFSM()
			apply(t, f, 1, &ClusterStamp{ID: "c\xed\xa0\x80"})
			restored := newFSM()
			roundTrip(t, f, restored)
			if id := restored.ClusterID(); id != "c\xed\xa0\x80" {
				t.Fatalf("restored cluster id %q", id)
			}
			if r := apply(t, restored, 2, &ClusterStamp{ID: "other"}); r != ErrClusterIDMismatch {
				t.Fatalf("foreign stamp after restore: %v", r)
			}
			// Restoring an unstamped snapshot clears it.
			roundTrip(t, newFSM(), restored)
			if id := restored.ClusterID(); id != "" {
				t.Fatalf("cluster id %q after restoring an unstamped snapshot", id)
			}
		})
	}
}
