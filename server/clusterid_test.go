package server

import (
	"fmt"
	"testing"
	"time"
)

// waitStamped waits until every shard FSM and the metadata FSM of every
// server holds the cluster id its node records, and returns it.
func waitStamped(t *testing.T, servers ...*Server) string {
	t.Helper()
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for {
		id, err := stampedID(servers)
		if err == nil {
			return id
		}
		last = err.Error()
		if time.Now().After(deadline) {
			t.Fatalf("cluster id not stamped everywhere: %s", last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stampedID(servers []*Server) (string, error) {
	id := servers[0].Node().ClusterID()
	if id == "" {
		return "", fmt.Errorf("node %d has no cluster id", servers[0].cfg.NodeID)
	}
	for _, s := range servers {
		if got := s.Node().ClusterID(); got != id {
			return "", fmt.Errorf("node %d has cluster id %q, node %d %q", s.cfg.NodeID, got, servers[0].cfg.NodeID, id)
		}
		if got := s.meta.ClusterID(); got != id {
			return "", fmt.Errorf("node %d: metadata FSM holds %q", s.cfg.NodeID, got)
		}
		for i, st := range s.states {
			if got := st.ClusterID(); got != id {
				return "", fmt.Errorf("node %d: shard %d holds %q", s.cfg.NodeID, i, got)
			}
		}
	}
	return id, nil
}

// TestEveryShardRecordsTheClusterID: bootstrap gives the cluster an id,
// and every shard's replicated state names it, on every replica, so a
// shard's log and snapshots say which cluster they belong to.
func TestEveryShardRecordsTheClusterID(t *testing.T) {
	t.Run("single node", func(t *testing.T) {
		s := StartTestServer(t, TestConfig(t.TempDir()))
		waitStamped(t, s)
	})
	t.Run("three nodes", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts three nodes")
		}
		waitStamped(t, StartTestCluster(t, 3, nil)...)
	})
}
