package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/release"
	"github.com/kcoord/kcoord/server"
)

// A node of the previous release holds a finalization back while it is in
// the cluster; once it is removed (drained, then stopped) it no longer
// does, and the operator's finalization goes through.
func TestARemovedNodeDoesNotHoldTheUpgradeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a node's replicas in and out")
	}
	ctx := testContext(t, 3*time.Minute)
	manual := func(c *server.Config) { c.FeaturesAutoFinalize = false }
	servers := server.StartTestCluster(t, 3, func(_ int, c *server.Config) { manual(c) })
	old := server.AddTestNode(t, servers, 4, func(c *server.Config) {
		manual(c)
		raft := c.Raft
		c.Raft = func(rc *cluster.Config) { raft(rc); rc.PlayApplyLevel = int(fsm.ACLDeleteType) } // release 0.1.0
	})
	all := append(servers[:3:3], old)
	waitPlacementSettled(ctx, t, all, func(id int32, st cluster.PlacementStats) bool { return id != 4 || st.Replicas > 0 })

	_, err := servers[0].Node().FinalizeFeature(ctx, 0, 5*time.Second)
	if !errors.Is(err, cluster.ErrFeatureUnsupported) {
		t.Fatalf("finalizing with node 4 on the previous release: %v, want ErrFeatureUnsupported", err)
	}
	t.Logf("held back: %v", err)

	removeNode(ctx, t, servers[0], 4)
	waitPlacementSettled(ctx, t, all, func(id int32, st cluster.PlacementStats) bool { return id != 4 || st.Replicas == 0 })
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := old.Shutdown(sctx); err != nil {
		t.Errorf("stop node 4: %v", err)
	}
	cancel()
	waitFor(ctx, t, "a finalization without node 4", func(ctx context.Context) error {
		got, err := servers[1].Node().FinalizeFeature(ctx, 0, 4*time.Second)
		if err != nil {
			return err
		}
		if got != release.MaxLevel {
			return fmt.Errorf("finalized %d", got)
		}
		return nil
	})
}
