package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// This file is the confirmation of a revoking metadata change (a deleted
// topic, ACL or credential, a replaced credential) by every live replica
// of the metadata group before it is answered: a revoked grant must not
// keep allowing requests on a node that has not applied its removal.

// errNoConfirmation is returned by confirmMetaApplied for a live replica
// that did not confirm the change in time.
var errNoConfirmation = errors.New("cluster: a replica of the metadata group did not confirm the change")

// confirmMetaApplied returns once every other live replica of the
// metadata group has applied the command at index: each node gossip holds
// alive, not fenced for its disk and in the group's configuration is asked
// at once ("meta-wait") and answers when its replica has applied it.
//
// A node that cannot be reached (its Raft port refuses or does not
// answer the dial, or the call breaks) is not waited for: its clients are
// cut off from it, or, cut off from the metadata leader too, it stops
// allowing anything once MetadataFresh turns false. A node of the previous
// release does not know the op and is passed over with a warning (a
// rolling upgrade). A reachable replica that does not confirm within
// timeout fails the call with errNoConfirmation wrapped in
// ErrApplyTimeout: the change is applied, and the caller hears a timeout.
// Called by ApplyMetadataChange on a Kafka handler's goroutine.
func (n *Node) confirmMetaApplied(ctx context.Context, index uint64, timeout time.Duration) error {
	targets := n.metaReplicaAddrs()
	if len(targets) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	var missing []int32
	var wg sync.WaitGroup
	for id, addr := range targets {
		wg.Go(func() {
			req := adminRequest{Op: "meta-wait", Index: index, TimeoutMs: timeout.Milliseconds()}
			resp, err := n.adminCall(ctx, addr, req)
			switch {
			case errors.Is(err, errAdminDial):
				n.logger.Debug("a replica of the metadata group is not reachable to confirm a change; not waited for",
					"target_node", id, "index", index, "error", err)
				return
			case err != nil && ctx.Err() == nil:
				n.logger.Debug("a replica of the metadata group broke off confirming a change; not waited for",
					"target_node", id, "index", index, "error", err)
				return
			case err == nil && isUnknownOp(resp):
				n.logger.Warn("a node of an earlier release cannot confirm a revoking metadata change; not waited for",
					"target_node", id, "index", index)
				return
			case err == nil:
				err = adminError(resp)
			}
			if err != nil {
				mu.Lock()
				missing = append(missing, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%w: %w: nodes %v have not applied index %d yet (it is committed, and they will)",
			ErrApplyTimeout, errNoConfirmation, missing, index)
	}
	return nil
}

// metaReplicaAddrs returns the Raft address of every other node that
// replicates the metadata group (in the configuration this node holds,
// voter or not), leaving out those proven dead and those fenced for their
// disk (which allow nothing: MetadataFresh).
func (n *Node) metaReplicaAddrs() map[int32]string {
	conf, ok := n.meta.configuration()
	if !ok {
		return nil
	}
	live := n.members.raftAddrs(n.mux.deaths)
	out := make(map[int32]string, len(conf.Servers))
	for _, s := range conf.Servers {
		id := voterID(s)
		if id == n.cfg.NodeID {
			continue
		}
		if addr, ok := live[id]; ok && n.members.diskOf(id) == "" {
			out[id] = addr
		}
	}
	return out
}

// metaWaitHere answers a "meta-wait": once this node's replica of the
// metadata group has applied index, or with a timeout after timeoutMs (at
// most within the caller's admin deadline). Called by serveAdminConn.
func (n *Node) metaWaitHere(index uint64, timeoutMs int64) error {
	rep, ok := n.meta.FSM.(metaReplica)
	if !ok {
		return nil
	}
	budget := adminTimeout - time.Second
	timeout := min(time.Duration(timeoutMs)*time.Millisecond, budget)
	if timeout <= 0 {
		timeout = budget
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := rep.WaitApplied(ctx, index); err != nil {
		return fmt.Errorf("%w: index %d not applied here: %v", ErrApplyTimeout, index, err)
	}
	return nil
}
