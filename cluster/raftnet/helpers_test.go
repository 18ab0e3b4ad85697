package raftnet

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kcoord/kcoord/internal/testkit"
)

// testLogger returns a logger writing to t.Log (testkit.Logger).
func testLogger(t testing.TB) hclog.Logger { return testkit.Logger(t) }

// eventually polls cond every 10ms until it holds or d passes
// (testkit.Eventually).
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, d, what, cond)
}
