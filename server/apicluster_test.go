package server

import (
	"errors"
	"fmt"
	"testing"
)

// Cluster and Raft errors reach the api handlers as api's sentinels, with
// the text clients were answered before: the Kafka code and message do not
// change.
func TestClusterErrorsReachTheAPIAsItsSentinelsWithTheirText(t *testing.T) {
	for _, c := range clusterErrors {
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
