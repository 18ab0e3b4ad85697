package groups

import (
	"errors"

	"github.com/hashicorp/raft"
)

// ApplyError is the one place a Raft future's error becomes a kcoord
// error: a write that could not enter Raft's queue in time is ErrTimeout
// (REQUEST_TIMED_OUT), and one this node cannot make or finish because it
// does not lead (no longer, not yet, Raft shut down, or it is handing
// leadership over) is
// ErrNotCoordinator. Any other error is returned as it is (nil stays nil).
// Safe from any goroutine; it never blocks.
func ApplyError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNotCoordinator
	}
	return err
}
