package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/release"
	"github.com/kcoord/kcoord/transport"
)

// handleFeatures answers GET /v1/cluster/features: what each node
// supports of kcoord.version and what the cluster finalized.
func (s *Server) handleFeatures(_ context.Context, w http.ResponseWriter, _ *http.Request, node *cluster.Node) {
	st, err := node.Features()
	if err != nil {
		writeJSONError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// handleFinalize answers POST /v1/cluster/features/finalize[?level=N]:
// it finalizes level N of kcoord.version (by default the highest every
// node supports), as kafka-features.sh upgrade does, and answers the
// features as they are then.
func (s *Server) handleFinalize(ctx context.Context, w http.ResponseWriter, r *http.Request, node *cluster.Node) {
	var level release.Level
	if v := r.URL.Query().Get("level"); v != "" {
		l, err := strconv.ParseInt(v, 10, 16)
		if err != nil || l < 1 {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("level %q: want a positive integer", v))
			return
		}
		level = release.Level(l)
	}
	_, err := node.FinalizeFeature(ctx, level, adminTimeout/2)
	switch {
	case err == nil:
	case errors.Is(err, cluster.ErrFeatureUnsupported), errors.Is(err, cluster.ErrReplicaTooOld), errors.Is(err, fsm.ErrFeatureDowngrade):
		writeJSONError(w, http.StatusConflict, err)
		return
	default:
		writeJSONError(w, http.StatusServiceUnavailable, err)
		return
	}
	st, err := node.Features()
	if err != nil {
		writeJSONError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// Fatal is closed when the node cannot go on (cluster.Node.Fatal): serve
// stops the process with FatalErr. A nil channel (never ready) before
// Start.
func (s *Server) Fatal() <-chan struct{} {
	if node := s.raftNode.Load(); node != nil {
		return node.Fatal()
	}
	return nil
}

// FatalErr is why Fatal was closed.
func (s *Server) FatalErr() error {
	if node := s.raftNode.Load(); node != nil {
		return node.FatalErr()
	}
	return nil
}

// apiFeatures is what ApiVersions v3+ advertises (KIP-584): the levels of
// kcoord.version this binary supports, the finalized levels this node's
// replica of the metadata group holds (kcoord.version always, at 1 when
// nothing was finalized, as a KRaft broker always lists
// metadata.version), and as the epoch the index of the last metadata
// command the replica applied (a KRaft broker's metadata offset). The
// transport calls it for every ApiVersions request: it reads the FSM's
// read-locked copies only.
func (s *Server) apiFeatures() transport.Features {
	sup := kmsg.NewApiVersionsResponseSupportedFeature()
	sup.Name, sup.MinVersion, sup.MaxVersion = release.Feature, int16(release.MinLevel), int16(release.MaxLevel)
	f := transport.Features{Supported: []kmsg.ApiVersionsResponseSupportedFeature{sup}, Epoch: -1}
	levels := s.meta.FeatureLevels()
	if !slices.ContainsFunc(levels, func(l fsm.FeatureLevel) bool { return l.Feature == release.Feature }) {
		levels = append(levels, fsm.FeatureLevel{Feature: release.Feature, Level: int16(release.Level1)})
	}
	for _, l := range levels {
		fin := kmsg.NewApiVersionsResponseFinalizedFeature()
		fin.Name, fin.MinVersionLevel, fin.MaxVersionLevel = l.Feature, l.Level, l.Level
		f.Finalized = append(f.Finalized, fin)
	}
	if i := s.meta.AppliedIndex(); i > 0 && s.meta.AppliedIndexKnown() {
		f.Epoch = int64(i)
	}
	return f
}
