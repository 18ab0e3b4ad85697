package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kcoord/kcoord/cluster"
)

// TestAdminAPI: the status lists the node and every shard placed on it,
// and remove-node answers a clear error for an unknown node, a bad id and
// the last active node.
func TestAdminAPI(t *testing.T) {
	s := StartTestServer(t, TestConfig(t.TempDir()))
	srv := httptest.NewServer(s.AdminHandler())
	defer srv.Close()

	var st cluster.ClusterStatus
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(srv.URL + "/v1/cluster/status")
		if err != nil {
			t.Fatal(err)
		}
		st = cluster.ClusterStatus{}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status: HTTP %d, %v", resp.StatusCode, err)
		}
		// Placement registers the node within a round or two.
		if len(st.Nodes) == 1 && st.Nodes[0].Placement == "active" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(st.Nodes) != 1 || st.Nodes[0].State != "alive" || st.Nodes[0].Placement != "active" || st.Nodes[0].Replicas != 8 || st.Nodes[0].Leads != 8 {
		t.Errorf("nodes: %+v", st.Nodes)
	}
	if len(st.Shards) != 9 || st.UnderReplicated != 0 || st.MetaLeader != 1 {
		t.Errorf("shards %d, under-replicated %d, metadata leader %d: %+v", len(st.Shards), st.UnderReplicated, st.MetaLeader, st.Shards)
	}

	for _, tc := range []struct {
		id   string
		code int
		msg  string
	}{
		{"9", http.StatusNotFound, "not a registered node"},
		{"x", http.StatusBadRequest, "non-negative int32"},
		{"1", http.StatusConflict, "last active node"},
	} {
		resp, err := http.Post(srv.URL+"/v1/cluster/nodes/"+tc.id+"/remove", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(e.Error, tc.msg) {
			t.Errorf("remove-node %s: HTTP %d %q, want %d with %q", tc.id, resp.StatusCode, e.Error, tc.code, tc.msg)
		}
	}
}
