package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
)

// adminTimeout bounds one admin request's work (a status gathers every
// node's report; a remove-node is one metadata write).
const adminTimeout = 10 * time.Second

// AdminHandler returns the cluster admin API that `kcoord cluster` uses,
// JSON over --http-addr:
//
//	GET  /v1/cluster/status             cluster.ClusterStatus
//	POST /v1/cluster/nodes/{id}/remove  mark node id draining: its replicas move away
//	GET  /v1/groups                     GroupsView: every group, from its coordinator
//	GET  /v1/groups/{group}             GroupDetail: members, assignments, offsets
//	GET  /v1/group?id=G                 the same, for any id ("." and ".." too)
//	GET  /v1/timeline[?limit=N][&group=G]  TimelineView: recent rebalances and leadership changes
//	GET  /v1/cluster/features           cluster.FeatureStatus: each node's feature levels, the finalized ones
//	POST /v1/cluster/features/finalize[?level=N]  finalize kcoord.version N (the highest every node supports)
//
// The status page (StatusPage) shows the same. Errors answer {"error":
// "..."} with 400 (bad id or limit), 404 (node not registered, group
// unknown), 409 (the last active node; a level some node does not
// support, or below the finalized one), 503 (no metadata leader or
// coordinator reachable, or the node is not started) or 500. Handlers run
// on net/http's goroutines.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/cluster/status", s.withNode(s.handleStatus))
	mux.HandleFunc("POST /v1/cluster/nodes/{id}/remove", s.handleRemoveNode)
	mux.HandleFunc("GET /v1/groups", s.withNode(s.handleGroups))
	mux.HandleFunc("GET /v1/groups/{group}", s.withNode(s.handleGroup))
	mux.HandleFunc("GET /v1/group", s.withNode(s.handleGroup))
	mux.HandleFunc("GET /v1/timeline", s.withNode(s.handleTimeline))
	mux.HandleFunc("GET /v1/cluster/features", s.withNode(s.handleFeatures))
	mux.HandleFunc("POST /v1/cluster/features/finalize", s.withNode(s.handleFinalize))
	return mux
}

// startedNode returns the cluster node, or answers 503 before it starts.
func (s *Server) startedNode(w http.ResponseWriter) (*cluster.Node, bool) {
	node := s.raftNode.Load()
	if node == nil {
		writeJSONError(w, http.StatusServiceUnavailable, errors.New("the node is not started"))
	}
	return node, node != nil
}

// nodeHandler is a handler that needs the started node and a context
// bounded by adminTimeout.
type nodeHandler func(ctx context.Context, w http.ResponseWriter, r *http.Request, node *cluster.Node)

// withNode serves h once the node has started (503 before), within
// adminTimeout.
func (s *Server) withNode(h nodeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		node, ok := s.startedNode(w)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		h(ctx, w, r, node)
	}
}

func (s *Server) handleStatus(ctx context.Context, w http.ResponseWriter, _ *http.Request, node *cluster.Node) {
	writeJSON(w, http.StatusOK, node.Status(ctx))
}

// RemoveNodeResult is the answer of a successful remove-node.
type RemoveNodeResult struct {
	Node   int32  `json:"node"`
	Status string `json:"status"` // "draining"
}

func (s *Server) handleRemoveNode(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || id < 0 {
		writeJSONError(w, http.StatusBadRequest, fmt.Errorf("node id %q: want a non-negative int32", r.PathValue("id")))
		return
	}
	node, ok := s.startedNode(w)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	switch err := node.RemoveNode(ctx, int32(id)); {
	case err == nil:
		writeJSON(w, http.StatusOK, RemoveNodeResult{Node: int32(id), Status: "draining"})
	case errors.Is(err, fsm.ErrNodeNotFound):
		writeJSONError(w, http.StatusNotFound, fmt.Errorf("node %d is not a registered node of this cluster", id))
	case errors.Is(err, cluster.ErrLastActiveNode):
		writeJSONError(w, http.StatusConflict, err)
	case errors.Is(err, cluster.ErrNotMetaLeader), errors.Is(err, cluster.ErrShutdown), isNetError(err):
		writeJSONError(w, http.StatusServiceUnavailable, err)
	default:
		writeJSONError(w, http.StatusInternalServerError, err)
	}
}

// isNetError reports whether err is a network failure (the metadata
// leader could not be reached): worth a retry, not a server fault.
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// adminError is the JSON body of an admin API error.
type adminError struct {
	Error string `json:"error"`
}

func writeJSONError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, adminError{Error: err.Error()})
}
