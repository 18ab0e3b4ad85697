package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Inspector answers an inspection query: what a node knows that the
// cluster package does not (the status page asks every node for the groups
// it coordinates and its recent events). The query and the report are
// opaque to the cluster. Called on the goroutine of the admin connection
// that carried the query, or on the caller's for this node's own; it may
// block, but not beyond ctx (inspectTimeout on a remote node's behalf).
type Inspector func(ctx context.Context, query []byte) ([]byte, error)

// inspectTimeout bounds the Inspector's work for a remote node: shorter
// than adminTimeout, the asking node's bound on the whole call, so that its
// answer can still arrive.
const inspectTimeout = adminTimeout * 4 / 5

// inspectBudget is how long a remote node's Inspector may work on a query
// whose asker has budgetMs left (0: not said): four fifths of it, at most
// inspectTimeout, leaving the rest for the answer's way back.
func inspectBudget(budgetMs int64) time.Duration {
	if budgetMs <= 0 {
		return inspectTimeout
	}
	return min(inspectTimeout, time.Duration(budgetMs)*time.Millisecond*4/5)
}

// ErrNoInspector is an inspection of a node that has no Inspector.
var ErrNoInspector = errors.New("cluster: the node answers no inspection")

// ErrNodeUnreachable is an inspection of a node gossip does not list as
// alive.
var ErrNodeUnreachable = errors.New("cluster: node not reachable")

// Inspection is one node's answer to InspectAll: its report, or why there
// is none.
type Inspection struct {
	Node   int32
	Report []byte
	Err    error
}

// Inspect sends query to node id's Inspector (this node's own without a
// call) and returns its report. Safe from any goroutine; it blocks for the
// call, at most adminTimeout or until ctx ends.
func (n *Node) Inspect(ctx context.Context, id int32, query []byte) ([]byte, error) {
	if id == n.cfg.NodeID {
		return n.inspectHere(ctx, query)
	}
	addr, ok := n.members.raftAddrs(n.mux.Deaths())[id]
	if !ok {
		return nil, fmt.Errorf("%w: node %d", ErrNodeUnreachable, id)
	}
	return n.inspectAt(ctx, addr, query)
}

// InspectAll sends query to every live node at once and returns their
// answers in node id order, each within adminTimeout or ctx.
func (n *Node) InspectAll(ctx context.Context, query []byte) []Inspection {
	live := n.members.raftAddrs(n.mux.Deaths())
	live[n.cfg.NodeID] = n.RaftAddr()
	out := make([]Inspection, 0, len(live))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, addr := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var in Inspection
			in.Node = id
			if id == n.cfg.NodeID {
				in.Report, in.Err = n.inspectHere(ctx, query)
			} else {
				in.Report, in.Err = n.inspectAt(ctx, addr, query)
			}
			mu.Lock()
			out = append(out, in)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b Inspection) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// inspectHere answers a query with this node's Inspector.
func (n *Node) inspectHere(ctx context.Context, query []byte) ([]byte, error) {
	if n.cfg.Inspect == nil {
		return nil, ErrNoInspector
	}
	return n.cfg.Inspect(ctx, query)
}

// inspectAt asks the node at raftAddr over the admin stream.
func (n *Node) inspectAt(ctx context.Context, raftAddr string, query []byte) ([]byte, error) {
	req := adminRequest{Op: "inspect", Command: query}
	if d, ok := ctx.Deadline(); ok {
		req.TimeoutMs = max(time.Until(d).Milliseconds(), 1)
	}
	resp, err := n.adminCall(ctx, raftAddr, req)
	if err != nil {
		return nil, err
	}
	if err := adminError(resp); err != nil {
		return nil, err
	}
	return resp.Report, nil
}
