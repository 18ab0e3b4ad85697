package server

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kcoord/kcoord/cluster"
)

//go:embed statuspage/page.html
var statusPageFiles embed.FS

// statusPageRefresh is how often the page reloads itself, in seconds.
const statusPageRefresh = 5

// timelineOnPage is how many events the page shows.
const timelineOnPage = 40

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"clock":      func(t time.Time) string { return t.UTC().Format("15:04:05 MST") },
	"clockMs":    func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"stamp":      stamp,
	"ago":        ago,
	"groupURL":   func(id string) string { return "/group?id=" + url.QueryEscape(id) },
	"nodeClass":  nodeClass,
	"groupClass": groupClass,
	"shardName":  shardName,
	"ids":        ids,
	"join":       func(s []string) string { return strings.Join(s, ", ") },
	"describe":   describeEvent,
	"shardGroups": func(v GroupsView, shard int32) int {
		n := 0
		for _, g := range v.Groups {
			if g.Shard == shard {
				n++
			}
		}
		return n
	},
}).ParseFS(statusPageFiles, "statuspage/page.html"))

// pageData is what the templates render.
type pageData struct {
	Title     string
	Refresh   int
	ClusterID string
	Node      int32
	Ready     bool
	Now       time.Time
	Problems  []problem
	Status    cluster.ClusterStatus
	Groups    GroupsView
	Events    []Event
	Group     *GroupDetail
	Message   string
}

// problem is a banner at the top of the page.
type problem struct {
	Class string // "warn" or "bad"
	Text  string
}

// StatusPage returns the status page, for a person, with no external
// assets: GET / (nodes, groups, recent events, shards) and GET
// /group?id=G (a group's members, assignments and committed offsets).
// It shows what /v1/cluster/status, /v1/groups, /v1/group?id=G and
// /v1/timeline answer, gathered the same way. Handlers run on net/http's
// goroutines and block on calls to the other nodes (adminTimeout).
func (s *Server) StatusPage() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.withPageNode(s.handleIndexPage))
	mux.HandleFunc("GET /group", s.withPageNode(s.handleGroupPage))
	return mux
}

// withPageNode serves h once the node has started (a 503 page that
// reloads itself before), within adminTimeout.
func (s *Server) withPageNode(h nodeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		node := s.raftNode.Load()
		if node == nil {
			s.renderPage(w, http.StatusServiceUnavailable, "missing", s.page("kcoord: starting", node, "The node is starting; this page reloads itself."))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		h(ctx, w, r, node)
	}
}

func (s *Server) handleIndexPage(ctx context.Context, w http.ResponseWriter, _ *http.Request, node *cluster.Node) {
	d := s.page("kcoord", node, "")
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); d.Status = node.Status(ctx) }()
	go func() { defer wg.Done(); d.Groups = s.groupsView(ctx, node) }()
	var tl TimelineView
	go func() { defer wg.Done(); tl = s.timelineView(ctx, node, timelineOnPage, nil) }()
	wg.Wait()
	d.Events = tl.Events
	d.ClusterID = d.Status.ClusterID
	d.Problems = indexProblems(d.Status, d.Groups, tl)
	s.renderPage(w, http.StatusOK, "index", d)
}

func (s *Server) handleGroupPage(ctx context.Context, w http.ResponseWriter, r *http.Request, node *cluster.Node) {
	id, ok := groupParam(r)
	if !ok {
		d := s.page("kcoord: which group?", node, "Name the group: /group?id=GROUP.")
		d.Refresh = 0
		s.renderPage(w, http.StatusBadRequest, "missing", d)
		return
	}
	var g GroupDetail
	var err error
	var tl TimelineView
	var wg sync.WaitGroup
	wg.Go(func() { g, err = s.groupDetail(ctx, node, id) })
	wg.Go(func() {
		tl = s.timelineView(ctx, node, timelineOnPage, rebalancesOf(id))
	})
	wg.Wait()
	switch {
	case err != nil:
		s.renderPage(w, http.StatusServiceUnavailable, "missing", s.page("Group "+id+": no answer", node,
			"The group's coordinator did not answer: "+err.Error()+". This page reloads itself."))
		return
	case !g.Exists:
		d := s.page("Group "+id+" does not exist", node, fmt.Sprintf("Consumer group %q does not exist: it has no members and no committed offsets.", id))
		d.Refresh = 0
		s.renderPage(w, http.StatusNotFound, "missing", d)
		return
	}
	d := s.page("kcoord: group "+id, node, "")
	d.Group = &g
	d.Events = tl.Events
	for _, e := range tl.Errors {
		d.Problems = append(d.Problems, problem{"warn", fmt.Sprintf("Node %d did not send its events: %s", e.Node, e.Error)})
	}
	s.renderPage(w, http.StatusOK, "group", d)
}

// groupParam is the group a request names: ?id=, which carries any id
// (".", "..", "" and ids with a slash, which a path segment cannot), or
// the {group} path segment of /v1/groups/{group}.
func groupParam(r *http.Request) (string, bool) {
	if q := r.URL.Query(); q.Has("id") {
		return q.Get("id"), true
	}
	if id := r.PathValue("group"); id != "" {
		return id, true
	}
	return "", false
}

// page starts a page's data.
func (s *Server) page(title string, node *cluster.Node, message string) pageData {
	d := pageData{Title: title, Refresh: statusPageRefresh, Node: s.cfg.NodeID, Now: time.Now(), Message: message}
	if node != nil { // Ready waits for Start to return
		d.ClusterID, d.Ready = node.ClusterID(), s.Ready()
	}
	return d
}

// renderPage renders into a buffer first, so that a template error is a
// 500 and not half a page.
func (s *Server) renderPage(w http.ResponseWriter, code int, name string, d pageData) {
	var buf bytes.Buffer
	if err := statusPage.ExecuteTemplate(&buf, name, d); err != nil {
		s.logger.Error("status page", "page", name, "error", err)
		writeText(w, http.StatusInternalServerError, "status page: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// indexProblems are the banners of the cluster page: what an operator
// should look at first.
func indexProblems(st cluster.ClusterStatus, g GroupsView, tl TimelineView) []problem {
	var out []problem
	for _, n := range st.Nodes {
		if n.State == "dead" || n.State == "suspect" {
			out = append(out, problem{"bad", fmt.Sprintf("Node %d is %s.", n.ID, n.State)})
		}
		if n.Disk != "" {
			text := fmt.Sprintf("Node %d fenced itself: its disk %s. It leads and serves nothing until the disk answers.", n.ID, n.Disk)
			if n.Disk == cluster.DiskFailed {
				text = fmt.Sprintf("Node %d fenced itself: its disk failed. It serves nothing until it is restarted on a working disk.", n.ID)
			}
			if n.DiskReason != "" {
				text += " (" + n.DiskReason + ")"
			}
			out = append(out, problem{"bad", text})
		}
	}
	if st.UnderReplicated > 0 {
		out = append(out, problem{"bad", fmt.Sprintf("%d shard(s) under-replicated or without a leader.", st.UnderReplicated)})
	}
	if len(g.UnreportedShards) > 0 {
		out = append(out, problem{"warn", fmt.Sprintf("No node reported the groups of shard(s) %s: they are missing below.", ids(g.UnreportedShards))})
	}
	seen := map[int32]bool{}
	for _, e := range append(g.Errors, tl.Errors...) {
		if !seen[e.Node] {
			seen[e.Node] = true
			out = append(out, problem{"warn", fmt.Sprintf("Node %d did not answer: %s", e.Node, e.Error)})
		}
	}
	return out
}

// stamp is a full timestamp, for a tooltip.
func stamp(t any) string {
	tt, ok := when(t)
	if !ok {
		return ""
	}
	return tt.UTC().Format("2006-01-02 15:04:05.000 MST")
}

// ago says how long before now t was, to the second ("just now" under a
// second).
func ago(t any) string {
	tt, ok := when(t)
	if !ok {
		return "-"
	}
	d := time.Since(tt).Round(time.Second)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds ago", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm ago", int(d.Hours()), int(d.Minutes())%60)
	}
	return tt.UTC().Format("2006-01-02 15:04 MST")
}

func when(t any) (time.Time, bool) {
	switch v := t.(type) {
	case time.Time:
		return v, !v.IsZero()
	case *time.Time:
		if v != nil {
			return *v, !v.IsZero()
		}
	}
	return time.Time{}, false
}

func nodeClass(state string) string {
	switch state {
	case "alive":
		return "ok"
	case "suspect", "draining":
		return "warn"
	case "dead":
		return "bad"
	}
	return "idle"
}

func groupClass(state string) string {
	switch state {
	case "Stable":
		return "ok"
	case "PreparingRebalance", "CompletingRebalance":
		return "warn"
	case "Dead":
		return "bad"
	}
	return "idle"
}

func shardName(shard int32) string {
	if shard == cluster.MetaShard {
		return "meta"
	}
	return strconv.Itoa(int(shard))
}

func ids(v []int32) string {
	parts := make([]string, len(v))
	for i, id := range v {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ", ")
}

// describeEvent is an event in a sentence.
func describeEvent(e Event) string {
	switch e.Kind {
	case eventRebalance:
		protocol := ""
		if e.Protocol != "" {
			protocol = " (" + e.Protocol + ")"
		}
		return fmt.Sprintf("group %q stable at generation %d with %d member(s)%s, %.0f ms after its rebalance began",
			e.Group, e.Generation, e.Members, protocol, e.TookMs)
	case eventLeaderGained:
		if e.Term == 0 { // gained while the node was starting: term not known
			return fmt.Sprintf("became the leader of shard %s", shardName(e.Shard))
		}
		return fmt.Sprintf("became the leader of shard %s (term %d)", shardName(e.Shard), e.Term)
	case eventLeaderLost:
		return fmt.Sprintf("is no longer the leader of shard %s", shardName(e.Shard))
	}
	return e.Kind
}
