package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kcoord/kcoord/release"
)

// previousBinary is the previous release's static kcoord, as `make
// upgrade-test` passes it ($KCOORD_PREVIOUS_BINARY, built from
// release/previous-commit); "" when it is not set.
func previousBinary() string {
	p := os.Getenv("KCOORD_PREVIOUS_BINARY")
	if st, err := os.Stat(p); p == "" || err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return p
}

// TestDockerRollingUpgrade runs the rolling upgrade of docs/upgrading.md
// on the compose cluster of `make cluster-up`: the cluster starts on the
// previous release's image, a franz-go group commits through it, and each
// service is replaced in turn with `KCOORD_IMAGE=<new> docker-compose up
// -d --no-deps kcoordN`, waiting for it to be healthy before the next.
// The group neither rebalances nor loses a commit, every node then runs
// this release, and the cluster finalized its level by itself. `make
// upgrade-test` runs it, alone, after the process test; skipped without
// Docker or without $KCOORD_PREVIOUS_BINARY.
func TestDockerRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("docker-compose upgrade test skipped in -short mode")
	}
	dc := newDockerCompose(t) // skips without Docker
	prev := previousBinary()
	if prev == "" {
		t.Skip("no previous release's binary: make upgrade-test passes it in KCOORD_PREVIOUS_BINARY")
	}
	dc.buildImage(t)
	newImage := dc.imageID
	ctx := testContext(t, dockerBudget)
	buildDir := dc.buildContext(t)
	b, err := os.ReadFile(prev)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(buildDir, "bin", "kcoord"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	oldImage := dc.dockerBuild(ctx, t, buildDir, "kcoord:previous-e2e")
	dc.env = append(dc.env, "KCOORD_IMAGE="+oldImage)
	dc.up(ctx, t)
	dc.waitHealthy(ctx, t, dockerHealthyWithin, dc.nodes...)
	for _, n := range dc.nodes {
		if out, _ := dc.composeCmd(ctx, "exec", "-T", n.service, "/kcoord", "version"); strings.HasPrefix(out, "kcoord "+release.Version+" ") {
			t.Fatalf("%s runs this release before the upgrade: %q", n.service, firstLine(out))
		}
	}

	seeds := dc.kafkaAddrs(dc.nodes...)
	adm := dcAdminSeeds(t, seeds)
	topic, group := "upgrade-topic", fmt.Sprintf("upgrade-group-%d", rand.IntN(1e6))
	createTopic(ctx, t, adm, topic, groupPartitions)
	events := &dcGroupEvents{}
	t.Cleanup(func() { events.writeDebugOnFailure(t, dc.project) })
	members, before := dcStartGroup(ctx, t, adm, seeds, group, topic, events)
	mark := events.mark()
	want := map[string]map[int32]committed{topic: {}}
	commitRound := func(round int) { dcCommitRound(ctx, t, members, topic, round, want) }
	commitRound(0)
	// docs/upgrading.md, "The compose cluster": one service at a time.
	dc.env = append(dc.env, "KCOORD_IMAGE="+newImage)
	for round, n := range dc.nodes {
		start := time.Now()
		if _, err := dc.composeCmd(ctx, "up", "-d", "--no-deps", "--no-build", n.service); err != nil {
			t.Fatalf("compose up %s on the new image: %v", n.service, err)
		}
		out, err := dc.composeCmd(ctx, "ps", "-q", n.service)
		if err != nil {
			t.Fatal(err)
		}
		n.container = strings.TrimSpace(out)
		dc.waitHealthy(ctx, t, dockerHealthyWithin, n)
		t.Logf("%s on the new image and healthy %v after compose up", n.service, time.Since(start).Round(time.Millisecond))
		commitRound(round + 1)
	}
	dc.checkVersionAndFeatures(ctx, t)
	checkOffsets(ctx, t, adm, group, want)
	dcCheckNoRebalance(t, "the rolling upgrade", before, dcSnapshot(members), events, mark)
}
