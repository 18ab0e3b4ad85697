package raftnet

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// unpipelinedTransport is a shard's raft.NetworkTransport with
// AppendEntries pipelining turned off: Raft then replicates to each
// follower one RPC at a time. hashicorp/raft v1.8.0's pipeline can
// deadlock a leader's replication to a follower for good: see the package
// doc, "The pipeline deadlock".
type unpipelinedTransport struct {
	*raft.NetworkTransport
}

// AppendEntriesPipeline refuses, so Raft falls back to plain AppendEntries.
func (unpipelinedTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// Transport is one shard's raft.Transport: its raft.NetworkTransport on
// the shard's stream of the Mux, with the NetworkTransport's AppendEntries
// pipelining turned off (unpipelinedTransport) and, with
// PipelineAppends, a pipeline on the append hub instead (appendPipeline),
// acknowledgements recorded in a matchTracker and heartbeats thinned
// (heartbeats).
//
// With a beat hub, heartbeats that find no answer to reuse go in the
// hub's next frame to their peer (beatHub), and the shard's Raft hears its
// peers' frames through the heartbeat handler. With an append hub, its
// AppendEntries go on the hub's stream to each peer (appendHub).
//
// raft's goroutines call the raft.Transport methods; the shard's
// goroutines call the others (Acked, ForgetPeer, BeginConfirm,
// EndConfirm, Transferring), none of which blocks beyond a short mutex.
type Transport struct {
	unpipelinedTransport
	match *matchTracker
	beats *heartbeats
	hub   *beatHub    // nil: every heartbeat its own RPC
	beat  *beatMember // this shard in hub
	app   *appendHub  // nil: every AppendEntries on the shard's own stream
	appm  *appendMember
	shard int32
	// pipeline: AppendEntriesPipeline offers an appendPipeline.
	pipeline bool
	// snapshots throttles the snapshots InstallSnapshot sends (nil: no
	// throttle); the node's shards share it.
	snapshots *SnapshotThrottle
	// beatsIn holds raft's heartbeat fast path closed once the transport
	// closes, and Close waits for the heartbeats it is handling.
	beatsIn *handlerGate
}

// TransportConfig sets up one shard's Transport.
type TransportConfig struct {
	// MaxPool and Timeout are raft.NetworkTransportConfig's.
	MaxPool int
	Timeout time.Duration
	// Logger is the NetworkTransport's.
	Logger hclog.Logger
	// HeartbeatReuse is how long an answer is reused (HubConfig's);
	// HeartbeatTimeout is the shard's.
	HeartbeatReuse, HeartbeatTimeout time.Duration
	// PipelineAppends lets Raft pipeline AppendEntries to a follower on
	// the append hub (appendPipeline); without an append hub it does
	// nothing.
	PipelineAppends bool
	// SnapshotThrottle bounds the snapshots the shard sends, together
	// with every shard given the same one; nil: unbounded.
	SnapshotThrottle *SnapshotThrottle
}

// NewTransport registers shard's stream on mux and returns its
// transport, in hubs (nil: none). Give it to raft.NewRaft, then call
// SetRaft. The caller closes it if the Raft does not start. Called by
// the shard start goroutines of cluster's Node.Start.
func NewTransport(mux *Mux, hubs *Hubs, shard int32, cfg TransportConfig) (*Transport, error) {
	layer, err := mux.Listen(shard)
	if err != nil {
		return nil, err
	}
	t := &Transport{
		unpipelinedTransport: unpipelinedTransport{raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  layer,
			MaxPool: cfg.MaxPool,
			Timeout: cfg.Timeout,
			Logger:  cfg.Logger,
		})},
		match:     newMatchTracker(),
		beats:     newHeartbeats(cfg.HeartbeatReuse, cfg.HeartbeatTimeout),
		shard:     shard,
		pipeline:  cfg.PipelineAppends,
		snapshots: cfg.SnapshotThrottle,
		beatsIn:   &handlerGate{},
	}
	if hubs != nil {
		t.hub, t.app = hubs.beats, hubs.appends
	}
	if t.hub != nil {
		t.beat = t.hub.add(shard, t.beats, t.match)
	}
	if t.app != nil {
		t.appm = t.app.add(shard, t.unpipelinedTransport.Consumer())
	}
	return t, nil
}

// SetRaft tells the beat hub the shard's Raft, once raft.NewRaft
// returned: frames carry the shard only while it leads.
func (t *Transport) SetRaft(r *raft.Raft) {
	if t.beat != nil {
		t.beat.raft.Store(r)
	}
}

// Acked returns the highest log index the peer id acknowledged to this
// node's leadership of term, and when it last answered; zero when it
// answered none of that term (matchTracker).
func (t *Transport) Acked(id raft.ServerID, term uint64) (uint64, time.Time) {
	return t.match.get(id, term)
}

// ForgetPeer forgets what id acknowledged: it is being added afresh.
func (t *Transport) ForgetPeer(id raft.ServerID) { t.match.reset(id) }

// BeginConfirm and EndConfirm bracket a leadership confirmation round:
// every heartbeat in between is sent (heartbeats).
func (t *Transport) BeginConfirm() { t.beats.beginConfirm() }
func (t *Transport) EndConfirm()   { t.beats.endConfirm() }

// Transferring is called before and after the shard's leader asks Raft
// to hand its leadership over: every heartbeat is sent from then until a
// heartbeat timeout after the last call.
func (t *Transport) Transferring() { t.beats.transferring() }

// HeartbeatsSentAlone counts the heartbeats sent one by one, on the
// shard's own stream, rather than answered from or carried in a frame.
func (t *Transport) HeartbeatsSentAlone() uint64 { return t.beats.sentAlone.Load() }

// AppendEntries answers a heartbeat or probe from the follower's last
// answer when beats allows it, or a heartbeat from a frame of the hub,
// and otherwise sends the request and records the index
// a successful answer covers.
func (t Transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
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

// AppendEntriesPipeline returns a pipeline of AppendEntries to the
// follower id at target on the append hub (appendPipeline) when
// PipelineAppends is on and the hub carries the shard's traffic to target
// now. Otherwise it refuses, and Raft replicates one RPC at a time (see
// the package doc, "The pipeline deadlock"). Called by raft's replication
// goroutine to that follower.
func (t Transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if !t.pipeline || t.app == nil || !t.app.carries(t.shard, target) {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	return newAppendPipeline(t.app, t.appm, t.shard, id, target, t.beats, t.match), nil
}

// InstallSnapshot sends the snapshot as fast as the node's snapshot
// throttle lets it, and records the snapshot's index once it is
// installed. Raft's replication goroutine to the follower calls it and
// waits for the whole transfer.
func (t Transport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.unpipelinedTransport.InstallSnapshot(id, target, args, resp, t.snapshots.reader(data))
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
func (t Transport) SetHeartbeatHandler(cb func(raft.RPC)) {
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
func (t Transport) Consumer() <-chan raft.RPC {
	if t.appm != nil {
		return t.appm.rpcs
	}
	return t.unpipelinedTransport.Consumer()
}

// Close takes the shard out of the hubs, waits for the heartbeats raft's
// fast path is handling, and closes the transport.
func (t Transport) Close() error {
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
