package api

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/offsets"
)

// codes maps each sentinel error to its Kafka error; the first match wins.
var codes = []struct {
	err  error
	code *kerr.Error
}{
	{groups.ErrNotCoordinator, kerr.NotCoordinator},
	{raft.ErrNotLeader, kerr.NotCoordinator},
	{raft.ErrLeadershipLost, kerr.NotCoordinator},
	{raft.ErrRaftShutdown, kerr.NotCoordinator},
	{raft.ErrLeadershipTransferInProgress, kerr.NotCoordinator},
	{groups.ErrLoadInProgress, kerr.CoordinatorLoadInProgress},
	{groups.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{groups.ErrInvalidGroupID, kerr.InvalidGroupID},
	{groups.ErrUnknownMemberID, kerr.UnknownMemberID},
	{groups.ErrMemberIDRequired, kerr.MemberIDRequired},
	{groups.ErrIllegalGeneration, kerr.IllegalGeneration},
	{groups.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{groups.ErrInconsistentGroupProtocol, kerr.InconsistentGroupProtocol},
	{groups.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{groups.ErrGroupMaxSizeReached, kerr.GroupMaxSizeReached},
	{groups.ErrFencedInstanceID, kerr.FencedInstanceID},
	{groups.ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{fsm.ErrGroupNotEmpty, kerr.NonEmptyGroup},
	{groups.ErrGroupIDNotFound, kerr.GroupIDNotFound},
	{fsm.ErrGroupNotFound, kerr.GroupIDNotFound},
	{groups.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
	{groups.ErrTimeout, kerr.RequestTimedOut},
	{raft.ErrEnqueueTimeout, kerr.RequestTimedOut},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{offsets.ErrMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{offsets.ErrInvalidPartition, kerr.UnknownTopicOrPartition},
	{offsets.ErrInvalidTopic, kerr.UnknownTopicOrPartition},
	{fsm.ErrTopicExists, kerr.TopicAlreadyExists},
	{fsm.ErrTopicNotFound, kerr.UnknownTopicOrPartition},
}

// errorCode translates an error to its Kafka error code (0 for nil).
// Anything unmapped is UNKNOWN_SERVER_ERROR and is logged.
func (h *Handlers) errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code.Code
		}
	}
	h.logger.Error("unmapped error", "error", err)
	return kerr.UnknownServerError.Code
}

// waitAborted reports whether a blocking call ended because the client's
// connection closed; the handler then returns the error so the transport
// drops the connection instead of answering.
func waitAborted(err error) bool {
	return errors.Is(err, context.Canceled)
}
