package server

import (
	"errors"
	"fmt"
	"testing"
)

// Cluster errors reach the api handlers as api's sentinels, with the text
// clients were answered before: the Kafka code and message do not change.
func TestClusterErrorsReachTheAPIAsItsSentinelsWithTheirText(t *testing.T) {
	for _, c := range clusterErrors {
		if c.from.Error() != c.to.Error() {
			t.Errorf("api's %q answers another message than cluster's %q", c.to, c.from)
		}
		err := fmt.Errorf("%w: node 2 did not answer", c.from)
		got := apiError(err)
		if !errors.Is(got, c.to) || !errors.Is(got, c.from) || got.Error() != err.Error() {
			t.Errorf("apiError(%q) = %q: not %v with the same text", err, got, c.to)
		}
	}
	if err := errors.New("other"); apiError(err) != err {
		t.Error("an error cluster does not own was translated")
	}
	if apiError(nil) != nil {
		t.Error("nil became an error")
	}
}
