package server

import (
	"context"
	"errors"
	"time"

	"github.com/kcoord/kcoord/cluster"
	"github.com/kcoord/kcoord/fsm"
)

// stampClusterID makes a shard's replicated state name the cluster it
// belongs to: as the shard's leader in epoch, it writes this node's cluster
// id into the shard's FSM (a ClusterStamp, the first command of a new
// shard's log) when the FSM holds none, and adopts the FSM's id when this
// node has none yet (a data dir of an older release). stamped reads the
// id the FSM holds.
//
// It runs on the activation goroutine once the shard serves, and retries
// while epoch lasts and the node has no id to give (before a multi-node
// bootstrap has agreed on one); it never blocks serving.
func (s *Server) stampClusterID(sh *cluster.Shard, epoch uint64, stamped func() string) {
	node := s.opened // set before the node's Start delivered the leadership
	backoff := 100 * time.Millisecond
	for sh.Leads(epoch) && !s.stopping.Load() {
		have, inFSM := node.ClusterID(), stamped()
		switch {
		case inFSM != "" && have == "":
			if err := node.AdoptClusterID(inFSM); err != nil {
				s.logger.Error("cannot adopt the cluster id a shard holds", "shard", sh.ID, "cluster_id", inFSM, "error", err)
			}
			return
		case inFSM != "" && inFSM != have:
			s.logger.Error("a shard holds another cluster's id: this data dir mixes two clusters", "shard", sh.ID,
				"shard_cluster_id", inFSM, "node_cluster_id", have)
			return
		case inFSM != "":
			return
		case have != "":
			err := s.applyStamp(sh, have)
			if err == nil {
				return
			}
			if errors.Is(err, fsm.ErrClusterIDMismatch) {
				s.logger.Error("a shard was stamped with another cluster's id meanwhile", "shard", sh.ID, "cluster_id", have)
				return
			}
			s.logger.Debug("stamping the cluster id failed; retrying", "shard", sh.ID, "error", err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// applyStamp writes a ClusterStamp of id through the shard's Raft.
func (s *Server) applyStamp(sh *cluster.Shard, id string) error {
	b, err := fsm.Encode(&fsm.ClusterStamp{ID: id})
	if err != nil {
		return err
	}
	_, err = sh.Apply(context.Background(), b, s.cfg.OffsetsCommitTimeout)
	return err
}
