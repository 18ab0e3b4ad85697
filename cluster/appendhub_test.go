package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// appendTotals sums, over nodes, the AppendEntries their hubs had
// answered and those they handed back to the shards' own streams.
func appendTotals(nodes []*testNode) (sent, fellBack uint64) {
	for _, tn := range nodes {
		if tn.appendHub != nil {
			sent += tn.appendHub.sent.Load()
			fellBack += tn.appendHub.fellBack.Load()
		}
	}
	return sent, fellBack
}

// applyEverywhere commits n entries to each shard through its leader and
// waits until every node's replica holds them.
func applyEverywhere(t *testing.T, nodes []*testNode, shards int32, n int, tag string) {
	t.Helper()
	for shard := range shards {
		for i := range n {
			// A leader that steps down (a loaded machine starves its
			// 100 ms lease) is no failure of what the tests check: the
			// entry goes to the next leader.
			for attempt := 1; ; attempt++ {
				leader := nodeByID(nodes, waitShardLeaders(t, nodes, shards)[shard].Node)
				_, err := leader.Shard(shard).Apply(context.Background(), fmt.Appendf(nil, "set %s-%d %d", tag, i, i), 5*time.Second)
				if err == nil {
					break
				}
				if attempt == 3 || !errors.Is(err, raft.ErrLeadershipLost) && !errors.Is(err, raft.ErrNotLeader) {
					t.Fatalf("shard %d: apply %d: %v", shard, i, err)
				}
				t.Logf("shard %d: apply %d: %v; again on the shard's leader", shard, i, err)
			}
		}
	}
	for _, tn := range nodes {
		for shard := range shards {
			eventually(t, 10*time.Second, fmt.Sprintf("node %d shard %d holds %s", tn.ID(), shard, tag), func() bool {
				v, ok := tn.fsm(shard).get(fmt.Sprintf("%s-%d", tag, n-1))
				return ok && v == fmt.Sprint(n-1)
			})
		}
	}
}

// Replication goes through the append hub: every replica gets every
// entry, and the leaders' hubs answered the AppendEntries without handing
// any back to a shard's own stream.
func TestAppendHubCarriesReplication(t *testing.T) {
	const shards = 4
	nodes := startTestCluster(t, 3, shards)
	sent0, back0 := appendTotals(nodes)
	applyEverywhere(t, nodes, shards, 20, "hub")
	sent, back := appendTotals(nodes)
	t.Logf("%d AppendEntries through the hubs, %d handed back", sent-sent0, back-back0)
	// Each entry is applied after the one before committed, so a request
	// carried it to at least the follower that made the quorum: 4 shards
	// × 20 entries. (The other follower may get two at once when it lags:
	// a loaded CI machine sent 154, not the 160 of one each.)
	if sent-sent0 < shards*20 {
		t.Fatalf("%d AppendEntries through the hubs, want at least %d", sent-sent0, shards*20)
	}
	if back != back0 {
		t.Fatalf("%d AppendEntries handed back to the shards' own streams, in a cluster without faults", back-back0)
	}
}

// A node with separate append streams (a kcoord that predates the hub,
// or SeparateAppendStreams) has no append stream: its peers' hubs fail to
// reach it and their shards replicate to it on their own streams, while
// the other two nodes keep using their hubs with each other.
func TestAppendHubFallsBackForAPeerWithoutOne(t *testing.T) {
	const shards = 4
	id := int32(0)
	nodes := startTestCluster(t, 3, shards, func(c *Config) {
		id++
		if id == 3 {
			c.SeparateAppendStreams = true
		}
	})
	if nodes[2].appendHub != nil {
		t.Fatal("node 3 has an append hub with SeparateAppendStreams")
	}
	applyEverywhere(t, nodes, shards, 20, "mixed")
	sent, back := appendTotals(nodes[:2])
	if sent == 0 || back == 0 {
		t.Fatalf("nodes 1 and 2: %d AppendEntries through their hubs, %d handed back; want both", sent, back)
	}
}

// A fault on one shard's traffic keeps that shard's AppendEntries off the
// hub, so the fault applies as on the shard's own stream: a follower
// whose inbound traffic for the shard is dropped stops getting its
// entries, while its other shards keep replicating through the hub.
func TestAppendHubLeavesAShardWithAFaultOut(t *testing.T) {
	const shards = 2
	nodes := startTestCluster(t, 3, shards)
	leaders := waitShardLeaders(t, nodes, shards)
	const victim int32 = 0
	follower := followersOf(nodes, leaders[victim].Node)[0]
	heal := follower.Faults().Add(Fault{Shards: []int32{victim}, Dir: DirInbound, Drop: true})
	leader := nodeByID(nodes, leaders[victim].Node)
	if _, err := leader.Shard(victim).Apply(context.Background(), []byte("set cut 1"), 5*time.Second); err != nil {
		t.Fatal(err) // the third node makes the quorum
	}
	time.Sleep(300 * time.Millisecond)
	if _, ok := follower.fsm(victim).get("cut"); ok {
		t.Fatalf("node %d applied an entry of shard %d while its inbound traffic for it was dropped", follower.ID(), victim)
	}
	heal()
	eventually(t, 10*time.Second, "the follower catches up once healed", func() bool {
		_, ok := follower.fsm(victim).get("cut")
		return ok
	})
}

// The wire format: a request's header and entries, data of any size,
// survive encoding; appendReplies too.
func TestAppendWireRoundTrip(t *testing.T) {
	at := time.Unix(1_700_000_000, 123456789)
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("1"), Addr: []byte("127.0.0.1:7000")},
		Term:              7,
		Leader:            []byte("127.0.0.1:7000"),
		PrevLogEntry:      41,
		PrevLogTerm:       6,
		LeaderCommitIndex: 40,
		Entries: []*raft.Log{
			{Index: 42, Term: 7, Type: raft.LogCommand, Data: []byte("set a b"), AppendedAt: at},
			{Index: 43, Term: 7, Type: raft.LogNoop},
			{Index: 44, Term: 7, Type: raft.LogCommand, Data: bytes.Repeat([]byte{0xab}, 200<<10), Extensions: []byte("ext")},
		},
	}
	buf, err := appendAppendReq([]byte("prefix"), 99, 5, req)
	if err != nil {
		t.Fatal(err)
	}
	msg := buf[len("prefix"):]
	if n := binary.BigEndian.Uint32(msg); int(n) != len(msg)-4 {
		t.Fatalf("length %d, message %d bytes", n, len(msg)-4)
	}
	seq, shard, got, err := decodeAppendReq(msg[4:])
	if err != nil {
		t.Fatal(err)
	}
	if seq != 99 || shard != 5 {
		t.Fatalf("seq %d shard %d, want 99 and 5", seq, shard)
	}
	if got.Term != 7 || got.PrevLogEntry != 41 || got.PrevLogTerm != 6 || got.LeaderCommitIndex != 40 ||
		string(got.ID) != "1" || string(got.Addr) != "127.0.0.1:7000" || string(got.Leader) != "127.0.0.1:7000" ||
		got.ProtocolVersion != raft.ProtocolVersionMax || len(got.Entries) != 3 {
		t.Fatalf("decoded %+v", got)
	}
	for i, e := range req.Entries {
		g := got.Entries[i]
		if g.Index != e.Index || g.Term != e.Term || g.Type != e.Type || !bytes.Equal(g.Data, e.Data) ||
			!bytes.Equal(g.Extensions, e.Extensions) || !g.AppendedAt.Equal(e.AppendedAt) {
			t.Fatalf("entry %d: %+v, want %+v", i, g, e)
		}
	}

	reply := appendReply{Seq: 99, Term: 7, LastLog: 44, Success: true, NoRetryBackoff: true, Error: "x"}
	rb := appendAppendReply(nil, &reply)
	r, err := decodeAppendReply(rb[4:])
	if err != nil || r != reply {
		t.Fatalf("reply %+v, %v; want %+v", r, err, reply)
	}
}

// A request that does not decode whole is an error, never a panic or a
// raft request with part of its data: cut short, with bytes after its
// entries, or claiming more entry data than it holds.
func TestAppendWireRejectsDamagedRequests(t *testing.T) {
	req := &raft.AppendEntriesRequest{Term: 1, Entries: []*raft.Log{{Index: 1, Term: 1, Data: []byte("hello")}}}
	buf, err := appendAppendReq(nil, 1, 0, req)
	if err != nil {
		t.Fatal(err)
	}
	msg := buf[4:]
	for name, bad := range map[string][]byte{
		"cut short":          msg[:len(msg)-1],
		"a byte after":       append(append([]byte{}, msg...), 0),
		"only its body":      msg[:len(msg)-len("hello")],
		"nothing":            {},
		"not msgpack at all": []byte("\xc1\xc1\xc1"),
	} {
		if _, _, r, err := decodeAppendReq(bad); err == nil {
			t.Errorf("%s: decoded %+v", name, r)
		}
	}
}

// FuzzDecodeAppendReq: whatever a peer sends, decoding returns an error
// or a request whose entries' data lie within the message.
func FuzzDecodeAppendReq(f *testing.F) {
	req := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 9, Entries: []*raft.Log{{Index: 10, Term: 3, Data: []byte("abc")}, {Index: 11, Term: 3}}}
	buf, _ := appendAppendReq(nil, 7, 2, req)
	f.Add(buf[4:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, _, r, err := decodeAppendReq(msg)
		if err != nil {
			return
		}
		total := 0
		for _, e := range r.Entries {
			total += len(e.Data)
		}
		if total > len(msg) {
			t.Fatalf("entries hold %d bytes of data from a %d-byte message", total, len(msg))
		}
	})
}

// A peer whose answers stall past the transport timeout fails the
// requests waiting on it, as a NetworkTransport RPC would, instead of
// holding the shards' replication for good: the shard still commits
// through its other follower, and the stalled one catches up once its
// answers flow again.
func TestAppendHubTimesOutAPeerThatDoesNotAnswer(t *testing.T) {
	const shards = 1
	nodes := startTestCluster(t, 3, shards)
	leaders := waitShardLeaders(t, nodes, shards)
	leader := nodeByID(nodes, leaders[0].Node)
	slow := followersOf(nodes, leader.ID())[0]
	// The slow follower's answers on the append stream wait 3 s each,
	// over the 2 s transport timeout of startTestCluster.
	heal := slow.Faults().Add(Fault{Shards: []int32{appendShard}, Dir: DirInbound, Delay: 3 * time.Second})
	for i := range 5 {
		if _, err := leader.Shard(0).Apply(context.Background(), fmt.Appendf(nil, "set slow-%d %d", i, i), 5*time.Second); err != nil {
			t.Fatalf("apply %d with one follower stalled: %v", i, err)
		}
	}
	eventually(t, 10*time.Second, "a timed-out AppendEntries", func() bool { return leader.appendHub.timedOut.Load() > 0 })
	heal()
	eventually(t, 20*time.Second, "the stalled follower catches up", func() bool {
		v, ok := slow.fsm(0).get("slow-4")
		return ok && v == "4"
	})
}

// A shard leader that shuts down while its AppendEntries wait on a
// follower that does not answer does not wait out the transport timeout
// for them: closing the shard's transport fails them at once, as closing
// a NetworkTransport does.
func TestAppendHubShutdownDoesNotWaitForAStalledFollower(t *testing.T) {
	const shards = 1
	nodes := startTestCluster(t, 3, shards, func(c *Config) { c.TransportTimeout = time.Minute })
	leaders := waitShardLeaders(t, nodes, shards)
	leader := nodeByID(nodes, leaders[0].Node)
	slow := followersOf(nodes, leader.ID())[0]
	// Its answers wait 8 s (the test's cleanup waits for that sleep).
	slow.Faults().Add(Fault{Shards: []int32{appendShard}, Dir: DirInbound, Delay: 8 * time.Second})
	if _, err := leader.Shard(0).Apply(context.Background(), []byte("set a 1"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- leader.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the leader's Shutdown still waits on an AppendEntries to a follower that has not answered, 5 s on (its answer comes at 8 s, the transport timeout is 1 min)")
	}
}

// A delay on all of a follower's Raft traffic applies to the append
// stream itself, so the hub carries the shards' requests through it (each
// delayed once) instead of refusing them into the shards' own streams,
// where they would be delayed a second time.
func TestAppendHubCarriesThroughAFaultOnEveryShard(t *testing.T) {
	const shards = 2
	nodes := startTestCluster(t, 3, shards)
	waitShardLeaders(t, nodes, shards)
	for _, tn := range nodes {
		tn.Faults().Delay(20 * time.Millisecond)
	}
	_, back0 := appendTotals(nodes)
	applyEverywhere(t, nodes, shards, 5, "delayed")
	if _, back := appendTotals(nodes); back != back0 {
		t.Fatalf("%d AppendEntries handed back to the shards' own streams under a delay on every shard", back-back0)
	}
}

// A request that times out alone leaves the link up: once it is
// forgotten nothing is pending, so the link's own read deadline, which
// comes later, does not break the connection (and pause the hub for
// every shard) when it fires.
func TestAppendHubKeepsTheLinkAfterALoneTimeout(t *testing.T) {
	h := &appendHub{timeout: 50 * time.Millisecond, backoff: time.Second, logger: testLogger(t), hubTable: newHubTable[appendMember, appendPeer]()}
	p := &appendPeer{hub: h, pending: make(map[uint64]*appendCall)}
	leader, follower := net.Pipe()
	defer follower.Close()
	go func() { _, _ = io.Copy(io.Discard, follower) }() // a follower that never answers
	p.conn = leader
	h.wg.Add(1)
	go p.read(leader)
	c := &appendCall{seq: 1, req: &raft.AppendEntriesRequest{Term: 1}, done: make(chan struct{})}
	p.pending[c.seq] = c
	buf, err := appendAppendReq(nil, c.seq, 0, c.req)
	if err != nil {
		t.Fatal(err)
	}
	if !p.write(leader, buf) {
		t.Fatal("the write failed")
	}
	if !p.forget(c) { // what append does when the request's own timer fires
		t.Fatal("the request was not pending")
	}
	time.Sleep(4 * h.replyDue())
	if n := h.broken.Load(); n != 0 {
		t.Fatalf("the link broke %d time(s) with nothing pending", n)
	}
	p.mu.Lock()
	up := p.conn == leader
	p.mu.Unlock()
	if !up {
		t.Fatal("the link dropped its connection with nothing pending")
	}
	_ = leader.Close()
	h.wg.Wait()
}

// A message's buffer grows with the bytes that arrive, not with the
// length a peer claims: a 64 MiB claim followed by ten bytes allocates
// far less than that.
func TestAppendBodyAllocatesAsBytesArrive(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readAppendBody(bytes.NewReader(make([]byte, 10)), maxAppendMessage)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a message cut short read whole")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("reading 10 bytes of a claimed %d-byte message allocated %d bytes", maxAppendMessage, got)
	}
	msg, err := readAppendBody(bytes.NewReader(bytes.Repeat([]byte{7}, 300<<10)), 300<<10)
	if err != nil || len(msg) != 300<<10 || msg[len(msg)-1] != 7 {
		t.Fatalf("a 300 KiB message: %d bytes, %v", len(msg), err)
	}
}

// A request with a field over the decoders' bound is refused when it is
// encoded (and goes on its shard's own stream), rather than sent to break
// the peer's decoding of the whole connection.
func TestAppendWireRefusesFieldsOverTheBound(t *testing.T) {
	big := make([]byte, appendFieldLimit+1)
	for name, req := range map[string]*raft.AppendEntriesRequest{
		"extensions": {Term: 1, Entries: []*raft.Log{{Index: 1, Term: 1, Extensions: big}}},
		"leader":     {Term: 1, Leader: big},
	} {
		if buf, err := appendAppendReq([]byte("x"), 1, 0, req); !errors.Is(err, errAppendTooLarge) || string(buf) != "x" {
			t.Errorf("%s over the bound: %d bytes, %v; want errAppendTooLarge and nothing appended", name, len(buf), err)
		}
	}
	ok := &raft.AppendEntriesRequest{Term: 1, Entries: []*raft.Log{{Index: 1, Term: 1, Extensions: big[:appendFieldLimit]}}}
	buf, err := appendAppendReq(nil, 1, 0, ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, got, err := decodeAppendReq(buf[4:]); err != nil || len(got.Entries[0].Extensions) != appendFieldLimit {
		t.Fatalf("at the bound: %v", err)
	}
}
