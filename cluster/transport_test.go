package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestShardTransportsReplicateWithoutPipelining pins the workaround for
// hashicorp/raft's pipeline deadlock (see unpipelinedTransport): a shard's
// transport refuses AppendEntries pipelines, so Raft replicates one RPC at
// a time and a planned stop is not held by a stuck replication goroutine.
// The chaos suite's rolling restart checks the behaviour end to end.
func TestShardTransportsReplicateWithoutPipelining(t *testing.T) {
	tn := startTestNode(t, testConfig(t, t.TempDir(), 1, 2))
	waitReady(t, tn.Node, 5*time.Second)
	for _, s := range tn.all {
		p, err := s.trans.AppendEntriesPipeline("peer", "127.0.0.1:1")
		if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) || p != nil {
			t.Fatalf("shard %d's transport offers a pipeline (%v): Raft would pipeline to followers", s.ID, err)
		}
	}
}
