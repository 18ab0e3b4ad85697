package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/release"
)

// checkVersionAndFeatures runs `kcoord version` and `kcoord cluster
// features` inside each container of the compose cluster, as an operator
// does before and after a rolling upgrade (docs/upgrading.md): every node
// runs this release, and the cluster finalized its newest level by itself.
func (dc *dockerCompose) checkVersionAndFeatures(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, n := range dc.nodes {
		out, err := dc.composeCmd(ctx, "exec", "-T", n.service, "/kcoord", "version")
		if err != nil {
			t.Fatalf("kcoord version in %s: %v", n.service, err)
		}
		if !strings.HasPrefix(out, "kcoord "+release.Version+" ") {
			t.Fatalf("kcoord version in %s says %q, want release %s", n.service, firstLine(out), release.Version)
		}
	}
	waitFor(ctx, t, "the compose cluster to finalize "+release.Feature, func(ctx context.Context) error {
		out, err := dc.composeCmd(ctx, "exec", "-T", dc.nodes[0].service, "/kcoord", "cluster", "features", "--http-addr", "127.0.0.1:9644", "--json")
		if err != nil {
			return err
		}
		var st cluster.FeatureStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return fmt.Errorf("kcoord cluster features --json: %w (%q)", err, out)
		}
		if len(st.Nodes) != len(dc.nodes) {
			return fmt.Errorf("features list %d nodes, want %d", len(st.Nodes), len(dc.nodes))
		}
		for _, n := range st.Nodes {
			if n.Release != release.Version || n.Supported[release.Feature].Max != int16(release.MaxLevel) {
				return fmt.Errorf("node %d: release %q, supports %+v", n.NodeID, n.Release, n.Supported)
			}
		}
		if got := st.Finalized[release.Feature]; got != int16(release.MaxLevel) {
			return fmt.Errorf("finalized %s %d, want %d", release.Feature, got, release.MaxLevel)
		}
		return nil
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
