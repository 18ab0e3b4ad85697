package raftnet

import (
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// HubConfig sets up a node's Hubs.
type HubConfig struct {
	// LocalID is the node's Raft server id, the same in every shard.
	LocalID raft.ServerID
	// HeartbeatTimeout, LeaderHeartbeatTimeout and TransportTimeout are
	// the shards' (cluster.Config).
	HeartbeatTimeout       time.Duration
	LeaderHeartbeatTimeout time.Duration
	TransportTimeout       time.Duration
	// HeartbeatReuse is how long a follower's answer in a frame answers
	// a shard leader's next heartbeats (cluster.Config.HeartbeatReuse);
	// zero or less: no beat hub, every heartbeat its own RPC.
	HeartbeatReuse time.Duration
	// SeparateAppendStreams: no append hub, every shard's AppendEntries
	// on its own stream.
	SeparateAppendStreams bool
	// Logger is named "beats" and "append" for the two hubs.
	Logger hclog.Logger
}

// Hubs are a node's node-wide streams on its Mux: the beat hub, which
// coalesces every shard's heartbeats to a peer into one frame
// (beathub.go), and the append hub, which carries every shard's
// AppendEntries to a peer on one connection (appendhub.go). Each shard's
// Transport uses them (NewTransport). Either may be off (HubConfig); a
// nil *Hubs is both off. Its methods are safe for concurrent use.
type Hubs struct {
	beats   *beatHub   // nil: off
	appends *appendHub // nil: off
}

// StartHubs starts the hubs cfg turns on, listening on their streams of
// mux (BeatStream, AppendStream). cluster.Open calls it once, before
// any shard's transport.
func StartHubs(mux *Mux, cfg HubConfig) (*Hubs, error) {
	h := &Hubs{}
	var err error
	if cfg.HeartbeatReuse > 0 {
		if h.beats, err = newBeatHub(mux, cfg.LocalID, cfg.HeartbeatTimeout, cfg.HeartbeatReuse, cfg.LeaderHeartbeatTimeout, cfg.Logger.Named("beats")); err != nil {
			return nil, err
		}
	}
	if !cfg.SeparateAppendStreams {
		if h.appends, err = newAppendHub(mux, cfg.TransportTimeout, cfg.HeartbeatTimeout, cfg.Logger.Named("append")); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// StopHeartbeats closes the beat hub: the shards' heartbeats go one by
// one from then on. The node calls it first on shutdown, while the shards
// stop. Idempotent; it waits for the hub's goroutines.
func (h *Hubs) StopHeartbeats() {
	if h != nil && h.beats != nil {
		h.beats.close()
	}
}

// Close closes both hubs: waiting heartbeats and AppendEntries fail over
// to the shards' own streams or fail. Idempotent; it waits for the hubs'
// goroutines.
func (h *Hubs) Close() {
	if h == nil {
		return
	}
	h.StopHeartbeats()
	if h.appends != nil {
		h.appends.close()
	}
}

// On reports which hubs run.
func (h *Hubs) On() (beats, appends bool) {
	return h != nil && h.beats != nil, h != nil && h.appends != nil
}

// HubStats counts what the hubs carried since they started.
type HubStats struct {
	// Frames, FrameBeats and FrameAnswers count the beat hub's frames
	// sent, the heartbeats they carried and the answers that came back.
	Frames, FrameBeats, FrameAnswers uint64
	// Appends counts AppendEntries answered through the append hub;
	// AppendsFellBack, those handed back to their shard's own stream;
	// AppendsTimedOut, those the peer did not answer in time.
	Appends, AppendsFellBack, AppendsTimedOut uint64
}

// Stats returns what the hubs carried so far (zero for a hub that is
// off). Any goroutine may call it.
func (h *Hubs) Stats() HubStats {
	var st HubStats
	if h == nil {
		return st
	}
	if b := h.beats; b != nil {
		st.Frames, st.FrameBeats, st.FrameAnswers = b.frames.Load(), b.carried.Load(), b.answers.Load()
	}
	if a := h.appends; a != nil {
		st.Appends, st.AppendsFellBack, st.AppendsTimedOut = a.sent.Load(), a.fellBack.Load(), a.timedOut.Load()
	}
	return st
}
