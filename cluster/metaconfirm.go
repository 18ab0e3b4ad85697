package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kcoord/kcoord/cluster/raftnet"
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
// A node whose Raft port refuses the dial (its process is gone), that is
// still starting, or whose death is proven before the wait ends is not
// waited for: it serves no client. A node of the previous release does
// not know the op and is passed over with a warning (a rolling upgrade).
// Any other replica that does not confirm within timeout (one that does
// not answer the dial included: cut off from this node, it may still reach
// the leader and its clients) fails the call with errNoConfirmation
// wrapped in ErrApplyTimeout: the change is applied, and the caller hears
// a timeout. Once gossip declares such a node dead it is no longer asked;
// cut off from the cluster, it stops allowing anything when no read
// barrier succeeds there (MetadataFresh). Called by ApplyMetadataChange
// and ConfirmMetadataEverywhere on a Kafka handler's goroutine.
func (n *Node) confirmMetaApplied(ctx context.Context, index uint64, timeout time.Duration) error {
	targets := n.metaReplicaAddrs()
	if len(targets) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The replica answers a little before the call's deadline, so that a
	// late "applied" is heard as one rather than as a broken call.
	wait := max(time.Millisecond, timeout-confirmMargin)
	var mu sync.Mutex
	var missing []int32
	var wg sync.WaitGroup
	for id, addr := range targets {
		wg.Go(func() {
			req := adminRequest{Op: "meta-wait", Index: index, TimeoutMs: wait.Milliseconds()}
			resp, err := n.adminCall(ctx, addr, req)
			if err == nil {
				err = adminError(resp)
			}
			switch {
			case err == nil:
				return
			case errors.Is(err, errAdminDial) && raftnet.IsRefused(err) && ctx.Err() == nil, errors.Is(err, errAdminNotStarted):
				n.logger.Debug("a replica of the metadata group is down or starting; not waited for",
					"target_node", id, "index", index, "error", err)
				return
			case isUnknownOp(resp):
				n.warnOldRelease(id)
				return
			case n.mux.Deaths().IsDead(addr):
				return // it died meanwhile: it serves no one
			}
			mu.Lock()
			missing = append(missing, id)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%w: %w: nodes %v have not confirmed index %d yet (it is committed, and they will apply it)",
			ErrApplyTimeout, errNoConfirmation, missing, index)
	}
	return nil
}

// confirmMargin is how much sooner than its caller's deadline a replica
// answers a "meta-wait" it cannot satisfy.
const confirmMargin = 250 * time.Millisecond

// warnOldRelease logs, once per node, that a node of the previous release
// cannot confirm metadata changes.
func (n *Node) warnOldRelease(id int32) {
	if _, warned := n.oldReleaseWarned.LoadOrStore(id, true); !warned {
		n.logger.Warn("a node of an earlier release cannot confirm metadata changes; a removal is not waited for there until it is upgraded",
			"target_node", id)
	}
}

// ConfirmMetadataEverywhere returns once every live replica of the
// metadata group holds every change the leader had applied when it was
// called: the leader's read index, confirmed as a removal is
// (confirmMetaApplied), this node's replica included. A removal that
// found nothing to remove (an ACL filter matching none, a topic or
// credential already gone, perhaps by an earlier attempt answered
// REQUEST_TIMED_OUT) calls it, so that its success still means "in effect
// everywhere". Its errors wrap raft.ErrNotLeader (no leader to ask) or
// ErrApplyTimeout. Called by the Kafka handlers' goroutines; it blocks at
// most timeout.
func (n *Node) ConfirmMetadataEverywhere(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	index, exact, err := n.metaReadIndex(ctx)
	if err != nil {
		return err
	}
	if !exact || index == 0 {
		return nil // a leader of the previous release, or nothing applied yet: nothing to confirm at an index
	}
	return n.confirmMetaApplied(ctx, index, remaining(ctx))
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
	live := n.members.raftAddrs(n.mux.Deaths())
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
	ctx, cancel := context.WithTimeout(context.Background(), adminBudget(timeoutMs))
	defer cancel()
	return n.awaitMetaApplied(ctx, index)
}
