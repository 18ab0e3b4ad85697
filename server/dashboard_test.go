package server

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Every metric the Grafana dashboard in docs/ queries is one kcoord
// exports: a renamed metric would leave its panel empty.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}

	reg := prometheus.NewRegistry()
	s, err := New(TestConfig(t.TempDir()), TestLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	exported := map[string]bool{}
	descs := make(chan *prometheus.Desc)
	go func() { reg.Describe(descs); close(descs) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			exported[m[1]] = true
		}
	}
	bridged := func(name string) bool { // ExportRaftMetrics' names (raftSink)
		for sample := range raftSamples {
			if name == "kcoord_raft_"+strings.ReplaceAll(sample, ".", "_") {
				return true
			}
		}
		return strings.HasPrefix(name, "kcoord_raft_state_") || strings.HasPrefix(name, "kcoord_raft_transition_")
	}

	metric := regexp.MustCompile(`kcoord_[A-Za-z_]+`)
	queried := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, target := range p.Targets {
			for _, name := range metric.FindAllString(target.Expr, -1) {
				queried++
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if trimmed, ok := strings.CutSuffix(name, suffix); ok && exported[trimmed] {
						base = trimmed
					}
				}
				if !exported[base] && !bridged(base) {
					t.Errorf("panel %q queries %s, which kcoord does not export", p.Title, name)
				}
			}
		}
	}
	if queried == 0 {
		t.Fatal("the dashboard queries no kcoord metric")
	}
}
