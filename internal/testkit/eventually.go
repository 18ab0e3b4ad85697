package testkit

import (
	"testing"
	"time"
)

// Eventually polls cond every 10ms until it holds or d passes, and then
// fails the test saying it waited for what.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
