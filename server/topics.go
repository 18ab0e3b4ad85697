package server

import (
	"context"
	"time"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
)

// topicRegistry is the api.Topics of a node: writes through the metadata
// Raft group, forwarded to its leader when this node does not lead it
// (cluster.Node.ApplyMetadataChange). Its reads are the metadata FSM's,
// which the handlers also read directly (api.Config.Registry).
type topicRegistry struct {
	node    *cluster.Node
	fsm     *fsm.MetaFSM
	timeout time.Duration
}

func (r *topicRegistry) Topics() []fsm.Topic { return r.fsm.Topics() }

func (r *topicRegistry) Topic(name string) (fsm.Topic, bool) { return r.fsm.Topic(name) }

func (r *topicRegistry) Create(ctx context.Context, t fsm.Topic) error {
	return r.apply(ctx, &fsm.TopicCreate{Topic: t})
}

func (r *topicRegistry) Delete(ctx context.Context, name string) error {
	return r.apply(ctx, &fsm.TopicDelete{Name: name})
}

func (r *topicRegistry) apply(ctx context.Context, cmd fsm.Command) error {
	b, err := fsm.Encode(cmd)
	if err != nil {
		return err
	}
	return apiError(r.node.ApplyMetadataChange(ctx, b, r.timeout))
}
