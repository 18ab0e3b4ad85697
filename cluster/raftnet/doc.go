// Package raftnet is the Raft network of a kcoord node: one TCP port
// that every Raft group of the node shares (each group shard, the metadata
// group MetaShard) together with the node's other node-to-node streams,
// and the raft.Transport each shard's Raft talks through. Package cluster
// runs the node and its shards on top of it; raftnet knows nothing of
// nodes, gossip or placement.
//
// # Files
//
//   - mux.go: Mux and StreamLayer. One listener for every stream. Each
//     connection starts with a header naming its stream, the dialer's
//     advertised address and (version 2) its cluster id; the accept loop
//     drops a header of another cluster and hands the rest to the stream's
//     raft.StreamLayer. Fence shuts the port for a node fenced for its
//     disk; Conns lists the open connections; Formats names the header's
//     versions.
//   - streams.go: the stream ids: group shards 0 and up, and one reserved
//     block below zero (MetaShard, AdminStream, BeatStream, AppendStream).
//   - rafttls.go: mutual TLS 1.2+ on every connection of the port,
//     accepted or dialed, before the header (LoadTLS, ListenMuxTLS), with
//     the files reloaded when they change, and WarnLimiter, which keeps a
//     repeated warning to one line per interval.
//   - transport.go: Transport, one shard's raft.Transport: raft's
//     NetworkTransport on the shard's stream, without its pipelining (see
//     "The pipeline deadlock"), recording what each follower acknowledged
//     (match.go) and thinning heartbeats (heartbeats.go).
//   - pipeline.go: appendPipeline, a shard leader's AppendEntries
//     pipeline to one follower on the append hub, whose hand-offs cannot
//     park for good; off unless TransportConfig.PipelineAppends.
//   - hubs.go: Hubs, the node-wide streams that carry every shard's
//     traffic to a peer at once: the beat hub and the append hub.
//   - hubtable.go: what the two hubs share: their shards, one link per
//     peer, and their closing.
//   - beathub.go: the beat hub: every shard's heartbeats to a peer in one
//     frame, answered in one reply.
//   - heartbeats.go: heartbeat thinning: a leader's heartbeats and idle
//     probes answered from the follower's last real answer (see "Heartbeat
//     thinning").
//   - appendhub.go: the append hub: every shard's AppendEntries to a peer
//     on one connection, batched into one write each way.
//   - appendwire.go and appendwire_gen.go: the append stream's messages,
//     encoded by code tinylib/msgp generates (go generate
//     ./cluster/raftnet regenerates appendwire_gen.go).
//   - snapshotthrottle.go: SnapshotThrottle, the node's bound on the
//     bytes a second its shards send of snapshots
//     (leader.replication.throttled.rate), which every shard's
//     InstallSnapshot reads through.
//   - match.go: matchTracker, the highest index each follower acknowledged
//     to a shard's leader (placement's catch-up check, RaftStats).
//   - pausewatch.go: the process's pause watch (PausedRecently): after a
//     SIGSTOP or a frozen VM, answers buffered during the pause must not
//     confirm a leadership.
//   - peerdeath.go: PeerDeaths: a Raft connection the peer ended is
//     followed by a probe dial; a refusal proves the process gone, the
//     death is re-probed every 500 ms and cleared by any new connection.
//   - faults.go: Faults, drop and delay hooks in the Mux for in-process
//     cluster tests and the chaos suite.
//   - errors.go: the package's sentinel errors.
//   - doc.go: this overview.
//
// # Wire formats
//
// Every format here is on the wire between nodes of different releases
// during a rolling upgrade, and none may change: the stream header
// (mux.go), the stream ids (streams.go), the beat hub's msgpack frames and
// replies (beathub.go) and the append stream's messages (appendwire.go).
// A peer of an older release that lacks a stream closes its connections,
// and the hubs then fall back to each shard's own stream.
//
// # Heartbeat thinning
//
// A shard's Transport (heartbeats.go) thins its leader's heartbeats and
// idle replication probes. hashicorp/raft's heartbeat goroutine uses an answer for two
// things only: it refreshes the follower's last contact (the leader lease
// counts it) and counts towards VerifyLeader rounds; it ignores the
// answer's term. So when the follower's Raft answered a frame of coalesced
// heartbeats (beatHub) with a success, in the same term, for a frame sent
// less than reuse ago, the transport answers the next heartbeat with it at
// once. A heartbeat that finds no such answer goes out in the next frame
// to that peer, or one by one when frames cannot carry it. Only a frame's
// answer is reused for a heartbeat: frames go every beatTick whatever
// raft's heartbeats do, so reusing one never leaves the follower unheard
// for longer than that. A shard that frames leave out (a fault, a failed
// frame, a peer without a beat stream) sends each of raft's heartbeats,
// and its follower hears at raft's own pace (cluster.Shard.paceHeartbeats: at
// most a fifth of HeartbeatTimeout apart).
//
// A probe is what raft's replication goroutine sends a follower every
// CommitTimeout when no entry came: no entries, the last log position and
// the commit index, so the follower learns that index. When the follower
// already took the same probe (same term, position and commit index) and
// answered something real (a frame included) less than reuse ago, the
// probe tells it nothing new, and its last answer answers it, for up to
// probeReuseFor.
//
// ## What thinning must not weaken
//
//   - Leadership confirmations (cluster.Shard.confirmRound, which brackets
//     itself with Transport.BeginConfirm and EndConfirm): while one is in
//     progress (confirming > 0) every heartbeat is sent. An answer reused
//     just before a round began may still be counted by it, as raft counts
//     a real answer to a heartbeat sent before the round: the answer is at
//     most reuse old (from the time its request was sent), and a follower
//     that answered the leader does not vote for another candidate
//     (hashicorp/raft's leader stickiness) until its heartbeat timeout,
//     longer than reuse, has passed. An answer from a frame of the
//     beatHub is one to a heartbeat sent at most half a heartbeat timeout
//     before, like an answer to a slow RPC, and a heartbeat whose frame
//     came back after a round began is sent again one by one.
//     Stickiness does not hold for a vote in a leadership transfer, so nothing is reused from the moment this
//     leader starts one until a heartbeat timeout after it ended
//     (Transport.Transferring): by then it has stepped down, or it has heard
//     from every follower since.
//   - Pauses: after this process was paused (pauseWatch) nothing is
//     reused, since a stalled monotonic clock makes old answers look
//     young.
//   - The lease: a dead follower's last contact stays fresh up to reuse
//     longer, so a partitioned leader steps down up to that much later
//     (LeaderLeaseTimeout + reuse). Followers elect on their own timeouts,
//     so failover time does not change.
//   - Placement's catch-up check (matchTracker) only counts real answers.
//
// # The pipeline deadlock
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
//
// So a shard's Transport never offers raft's own pipeline
// (unpipelinedTransport), and by default it refuses AppendEntriesPipeline
// altogether: Raft replicates to each follower one RPC at a time, and the
// append hub batches the RPCs of many shards instead.
//
// With TransportConfig.PipelineAppends (cluster.Config.PipelineAppends)
// it offers appendPipeline (pipeline.go), a pipeline on the append hub
// whose hand-offs cannot park for good:
//
//   - at most pipelineMaxInflight (8) requests are sent and not yet taken
//     by Raft; a send that finds them all taken waits at most the
//     transport timeout, by which the oldest was answered or given up, and
//     then fails, and raft's pipelineSend closes the pipeline and
//     replicates one RPC at a time again (replicateTo), as after any
//     failed send;
//   - one goroutine hands the completed futures to Consumer in send order,
//     and every wait of it selects on Close, the transport's closing and
//     the hub's, so Close always returns at once and leaves no goroutine;
//   - the pipeline knows when v1.8.0's pipelineDecode stops reading (it
//     handed Raft a refusal or a newer term): from then on every send
//     fails at once, so the send loop closes the pipeline instead of
//     parking, and the requests still in flight are given up;
//   - a request that failed (a broken connection, a fault, a timeout, the
//     receiver refusing it) completes with its error and ends the
//     pipeline without being handed to Raft, whose pipelineDecode would
//     count it as contact from the follower (the lease);
//   - the receiver hands each request to the shard's Raft on a goroutine
//     of its own, so a pipelined request can overtake the one before it on
//     the follower, which then refuses it for a missing previous entry;
//     such a refusal is sent again once every earlier request was
//     answered (PipelineStats.Resent counts them).
//
// The follower needs no change: it cannot tell a pipelined request from
// one sent alone, so a leader with pipelining on replicates to a follower
// of an older release, one node at a time. The knob stays off unless it
// measures better than one RPC at a time (BenchmarkReplicatePipeline in
// package cluster), and so far it measures worse: on three in-process
// nodes on two cores, loopback round trips are short, and the pipeline
// sent about twice the AppendEntries per commit (raft's send loop sends
// an empty one for each trigger whose entries an earlier send already
// carried) plus the overtaken requests sent again, for 1.25 to 1.6
// times the CPU per commit and no more commits a second. The fix of the
// deadlock itself belongs upstream, in hashicorp/raft (#611, replication
// to a follower stopping, and #612); kcoord keeps v1.8.0 unpatched.
//
// # Goroutines
//
// A Mux runs an accept loop, a goroutine per accepted connection until its
// TLS handshake and header are done, and its PeerDeaths a re-probe loop
// and a goroutine per death probe. The beat hub runs a sender per peer and
// a goroutine per accepted connection; the append hub a writer and a
// reader per peer link, and per accepted connection a reader, a reply
// writer and a goroutine per request being handed to a Raft. The pause
// watch ticks on one goroutine for the life of the process. raft's own
// goroutines call each Transport. Every exported method is safe for
// concurrent use unless its doc says otherwise, and none blocks on a
// peer beyond the transport timeout.
package raftnet
