package cluster

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// unpipelinedTransport is a shard's raft.NetworkTransport with
// AppendEntries pipelining turned off: Raft then replicates to each
// follower one RPC at a time.
//
// hashicorp/raft v1.8.0's pipeline can deadlock. When a follower answers
// with a newer term or Success=false, raft's pipelineDecode returns and
// leaves the pipeline's done channel unread; the send loop can then make
// one more AppendEntries, which parks on the in-progress channel while the
// transport's decoder parks on the done channel. Only the pipeline's Close
// frees them, and the send loop that would call it is the one parked. The
// replication goroutine to that follower is stuck for good: the follower
// gets no more entries, and Raft's Shutdown waits for that goroutine
// forever. The chaos suite's rolling restart found it: right after a
// planned stop moved this node's leaderships away (stale-term answers are
// exactly what then arrives), 26 of 42 SIGTERMs ran into the 20 s shutdown
// timeout. Grafana Pyroscope's metastore turned pipelining off for the
// same deadlock.
type unpipelinedTransport struct {
	*raft.NetworkTransport
}

// AppendEntriesPipeline refuses, so Raft falls back to plain AppendEntries.
func (unpipelinedTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// shardTransport is a shard's raft.NetworkTransport with AppendEntries
// pipelining turned off (unpipelinedTransport), acknowledgements recorded
// in a matchTracker and heartbeats thinned (heartbeats).
//
// With a hub, heartbeats that find no answer to reuse go in the hub's
// next frame to their peer (beatHub), and the shard's Raft hears its
// peers' frames through the heartbeat handler.
type shardTransport struct {
	unpipelinedTransport
	match *matchTracker
	beats *heartbeats
	hub   *beatHub    // nil: every heartbeat its own RPC
	beat  *beatMember // this shard in hub
	app   *appendHub  // nil: every AppendEntries on the shard's own stream
	appm  *appendMember
	shard int32
	// beatsIn holds raft's heartbeat fast path closed once the transport
	// closes, and Close waits for the heartbeats it is handling.
	beatsIn *handlerGate
}

// AppendEntries answers a heartbeat or probe from the follower's last
// answer when beats allows it, or a heartbeat from a frame of the hub,
// and otherwise sends the request and records the index
// a successful answer covers.
func (t shardTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if t.hub != nil && isHeartbeat(args) {
		if t.hub.beat(t.beat, t.shard, id, target, args, resp) {
			return nil
		}
	} else if t.beats.reused(id, args, resp) {
		return nil
	}
	if isHeartbeat(args) {
		t.beats.sentAlone.Add(1)
	}
	sent := time.Now()
	var err error
	handled := false
	if t.app != nil && !isHeartbeat(args) {
		handled, err = t.app.append(t.appm, t.shard, target, args, resp)
	}
	if !handled {
		err = t.unpipelinedTransport.AppendEntries(id, target, args, resp)
	}
	t.beats.answered(id, sent, args, resp, err)
	if err == nil && resp.Success {
		t.match.acked(id, args.Term, args.PrevLogEntry+uint64(len(args.Entries)))
	}
	return err
}

// InstallSnapshot records the snapshot's index once it is installed.
func (t shardTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.unpipelinedTransport.InstallSnapshot(id, target, args, resp, data)
	if err == nil && resp.Success {
		t.match.acked(id, args.Term, args.LastLogIndex)
	}
	return err
}

// SetHeartbeatHandler gives raft's heartbeat fast path to the transport
// and to the hub, which hands it the heartbeats of peers' frames.
//
// The handler is held behind beatsIn: raft's fast path runs on the
// transport's connection goroutines, which raft's Shutdown does not wait
// for, so a heartbeat checked against raft's shutdown just before it could
// still be storing a term when the node closes its log store (raft panics
// on that store's error). Close waits for such a heartbeat, and answers
// later ones with raft.ErrRaftShutdown.
func (t shardTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if t.beatsIn != nil {
		inner := cb
		cb = func(rpc raft.RPC) {
			if !t.beatsIn.enter() {
				rpc.Respond(nil, raft.ErrRaftShutdown)
				return
			}
			defer t.beatsIn.exit()
			inner(rpc)
		}
	}
	t.unpipelinedTransport.SetHeartbeatHandler(cb)
	if t.hub != nil {
		t.beat.handler.Store(&cb)
	}
}

// handlerGate lets handlers in until it closes; close waits for those in.
// Any goroutine may use it.
type handlerGate struct {
	mu     sync.RWMutex
	closed bool
}

// enter reports whether the handler may run; if so, it must call exit.
func (g *handlerGate) enter() bool {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return false
	}
	return true
}

func (g *handlerGate) exit() { g.mu.RUnlock() }

// close shuts the gate and returns once no handler is in.
func (g *handlerGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Consumer is the channel the shard's Raft reads its RPCs from: with an
// append hub, the one the hub delivers AppendEntries to and the shard's
// own transport's RPCs are forwarded to.
func (t shardTransport) Consumer() <-chan raft.RPC {
	if t.appm != nil {
		return t.appm.rpcs
	}
	return t.unpipelinedTransport.Consumer()
}

// Close takes the shard out of the hubs, waits for the heartbeats raft's
// fast path is handling, and closes the transport.
func (t shardTransport) Close() error {
	if t.beatsIn != nil {
		t.beatsIn.close()
	}
	if t.hub != nil {
		t.hub.remove(t.shard, t.beat)
	}
	if t.app != nil {
		t.app.remove(t.shard, t.appm)
	}
	return t.unpipelinedTransport.Close()
}
