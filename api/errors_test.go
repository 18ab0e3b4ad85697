package api

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// An error the server translated keeps the detail it was answered with
// before the translation: the message leaves out the original sentinel's
// text, as it leaves out api's own, and the code is the api sentinel's.
func TestATranslatedErrorAnswersItsDetailAndItsSentinelsCode(t *testing.T) {
	below := errors.New("node is not the leader") // as Raft's sentinel reads
	err := &Translated{
		Sentinel: ErrNotLeader,
		Cause:    below,
		Err:      fmt.Errorf("%w: the metadata leader, node 2, is not reachable", below),
	}
	if got := *errMessage(err); got != "the metadata leader, node 2, is not reachable" {
		t.Errorf("message %q, want the detail alone", got)
	}
	if !errors.Is(err, below) || !errors.Is(err, ErrNotLeader) {
		t.Error("the translation hides the original or the sentinel from errors.Is")
	}
	h := newTestHandlers(t, Config{}, newMemTopics())
	if got := h.controllerErrorCode(err); got != kerr.NotController.Code {
		t.Errorf("controller code %d, want NOT_CONTROLLER", got)
	}
	if got := h.errorCode(err); got != kerr.NotCoordinator.Code {
		t.Errorf("group code %d, want NOT_COORDINATOR", got)
	}
}
