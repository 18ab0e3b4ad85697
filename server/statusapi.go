package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/kcoord/kcoord/cluster"
)

// NodeError is a node that did not answer a status call, and why.
type NodeError struct {
	Node  int32  `json:"node"`
	Error string `json:"error"`
}

// GroupsView is GET /v1/groups: every group, each from the node that
// coordinates it.
type GroupsView struct {
	Groups []GroupSummary `json:"groups"`
	// UnreportedShards are the shards no node reported (no leader, or its
	// leader did not answer): their groups are missing from Groups.
	UnreportedShards []int32     `json:"unreported_shards"`
	Errors           []NodeError `json:"errors,omitempty"`
}

// TimelineView is GET /v1/timeline: every reachable node's recent events,
// newest first.
type TimelineView struct {
	Events []Event     `json:"events"`
	Errors []NodeError `json:"errors,omitempty"`
}

// defaultTimelineLimit and maxTimelineLimit bound GET /v1/timeline's
// ?limit.
const (
	defaultTimelineLimit = 100
	maxTimelineLimit     = timelineSize * 16
)

// groupsView asks every live node for the groups it coordinates.
func (s *Server) groupsView(ctx context.Context, node *cluster.Node) GroupsView {
	v := GroupsView{}
	var reports []GroupsReport
	for _, in := range s.inspectAll(ctx, node, inspectQuery{Kind: inspectGroups}, &v.Errors) {
		var r GroupsReport
		if err := json.Unmarshal(in.Report, &r); err != nil {
			v.Errors = append(v.Errors, NodeError{Node: in.Node, Error: err.Error()})
			continue
		}
		reports = append(reports, r)
	}
	var shards []int32
	for _, sh := range node.Shards() {
		shards = append(shards, sh.ID)
	}
	v.Groups, v.UnreportedShards = mergeGroupReports(reports, shards)
	return v
}

// mergeGroupReports joins the nodes' reports into one list sorted by group
// id, and names the shards of shards that no report lists. When two
// reports list one shard (its leadership moved between the two calls),
// its groups come from the one of the higher term only: the other is a
// former leader's.
func mergeGroupReports(reports []GroupsReport, shards []int32) ([]GroupSummary, []int32) {
	type best struct {
		term   uint64
		groups []GroupSummary
	}
	byShard := map[int32]*best{}
	for _, r := range reports {
		groups := map[int32][]GroupSummary{}
		for _, g := range r.Groups {
			groups[g.Shard] = append(groups[g.Shard], g)
		}
		for _, sh := range r.Shards {
			if b, ok := byShard[sh.Shard]; !ok || sh.Term > b.term {
				byShard[sh.Shard] = &best{term: sh.Term, groups: groups[sh.Shard]}
			}
		}
	}
	out, unreported := []GroupSummary{}, []int32{}
	for _, b := range byShard {
		out = append(out, b.groups...)
	}
	slices.SortFunc(out, func(a, b GroupSummary) int { return cmp.Compare(a.ID(), b.ID()) })
	for _, sh := range shards {
		if _, ok := byShard[sh]; !ok {
			unreported = append(unreported, sh)
		}
	}
	return out, unreported
}

// timelineView merges every live node's events, newest first, keeping
// the first limit of those that keep (nil keeps all).
func (s *Server) timelineView(ctx context.Context, node *cluster.Node, limit int, keep func(Event) bool) TimelineView {
	v := TimelineView{Events: []Event{}}
	for _, in := range s.inspectAll(ctx, node, inspectQuery{Kind: inspectTimeline}, &v.Errors) {
		var events []Event
		if err := json.Unmarshal(in.Report, &events); err != nil {
			v.Errors = append(v.Errors, NodeError{Node: in.Node, Error: err.Error()})
			continue
		}
		for _, e := range events {
			if keep == nil || keep(e) {
				v.Events = append(v.Events, e)
			}
		}
	}
	slices.SortStableFunc(v.Events, func(a, b Event) int { return b.At.Compare(a.At) })
	if len(v.Events) > limit {
		v.Events = v.Events[:limit]
	}
	return v
}

// groupDetail asks the node that leads the group's shard for the group.
func (s *Server) groupDetail(ctx context.Context, node *cluster.Node, id string) (GroupDetail, error) {
	shard := s.ShardFor(id)
	leader, ok := node.LeaderOf(shard)
	if !ok {
		return GroupDetail{}, fmt.Errorf("%w: shard %d has no known leader", ErrNotCoordinatorHere, shard)
	}
	q, _ := json.Marshal(inspectQuery{Kind: inspectGroup, Group: []byte(id)})
	report, err := node.Inspect(ctx, leader.NodeID, q)
	if err != nil {
		return GroupDetail{}, fmt.Errorf("asking node %d, the coordinator of shard %d: %w", leader.NodeID, shard, err)
	}
	var d GroupDetail
	if err := json.Unmarshal(report, &d); err != nil {
		return GroupDetail{}, fmt.Errorf("node %d's report: %w", leader.NodeID, err)
	}
	return d, nil
}

// inspectAll sends q to every live node, returning the reports and adding
// the nodes that failed to errs.
func (s *Server) inspectAll(ctx context.Context, node *cluster.Node, q inspectQuery, errs *[]NodeError) []cluster.Inspection {
	query, _ := json.Marshal(q)
	var out []cluster.Inspection
	for _, in := range node.InspectAll(ctx, query) {
		if in.Err != nil {
			*errs = append(*errs, NodeError{Node: in.Node, Error: in.Err.Error()})
			continue
		}
		out = append(out, in)
	}
	return out
}

func (s *Server) handleGroups(ctx context.Context, w http.ResponseWriter, r *http.Request, node *cluster.Node) {
	writeJSON(w, http.StatusOK, s.groupsView(ctx, node))
}

func (s *Server) handleGroup(ctx context.Context, w http.ResponseWriter, r *http.Request, node *cluster.Node) {
	id, ok := groupParam(r)
	if !ok {
		writeJSONError(w, http.StatusBadRequest, errors.New("name the group: /v1/group?id=GROUP or /v1/groups/GROUP"))
		return
	}
	d, err := s.groupDetail(ctx, node, id)
	switch {
	case err != nil:
		writeJSONError(w, http.StatusServiceUnavailable, err)
	case !d.Exists:
		writeJSONError(w, http.StatusNotFound, fmt.Errorf("consumer group %q does not exist", id))
	default:
		writeJSON(w, http.StatusOK, d)
	}
}

func (s *Server) handleTimeline(ctx context.Context, w http.ResponseWriter, r *http.Request, node *cluster.Node) {
	limit, err := timelineLimit(r.URL.Query().Get("limit"))
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err)
		return
	}
	var keep func(Event) bool
	if r.URL.Query().Has("group") {
		keep = rebalancesOf(r.URL.Query().Get("group"))
	}
	writeJSON(w, http.StatusOK, s.timelineView(ctx, node, limit, keep))
}

// timelineLimit parses ?limit: a positive count up to maxTimelineLimit,
// defaultTimelineLimit when absent.
func timelineLimit(v string) (int, error) {
	if v == "" {
		return defaultTimelineLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxTimelineLimit {
		return 0, fmt.Errorf("limit %q: want a count from 1 to %d", v, maxTimelineLimit)
	}
	return n, nil
}

// rebalancesOf keeps the timeline's rebalances of group (its exact id).
func rebalancesOf(group string) func(Event) bool {
	return func(e Event) bool { return e.Kind == eventRebalance && fromExactID(e.Group, e.GroupBase64) == group }
}
