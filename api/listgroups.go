package api

// ListGroups (key 16), versions 0–5.
// v1: throttle. v3: flexible. v4: a states filter and each group's state
// (KIP-518). v5: a types filter and each group's type (KIP-848: "classic"
// or "consumer").
// Lists the groups of every shard this node leads, as a Kafka broker lists
// the groups it coordinates. With Cluster DESCRIBE every group is listed;
// without it, only the groups the principal may describe (Group DESCRIBE),
// as in Kafka.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

func (h *Handlers) listGroups(ctx context.Context, rc *transport.RequestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req, err := typed[*kmsg.ListGroupsRequest](kreq)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	// Each shard this node leads confirms its leadership with a quorum
	// before listing (a round trip): ask them all at once.
	type shardList struct {
		listed []groups.GroupListing
		err    error
	}
	lists := make([]shardList, len(h.shards))
	var wg sync.WaitGroup
	for i, s := range h.shards {
		wg.Go(func() {
			defer func() {
				// Off the connection's goroutine, whose recovery would
				// not see it: a panic fails only this shard's listing.
				if r := recover(); r != nil {
					h.logger.Error("listing a shard's groups panicked", "panic", r)
					lists[i].err = fmt.Errorf("api: listing groups panicked: %v", r)
				}
			}()
			lists[i].listed, lists[i].err = s.Coordinator.List(ctx)
		})
	}
	wg.Wait()
	// Cluster DESCRIBE lists every group; without it each group needs
	// Group DESCRIBE. A probe, so no read barrier unless a group is left
	// out (allowedUnder).
	describeCluster := func() bool { return h.allowedHere(rc, auth.OpDescribe, auth.ResourceCluster, auth.ClusterName) }
	everyGroup := describeCluster()
	for _, sl := range lists {
		listed, err := sl.listed, sl.err
		if errors.Is(err, groups.ErrLoadInProgress) {
			// As Kafka: list what is loaded, and say a load is under way.
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		}
		if err != nil {
			continue // not this node's shard, or still loading
		}
		for _, l := range listed {
			if len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, l.State) ||
				len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, l.Type) ||
				!h.allowedUnder(rc, &everyGroup, describeCluster, auth.OpDescribe, auth.ResourceGroup, l.GroupID) {
				continue
			}
			rg := kmsg.NewListGroupsResponseGroup()
			rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = l.GroupID, l.ProtocolType, l.State, l.Type
			resp.Groups = append(resp.Groups, rg)
		}
	}
	return resp, nil
}

// containsFold reports whether list holds s, in any case and with
// spaces around trimmed (Kafka trims and lower-cases the filters).
func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(strings.TrimSpace(x), s) {
			return true
		}
	}
	return false
}
