package api

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
)

// This file is the one place kcoord errors become Kafka error codes.
//
// A request (or a part of one) the handlers refuse themselves, before any
// coordinator or the registry sees it, is a *requestError carrying its
// Kafka error and message (see refuse). Every other error is matched against
// codes. The same Raft error means different things in group and in topic
// answers: in the group APIs the shard leader is the coordinator, in
// CreateTopics and DeleteTopics the metadata group's leader is the
// controller; codes gives both.

// Sentinel errors of the stores the handlers are wired with (Topics,
// Credentials, ACLStore, FeatureStore, MetadataReplica): the server
// translates the cluster package's errors into them, keeping their text.
// Their texts are the cluster package's, which answers carry (errMessage),
// so that clients read what they read before the translation.
var (
	// ErrNotLeader means this node cannot make the change because it does
	// not lead the Raft group that holds it (no longer, not yet, or its
	// Raft shut down), and no leader took it. Kafka: NOT_CONTROLLER in the
	// controller's APIs, NOT_COORDINATOR elsewhere.
	ErrNotLeader = errors.New("not the leader")
	// ErrApplyTimeout means a change to the metadata group, or a wait for
	// its replica, did not complete in time (it may still apply). Kafka:
	// REQUEST_TIMED_OUT.
	ErrApplyTimeout = errors.New("cluster: timed out waiting for the command to apply")
	// ErrReplicaTooOld means a replica of the metadata group runs a
	// release that cannot apply the change. Kafka: UNSUPPORTED_VERSION.
	ErrReplicaTooOld = errors.New("cluster: a replica of the metadata group runs a release that cannot apply this change")
	// ErrFeatureUnsupported means a feature level that some node does not
	// support. Kafka: INVALID_UPDATE_VERSION.
	ErrFeatureUnsupported = errors.New("cluster: feature level not supported")
)

// Translated is an error from beneath the handlers' stores (cluster's or
// Raft's, which api does not import) as the api sentinel it means: the
// server makes it, errors.Is holds of the sentinel and of the original,
// and its text is the original's. An answer's message leaves out the
// text of the original's own sentinel where it leads, as errMessage does
// for api's sentinels.
type Translated struct {
	Sentinel error // the api sentinel it means
	Cause    error // the sentinel of the package it came from
	Err      error // the error as that package returned it
}

func (e *Translated) Error() string   { return e.Err.Error() }
func (e *Translated) Unwrap() []error { return []error{e.Sentinel, e.Err} }

// codes maps each sentinel error to its Kafka error; the first match wins.
// controller, when set, is the error in the controller's APIs (CreateTopics,
// DeleteTopics) instead of code.
var codes = []struct {
	err        error
	code       *kerr.Error
	controller *kerr.Error
}{
	{groups.ErrNotCoordinator, kerr.NotCoordinator, nil},
	{ErrNotLeader, kerr.NotCoordinator, kerr.NotController},
	{groups.ErrLoadInProgress, kerr.CoordinatorLoadInProgress, nil},
	{groups.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable, nil},
	{groups.ErrInvalidGroupID, kerr.InvalidGroupID, nil},
	{groups.ErrUnknownMemberID, kerr.UnknownMemberID, nil},
	{groups.ErrMemberIDRequired, kerr.MemberIDRequired, nil},
	{groups.ErrIllegalGeneration, kerr.IllegalGeneration, nil},
	{groups.ErrRebalanceInProgress, kerr.RebalanceInProgress, nil},
	{groups.ErrInconsistentGroupProtocol, kerr.InconsistentGroupProtocol, nil},
	{groups.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout, nil},
	{groups.ErrGroupMaxSizeReached, kerr.GroupMaxSizeReached, nil},
	{groups.ErrFencedInstanceID, kerr.FencedInstanceID, nil},
	{groups.ErrNonEmptyGroup, kerr.NonEmptyGroup, nil},
	{fsm.ErrGroupNotEmpty, kerr.NonEmptyGroup, nil},
	{groups.ErrGroupIDNotFound, kerr.GroupIDNotFound, nil},
	{fsm.ErrGroupNotFound, kerr.GroupIDNotFound, nil},
	{groups.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic, nil},
	{groups.ErrInvalidRequest, kerr.InvalidRequest, nil},
	{groups.ErrUnsupportedAssignor, kerr.UnsupportedAssignor, nil},
	{groups.ErrFencedMemberEpoch, kerr.FencedMemberEpoch, nil},
	{groups.ErrStaleMemberEpoch, kerr.StaleMemberEpoch, nil},
	{groups.ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID, nil},
	{groups.ErrInvalidRegularExpression, kerr.InvalidRegularExpression, nil},
	{groups.ErrUnsupportedVersion, kerr.UnsupportedVersion, nil},
	{groups.ErrAssignmentFailed, kerr.UnknownServerError, nil},
	{groups.ErrTimeout, kerr.RequestTimedOut, nil},
	{ErrApplyTimeout, kerr.RequestTimedOut, nil},
	// As Kafka answers a change its metadata.version does not support yet.
	{ErrReplicaTooOld, kerr.UnsupportedVersion, nil},
	// As Kafka's controller answers a level some broker does not support.
	{ErrFeatureUnsupported, kerr.InvalidUpdateVersion, nil},
	{fsm.ErrFeatureDowngrade, kerr.InvalidUpdateVersion, nil},
	{context.DeadlineExceeded, kerr.RequestTimedOut, nil},
	{groups.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge, nil},
	{groups.ErrInvalidPartition, kerr.UnknownTopicOrPartition, nil},
	{groups.ErrInvalidTopic, kerr.UnknownTopicOrPartition, nil},
	{fsm.ErrTopicExists, kerr.TopicAlreadyExists, nil},
	{fsm.ErrTopicNotFound, kerr.UnknownTopicOrPartition, nil},
}

// requestError is a request, or one topic or partition of it, that a
// handler refuses itself (validation, limits): its Kafka error and the
// message answered with it where the API carries one.
type requestError struct {
	code *kerr.Error
	msg  string
}

func (e *requestError) Error() string { return e.msg }

// refuse returns a requestError answered with code and the formatted message.
func refuse(code *kerr.Error, format string, args ...any) error {
	return &requestError{code: code, msg: fmt.Sprintf(format, args...)}
}

// errorCode translates an error in a group API's answer to its Kafka error
// code (0 for nil). Anything unmapped is UNKNOWN_SERVER_ERROR and is logged.
func (h *Handlers) errorCode(err error) int16 {
	return h.translate(err, false)
}

// controllerErrorCode translates an error in a CreateTopics or DeleteTopics
// answer: Raft leadership errors of the metadata group are NOT_CONTROLLER.
func (h *Handlers) controllerErrorCode(err error) int16 {
	return h.translate(err, true)
}

func (h *Handlers) translate(err error, controller bool) int16 {
	if err == nil {
		return 0
	}
	var re *requestError
	if errors.As(err, &re) {
		return re.code.Code
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			if controller && c.controller != nil {
				return c.controller.Code
			}
			return c.code.Code
		}
	}
	h.logger.Error("unmapped error", "error", err)
	return kerr.UnknownServerError.Code
}

// errMessage is the message answered with an error, where the API has
// one: the error's text, less the name of the sentinel it wraps when that
// leads it ("group id not found: Group g not found." is answered "Group g
// not found.", Kafka's message, beside the GROUP_ID_NOT_FOUND code that
// already says the rest).
func errMessage(err error) *string {
	s := err.Error()
	var tr *Translated
	if errors.As(err, &tr) {
		if rest, ok := strings.CutPrefix(s, tr.Cause.Error()+": "); ok {
			return &rest
		}
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			if rest, ok := strings.CutPrefix(s, c.err.Error()+": "); ok {
				s = rest
			}
			break
		}
	}
	return &s
}

// waitAborted reports whether a blocking call ended because the client's
// connection closed; the handler then returns the error so the transport
// drops the connection instead of answering.
func waitAborted(err error) bool {
	return errors.Is(err, context.Canceled)
}
