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
	self := nodeMeta{ID: 1, Kafka: long + ":9092", Raft: "r:9093", HasState: true, ClusterID: "c",
		View: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Voters: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	g := &gossip{logger: hclog.NewNullLogger(), self: self}
	full, _ := json.Marshal(self)
	noView := self
	noView.View = nil
	fitsWithoutView, _ := json.Marshal(noView)

	var got nodeMeta
	if err := json.Unmarshal(g.NodeMeta(len(fitsWithoutView)+len(`,"v":2`)), &got); err != nil {
		t.Fatal(err)
	}
	if got.View != nil || len(got.Voters) != len(self.Voters) || got.VotersTruncated {
		t.Fatalf("meta at %d of %d bytes: view %v, voters %v, truncated %v; want the view left out first",
			len(fitsWithoutView), len(full), got.View, got.Voters, got.VotersTruncated)
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
