package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/kcoord/kcoord/cluster/raftnet"
)

// RaftFault is the JSON body of POST /debug/faults/raft: a raftnet.Fault
// on this node's Raft connections.
type RaftFault struct {
	// Peer is the other node's advertised Raft address; "" is every peer.
	Peer string `json:"peer,omitempty"`
	// Dir is "outbound" (what this node dials: its AppendEntries and
	// votes), "inbound" (what peers dial) or "both" (the default).
	Dir string `json:"dir,omitempty"`
	// Shards limits the fault; empty is every shard.
	Shards []int32 `json:"shards,omitempty"`
	// Drop cuts the matching connections; DelayMs delays every write.
	Drop    bool  `json:"drop,omitempty"`
	DelayMs int64 `json:"delay_ms,omitempty"`
}

// faultAPI serves the fault-injection endpoints of a node started with
// FaultInjection (kcoord serve --fault-injection, a hidden test-only
// flag), which the chaos suite uses to delay Raft traffic of real
// processes:
//
//	POST   /debug/faults/raft  add a RaftFault; answers {"faults": n}
//	DELETE /debug/faults/raft  remove every fault added here
//
// Handlers run on net/http's goroutines; raftnet.Faults is safe for
// concurrent use.
type faultAPI struct {
	faults *raftnet.Faults
	mu     sync.Mutex
	heals  []func()
}

// FaultHandler returns the fault-injection endpoints of this node's Raft
// connections; serve mounts it only with Config.FaultInjection.
func (s *Server) FaultHandler() http.Handler {
	api := &faultAPI{faults: s.Node().Faults()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /debug/faults/raft", api.add)
	mux.HandleFunc("DELETE /debug/faults/raft", api.clear)
	return mux
}

func (a *faultAPI) add(w http.ResponseWriter, r *http.Request) {
	var f RaftFault
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		http.Error(w, "bad fault: "+err.Error(), http.StatusBadRequest)
		return
	}
	fault := raftnet.Fault{Peer: f.Peer, Shards: f.Shards, Drop: f.Drop, Delay: time.Duration(f.DelayMs) * time.Millisecond}
	switch f.Dir {
	case "", "both":
		fault.Dir = raftnet.DirBoth
	case "outbound":
		fault.Dir = raftnet.DirOutbound
	case "inbound":
		fault.Dir = raftnet.DirInbound
	default:
		http.Error(w, fmt.Sprintf("bad fault: dir %q: want outbound, inbound or both", f.Dir), http.StatusBadRequest)
		return
	}
	if f.DelayMs < 0 || !f.Drop && f.DelayMs == 0 {
		http.Error(w, "bad fault: set drop or a positive delay_ms", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.heals = append(a.heals, a.faults.Add(fault))
	n := len(a.heals)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"faults\":%d}\n", n)
}

func (a *faultAPI) clear(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	heals := a.heals
	a.heals = nil
	a.mu.Unlock()
	for _, heal := range heals {
		heal()
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"removed\":%d}\n", len(heals))
}
