package api

// FindCoordinator (key 10), versions 0–6.
// v0: one group key. v1: key type (0 group, 1 transaction), throttle and
// error message. v3: flexible. v4: batched CoordinatorKeys, one answer per
// key (KIP-699). v6: key type 2, share-partition keys (KIP-932).
// The coordinator of a group is the leader of its shard. Each key type is
// checked first as Kafka 4.x's KafkaApis.getCoordinator checks it: a group
// key needs Group DESCRIBE (GROUP_AUTHORIZATION_FAILED) and a transaction
// key TransactionalId DESCRIBE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a
// share key is INVALID_REQUEST before v6, and from v6 needs Cluster
// CLUSTER_ACTION (CLUSTER_AUTHORIZATION_FAILED); any other key type is
// INVALID_REQUEST. kcoord serves no transactions (an authorized
// transaction key gets COORDINATOR_NOT_AVAILABLE) and no share groups (an
// authorized share key gets INVALID_REQUEST, as Kafka 4.0 answers without
// a share coordinator).
// The key-type refusals carry Kafka's messages: up to v3 the error's own
// (Kafka answers the whole request with it), from v4 none, except where
// Kafka fails the whole request (an unknown type, a share key without
// CLUSTER_ACTION) and every key carries the error's own.

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/transport"
)

// Key types of FindCoordinator v1+ (Kafka's CoordinatorType).
const (
	coordinatorTypeGroup       int8 = 0
	coordinatorTypeTransaction int8 = 1
	coordinatorTypeShare       int8 = 2
)

// Versions of FindCoordinator that change how keys are answered.
const (
	// findCoordinatorBatchedVersion answers one coordinator per key.
	findCoordinatorBatchedVersion int16 = 4
	// findCoordinatorShareVersion is the first to name share keys.
	findCoordinatorShareVersion int16 = 6
)

func (h *Handlers) findCoordinator(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.FindCoordinatorRequest](kreq)
	if err != nil {
		return nil, err
	}
	// One hold for all the request's keys (see coordinatorFor); none
	// when the hold is off.
	ctx, cancel := context.WithTimeout(ctx, max(0, h.cfg.ElectionHold))
	defer cancel()
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version >= findCoordinatorBatchedVersion {
		for _, key := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, h.coordinatorFor(ctx, rc, req, key))
		}
		return resp, nil
	}
	c := h.coordinatorFor(ctx, rc, req, req.CoordinatorKey)
	resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
	resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	return resp, nil
}

// coordinatorFor answers for one key: the leader of the group's shard, once
// the key passes its type's checks (see the top of the file). A shard
// whose leader this node does not know yet (an election under way, or this
// node fenced and waiting for gossip to name the new leader) is waited for
// until ctx ends (kcoord.group.election.hold.ms for the whole request),
// rather than answered COORDINATOR_NOT_AVAILABLE at once: kafka-go leaves
// its group on that answer.
func (h *Handlers) coordinatorFor(ctx context.Context, rc *transport.RequestContext, req *kmsg.FindCoordinatorRequest, key string) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port = key, -1, -1
	fail := func(e *kerr.Error, msg string) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode, c.ErrorMessage = e.Code, &msg
		return c
	}
	// refused answers a check Kafka answers on the key: with the
	// error's message only where the answer is the whole request's (v0–v3).
	refused := func(e *kerr.Error) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode = e.Code
		if req.Version < findCoordinatorBatchedVersion {
			msg := e.Description
			c.ErrorMessage = &msg
		}
		return c
	}
	switch req.CoordinatorType {
	case coordinatorTypeGroup:
		if err := h.groupDenied(rc, auth.OpDescribe, key); err != nil {
			return fail(kerr.GroupAuthorizationFailed, err.Error())
		}
	case coordinatorTypeTransaction:
		if !h.allowed(rc, auth.OpDescribe, auth.ResourceTransactionalID, key) {
			return refused(kerr.TransactionalIDAuthorizationFailed)
		}
		return fail(kerr.CoordinatorNotAvailable, "kcoord coordinates consumer groups only; transactions are not supported")
	case coordinatorTypeShare:
		if req.Version < findCoordinatorShareVersion {
			return refused(kerr.InvalidRequest)
		}
		if h.clusterDenied(rc, auth.OpClusterAction) != nil {
			return fail(kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed.Description)
		}
		return refused(kerr.InvalidRequest)
	default:
		return fail(kerr.InvalidRequest, kerr.InvalidRequest.Description)
	}
	leader, ok := h.cluster.AwaitLeaderOf(ctx, h.shardOf(key))
	if !ok {
		return fail(kerr.CoordinatorNotAvailable, "the group's shard has no leader yet")
	}
	host, port, err := splitHostPort(leader.KafkaAddr)
	if err != nil {
		return fail(kerr.CoordinatorNotAvailable, err.Error())
	}
	c.NodeID, c.Host, c.Port = leader.NodeID, host, port
	return c
}

// splitHostPort splits an advertised host:port for the wire.
func splitHostPort(addr string) (string, int32, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseInt(ps, 10, 32)
	if err != nil {
		return "", 0, err
	}
	return host, int32(port), nil
}
