package raftnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

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
