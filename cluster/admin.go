package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/cluster/raftnet"
	"github.com/kcoord/kcoord/fsm"
)

// Admin calls travel on the Raft port's stream raftnet.AdminStream: a
// remove-node or a metadata change (CreateTopics, DeleteTopics,
// AlterUserScramCredentials, CreateAcls, DeleteAcls) sent to any node is
// forwarded to the metadata leader, and cluster status asks every node
// for its replicas.

// adminTimeout bounds one admin call: dial, request and answer.
const adminTimeout = 5 * time.Second

// adminRequest is one call, a JSON line; adminResponse answers it.
type adminRequest struct {
	// Op is "remove-node", "replicas", "topic-change", "meta-read-index",
	// "meta-wait", "meta-index" (the previous release's read index) or
	// "inspect".
	Op   string `json:"op"`
	Node int32  `json:"node,omitempty"`
	// Command and TimeoutMs are a metadata change's (op "topic-change", the
	// name it had when it carried topic changes only, kept for the nodes
	// of the previous release): an encoded fsm.TopicCreate,
	// fsm.TopicDelete, fsm.ScramCredentialSet, fsm.ScramCredentialDelete,
	// fsm.ACLCreate or fsm.ACLDelete, and how long its apply may take.
	// An inspection's are its query (see Inspector) and how long the asker
	// waits for the answer.
	Command   []byte `json:"command,omitempty"`
	TimeoutMs int64  `json:"timeout_ms,omitempty"`
	// Index is what a "meta-wait" waits for: the replica answers once it
	// has applied the metadata group's command at this index (or after
	// TimeoutMs, with "timeout").
	Index uint64 `json:"index,omitempty"`
}

type adminResponse struct {
	// Code is "" on success, else "not-leader", "not-found", "last-node",
	// "topic-exists", "topic-not-found", "scram-not-found",
	// "scram-invalid", "acl-invalid", "replica-too-old",
	// "feature-unsupported", "feature-downgrade", "timeout",
	// "not-started" (the node's shards are still starting), "unknown-op"
	// or "error" (which the previous release also answers to an op it
	// does not know).
	Code     string          `json:"code,omitempty"`
	Error    string          `json:"error,omitempty"`
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
	// Report is an inspection's answer.
	Report []byte `json:"report,omitempty"`
	// Index is the metadata group's index a call answers: a
	// "meta-read-index"'s read index (metaReadIndexHere), a
	// "topic-change"'s entry (the previous release leaves it 0), or a
	// "meta-index"'s applied index of Raft.
	Index uint64 `json:"index,omitempty"`
}

// serveAdmin accepts admin calls until the layer closes. Runs on its own
// goroutine; each connection is served on one of its own.
func (n *Node) serveAdmin(l *raftnet.StreamLayer) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go n.serveAdminConn(c)
	}
}

// serveAdminConn answers one call and closes the connection.
func (n *Node) serveAdminConn(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(adminTimeout))
	var req adminRequest
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&req); err != nil {
		return
	}
	var resp adminResponse
	if !n.shardsStarted.Load() && req.Op != "replicas" && req.Op != "inspect" {
		// The shards (n.meta among them) are not published yet.
		resp.Code, resp.Error = "not-started", fmt.Sprintf("node %d is still starting its shards", n.cfg.NodeID)
		_ = json.NewEncoder(c).Encode(&resp)
		return
	}
	switch req.Op {
	case "remove-node":
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		err := n.removeNodeHere(ctx, req.Node)
		cancel()
		resp.Code, resp.Error = adminCode(err)
	case "replicas":
		if n.shardsStarted.Load() {
			resp.Replicas = n.localReplicas()
		}
	case "topic-change": // every metadata change; see adminRequest
		idx, err := n.applyMetadataChangeHere(req.Command, req.TimeoutMs)
		resp.Index = idx
		resp.Code, resp.Error = adminCode(err)
	case "meta-read-index":
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout-time.Second)
		idx, err := n.metaReadIndexHere(ctx)
		cancel()
		resp.Index = idx
		resp.Code, resp.Error = adminCode(err)
	case "meta-wait":
		resp.Code, resp.Error = adminCode(n.metaWaitHere(req.Index, req.TimeoutMs))
	case "meta-index":
		idx, err := n.metaIndexHere()
		resp.Index = idx
		resp.Code, resp.Error = adminCode(err)
	case "inspect":
		ctx, cancel := context.WithTimeout(context.Background(), inspectBudget(req.TimeoutMs))
		report, err := n.inspectHere(ctx, req.Command)
		cancel()
		resp.Report = report
		resp.Code, resp.Error = adminCode(err)
	default:
		resp.Code, resp.Error = "unknown-op", fmt.Sprintf("unknown admin op %q", req.Op)
	}
	_ = json.NewEncoder(c).Encode(&resp)
}

// adminCode is the wire form of an admin call's error.
func adminCode(err error) (code, msg string) {
	switch {
	case err == nil:
		return "", ""
	case errors.Is(err, ErrNotMetaLeader):
		return "not-leader", err.Error()
	case errors.Is(err, fsm.ErrNodeNotFound):
		return "not-found", err.Error()
	case errors.Is(err, ErrLastActiveNode):
		return "last-node", err.Error()
	case errors.Is(err, fsm.ErrTopicExists):
		return "topic-exists", err.Error()
	case errors.Is(err, fsm.ErrTopicNotFound):
		return "topic-not-found", err.Error()
	case errors.Is(err, fsm.ErrScramCredentialNotFound):
		return "scram-not-found", err.Error()
	case errors.Is(err, fsm.ErrInvalidScramCredential):
		return "scram-invalid", err.Error()
	case errors.Is(err, fsm.ErrInvalidACL):
		return "acl-invalid", err.Error()
	case errors.Is(err, ErrReplicaTooOld):
		return "replica-too-old", err.Error()
	case errors.Is(err, ErrFeatureUnsupported):
		return "feature-unsupported", err.Error()
	case errors.Is(err, fsm.ErrFeatureDowngrade):
		return "feature-downgrade", err.Error()
	case errors.Is(err, ErrApplyTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, raft.ErrEnqueueTimeout):
		return "timeout", err.Error()
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return "not-leader", err.Error()
	}
	return "error", err.Error()
}

// adminError is the error of an admin call's answer.
func adminError(resp adminResponse) error {
	switch resp.Code {
	case "":
		return nil
	case "not-leader":
		return fmt.Errorf("%w (%s)", ErrNotMetaLeader, resp.Error)
	case "not-found":
		return fmt.Errorf("%w (%s)", fsm.ErrNodeNotFound, resp.Error)
	case "last-node":
		return fmt.Errorf("%w (%s)", ErrLastActiveNode, resp.Error)
	case "topic-exists":
		return fmt.Errorf("%w (%s)", fsm.ErrTopicExists, resp.Error)
	case "topic-not-found":
		return fmt.Errorf("%w (%s)", fsm.ErrTopicNotFound, resp.Error)
	case "scram-not-found":
		return fmt.Errorf("%w (%s)", fsm.ErrScramCredentialNotFound, resp.Error)
	case "scram-invalid":
		return fmt.Errorf("%w (%s)", fsm.ErrInvalidScramCredential, resp.Error)
	case "acl-invalid":
		return fmt.Errorf("%w (%s)", fsm.ErrInvalidACL, resp.Error)
	case "replica-too-old":
		return fmt.Errorf("%w (%s)", ErrReplicaTooOld, resp.Error)
	case "timeout":
		return fmt.Errorf("%w (%s)", ErrApplyTimeout, resp.Error)
	case "not-started":
		return fmt.Errorf("%w (%s)", errAdminNotStarted, resp.Error)
	case "feature-unsupported":
		return fmt.Errorf("%w (%s)", ErrFeatureUnsupported, resp.Error)
	case "feature-downgrade":
		return fmt.Errorf("%w (%s)", fsm.ErrFeatureDowngrade, resp.Error)
	}
	return errors.New(resp.Error)
}

// adminBudget is how long an admin call's work on this node may take when
// its caller gave it timeoutMs (0: not said): within the caller's read
// deadline (adminTimeout) with a second to spare, so that the caller
// hears a timeout as one rather than as a lost connection.
func adminBudget(timeoutMs int64) time.Duration {
	budget := adminTimeout - time.Second
	if timeout := time.Duration(timeoutMs) * time.Millisecond; timeout > 0 && timeout < budget {
		return timeout
	}
	return budget
}

// errAdminNotStarted is the answer of a node whose shards are still
// starting: it serves no client yet, and nothing was asked of its shards.
var errAdminNotStarted = errors.New("cluster: the node is still starting")

// errAdminDial is an admin call that did not reach its node: nothing was
// asked of it.
var errAdminDial = errors.New("cluster: dialing the admin stream of")

// adminCall sends req to the node at raftAddr and returns its answer. An
// error wrapping errAdminDial means the request never left.
func (n *Node) adminCall(ctx context.Context, raftAddr string, req adminRequest) (adminResponse, error) {
	deadline := time.Now().Add(adminTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c, err := n.admin.Dial(raft.ServerAddress(raftAddr), time.Until(deadline))
	if err != nil {
		return adminResponse{}, fmt.Errorf("%w %s: %w", errAdminDial, raftAddr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(deadline) // one deadline for the dial and the exchange
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(c).Encode(&req); err != nil {
		return adminResponse{}, err
	}
	var resp adminResponse
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&resp); err != nil {
		return adminResponse{}, fmt.Errorf("admin call to %s: %w", raftAddr, err)
	}
	return resp, nil
}
