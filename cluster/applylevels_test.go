package cluster

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
)

// TestMetadataChangesWaitForEveryReplicaToApplyThem: a leader writes a
// command type only once every server of the metadata group gossiped that
// it applies it; a replica of a release that gossips nothing, or that this
// node has not heard from, holds it back (a rolling upgrade's old node
// would panic applying it).
func TestMetadataChangesWaitForEveryReplicaToApplyThem(t *testing.T) {
	n := &Node{cfg: Config{NodeID: 1}}
	conf := raft.Configuration{Servers: []raft.Server{
		{ID: serverID(1), Suffrage: raft.Voter}, {ID: serverID(2), Suffrage: raft.Voter}, {ID: serverID(3), Suffrage: raft.Nonvoter},
	}}
	n.applies.record(2, int(fsm.LatestCommandType))
	n.applies.record(3, 0) // a release before Applies was gossiped
	if got := n.replicasBehind(conf, fsm.ScramCredentialSetType); len(got) != 1 || got[0] != 3 {
		t.Fatalf("behind %v, want [3]", got)
	}
	n.applies.record(3, int(fsm.ScramCredentialDeleteType))
	if got := n.replicasBehind(conf, fsm.ScramCredentialSetType); len(got) != 0 {
		t.Fatalf("behind %v for SCRAM once node 3 applies it", got)
	}
	if got := n.replicasBehind(conf, fsm.ACLCreateType); len(got) != 1 || got[0] != 3 {
		t.Fatalf("behind %v for ACLs, want [3]", got)
	}
	conf.Servers = append(conf.Servers, raft.Server{ID: serverID(4), Suffrage: raft.Voter})
	if got := n.replicasBehind(conf, fsm.ScramCredentialSetType); len(got) != 1 || got[0] != 4 {
		t.Fatalf("behind %v with a voter never heard from, want [4]", got)
	}
	n.applies.own = int(fsm.TopicDeleteType)
	if got := n.replicasBehind(conf, fsm.ScramCredentialSetType); len(got) != 2 || got[0] != 1 {
		t.Fatalf("behind %v when this node plays an older release, want [1 4]", got)
	}
	if err := n.checkReplicasApply(fsm.TopicCreateType); err != nil {
		t.Fatalf("a topic change, which every release applies: %v", err)
	}
}
