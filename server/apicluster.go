package server

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/api"
	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/release"
)

// apiCluster is the node as the api handlers see it (api.Cluster and
// api.FeatureStore): cluster's brokers become api.Brokers and cluster's
// errors become api's (apiError), so that api does not import cluster.
// Its methods run on handler goroutines.
type apiCluster struct{ node *cluster.Node }

func (a apiCluster) Brokers() []api.Broker {
	bs := a.node.Brokers()
	out := make([]api.Broker, len(bs))
	for i, b := range bs {
		out[i] = api.Broker(b)
	}
	return out
}

func (a apiCluster) LeaderOf(shard int32) (api.Broker, bool) {
	b, ok := a.node.LeaderOf(shard)
	return api.Broker(b), ok
}

func (a apiCluster) AwaitLeaderOf(ctx context.Context, shard int32) (api.Broker, bool) {
	b, ok := a.node.AwaitLeaderOf(ctx, shard)
	return api.Broker(b), ok
}

func (a apiCluster) Controller() (api.Broker, bool) { return a.LeaderOf(cluster.MetaShard) }

func (a apiCluster) ClusterID() string { return a.node.ClusterID() }

func (a apiCluster) FinalizedLevel() release.Level { return a.node.FinalizedLevel() }

func (a apiCluster) CheckFinalize(level release.Level) (release.Level, error) {
	l, err := a.node.CheckFinalize(level)
	return l, apiError(err)
}

func (a apiCluster) FinalizeFeature(ctx context.Context, level release.Level, timeout time.Duration) (release.Level, error) {
	l, err := a.node.FinalizeFeature(ctx, level, timeout)
	return l, apiError(err)
}

// clusterErrors pairs each cluster or Raft error that reaches the api
// handlers with the api sentinel it means.
var clusterErrors = []struct{ from, to error }{
	{raft.ErrNotLeader, api.ErrNotLeader},
	{raft.ErrLeadershipLost, api.ErrNotLeader},
	{raft.ErrRaftShutdown, api.ErrNotLeader},
	{raft.ErrLeadershipTransferInProgress, api.ErrNotLeader},
	{raft.ErrEnqueueTimeout, api.ErrApplyTimeout},
	{cluster.ErrApplyTimeout, api.ErrApplyTimeout},
	{cluster.ErrReplicaTooOld, api.ErrReplicaTooOld},
	{cluster.ErrFeatureUnsupported, api.ErrFeatureUnsupported},
}

// apiError is the one translation of cluster's and Raft's errors for the
// api handlers (the metadata stores and the feature store return through
// it; group writes translate theirs in groups.ApplyError): each becomes
// its api sentinel, with errors.Is still true of the original and the
// original's text, so answers are unchanged. Other errors are returned as
// they are.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	for _, t := range clusterErrors {
		if errors.Is(err, t.from) {
			return &api.Translated{Sentinel: t.to, Cause: t.from, Err: err}
		}
	}
	return err
}
