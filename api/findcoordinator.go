package api

// FindCoordinator (key 10), versions 0–6.
// v0: one group key. v1: key type (0 group, 1 transaction), throttle and
// error message. v3: flexible. v4: batched CoordinatorKeys, one answer per
// key (KIP-699). v5–v6: no change to the group answer.
// The coordinator of a group is the leader of its shard; kcoord serves no
// transactions, so transaction keys get COORDINATOR_NOT_AVAILABLE.

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/transport"
)

const coordinatorTypeGroup int8 = 0

func (h *Handlers) findCoordinator(_ context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.FindCoordinatorRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, h.coordinatorFor(rc, key, req.CoordinatorType))
		}
		return resp, nil
	}
	c := h.coordinatorFor(rc, req.CoordinatorKey, req.CoordinatorType)
	resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
	resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	return resp, nil
}

// coordinatorFor answers for one key: the leader of the group's shard, to
// a principal with Group DESCRIBE on it (else GROUP_AUTHORIZATION_FAILED).
func (h *Handlers) coordinatorFor(rc *transport.RequestContext, key string, keyType int8) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port = key, -1, -1
	fail := func(e *kerr.Error, msg string) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode, c.ErrorMessage = e.Code, &msg
		return c
	}
	if keyType != coordinatorTypeGroup {
		return fail(kerr.CoordinatorNotAvailable, "kcoord coordinates consumer groups only; transactions are not supported")
	}
	if err := h.groupDenied(rc, auth.OpDescribe, key); err != nil {
		return fail(kerr.GroupAuthorizationFailed, err.Error())
	}
	leader, ok := h.cluster.LeaderOf(h.cluster.ShardFor(key))
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
