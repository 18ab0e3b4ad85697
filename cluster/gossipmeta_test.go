package cluster

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestOversizedMetaNeverHidesVotersSilently: a meta over memberlist's limit
// leaves out the bootstrap view before the voters once the node holds
// state, and says so when it must leave out the voters too, so a wiped
// voter is never cleared by a peer that could not list it.
func TestOversizedMetaNeverHidesVotersSilently(t *testing.T) {
	long := strings.Repeat("h", 200)
	self := nodeMeta{ID: 1, Kafka: long + ":9092", Raft: "r:9093", HasState: true, ClusterID: "c", Proposal: "c", Agreement: "a1b2c3d4e5f60718",
		View: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Voters: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	g := &gossip{logger: hclog.NewNullLogger(), self: self}
	full, _ := json.Marshal(self)
	noView := self
	noView.View, noView.Proposal, noView.Agreement = nil, "", ""
	fitsWithoutView, _ := json.Marshal(noView)

	var got nodeMeta
	if err := json.Unmarshal(g.NodeMeta(len(fitsWithoutView)+len(`,"v":2`)), &got); err != nil {
		t.Fatal(err)
	}
	if got.View != nil || got.Proposal != "" || got.Agreement != "" || len(got.Voters) != len(self.Voters) || got.VotersTruncated {
		t.Fatalf("meta at %d of %d bytes: view %v, proposal %q, agreement %q, voters %v, truncated %v; want the bootstrap record left out first",
			len(fitsWithoutView), len(full), got.View, got.Proposal, got.Agreement, got.Voters, got.VotersTruncated)
	}
	if !allAdvertiseVoters([]nodeMeta{got}) {
		t.Fatal("a meta with its voters in full does not count as advertising them")
	}

	g.big = false
	got = nodeMeta{}
	if err := json.Unmarshal(g.NodeMeta(len(fitsWithoutView)-10), &got); err != nil {
		t.Fatal(err)
	}
	if got.Voters != nil || !got.VotersTruncated {
		t.Fatalf("voters %v, truncated %v: leaving out the voters must be said", got.Voters, got.VotersTruncated)
	}
	if allAdvertiseVoters([]nodeMeta{got}) {
		t.Fatal("a peer that left its voters out clears the wiped-voter check")
	}
}

// TestOversizedMetaDropsItsSyncTimeFirst: a meta that does not fit
// leaves out its disk's sync time (a hint, which grows with the load)
// before its voters, and keeps saying whether the disk is slow; a meta
// whose voters are out and whose sync time would still not fit is sent
// without it rather than empty: a node with an empty meta is no member to
// its peers. (A wiped node restarted beside such peers never learned of
// them.)
func TestOversizedMetaDropsItsSyncTimeFirst(t *testing.T) {
	self := nodeMeta{ID: 1, Kafka: "k:9092", Raft: "r:9093", HasState: true, ClusterID: "c", Voters: []int32{1, 2, 3}}
	withVoters, _ := json.Marshal(self)
	slow := self
	slow.SyncMicros, slow.SlowDisk = 1<<20, true
	g := &gossip{logger: hclog.NewNullLogger(), self: slow}
	var got nodeMeta
	if err := json.Unmarshal(g.NodeMeta(len(withVoters)+len(`,"v":2,"slow":true`)), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Voters) != 3 || got.SyncMicros != 0 || !got.SlowDisk {
		t.Fatalf("voters %v, sync %d, slow %v: want the voters and slowness kept, the sync time left out", got.Voters, got.SyncMicros, got.SlowDisk)
	}
	g.big = false
	b := g.NodeMeta(len(withVoters) + len(`,"v":2,"slow":true`) - 1)
	got = nodeMeta{}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("meta %q: %v; want one without voters or the disk's speed", b, err)
	}
	if got.Voters != nil || !got.VotersTruncated || got.SyncMicros != 0 || !got.SlowDisk || got.ClusterID != "c" {
		t.Fatalf("got %+v: want the voters and the sync time left out, the rest kept", got)
	}
}

// TestStatefulMetaFitsItsBootstrapRecord: a node that bootstrapped keeps
// gossiping its proposal, view and agreement with its voters; with
// Kubernetes-length addresses, a five-node bootstrap and every field
// 0.2.0 added (its shard count included) that still fits memberlist's
// 512 bytes, so nothing is left out.
func TestStatefulMetaFitsItsBootstrapRecord(t *testing.T) {
	host := "kcoord-4.kcoord-headless.kafka-coordinators.svc.cluster.local"
	self := nodeMeta{ID: 5, Kafka: host + ":9092", Raft: host + ":9093", HasState: true, Expect: 5,
		ClusterID: "8b0c7a52-2f4e-4c1d-9a77-3f1e0d6b5c42", Proposal: "1f2e3d4c-5b6a-4978-8a6b-5c4d3e2f1a0b",
		View: []int32{1, 2, 3, 4, 5}, Agreement: "fedcba9876543210", Voters: []int32{1, 2, 3, 4, 5},
		Applies: 16, Disk: string(DiskStalled), SyncMicros: 1 << 20, SlowDisk: true, Release: "0.2.0", Levels: []int16{1, 2}, Shards: 1024}
	g := &gossip{logger: hclog.NewNullLogger(), self: self}
	b := g.NodeMeta(512)
	var got nodeMeta
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if g.big || got.Proposal != self.Proposal || got.Agreement != self.Agreement || len(got.View) != 5 || len(got.Voters) != 5 || got.Shards != self.Shards {
		t.Fatalf("%d-byte meta left something out: %s", len(b), b)
	}
	t.Logf("%d bytes: %s", len(b), b)
}
