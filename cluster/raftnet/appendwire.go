package raftnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// The messages of the append stream (appendHub): a leader node's
// AppendEntries to one peer, for every shard, and the peer's answers.
// Each message is
//
//	length(4, big-endian: of what follows, at most maxAppendMessage)
//	msgpack body (an appendReq or an appendReply, as arrays)
//	appendReq only: its entries' Data, one after another
//
// The bodies are encoded by code msgp generates (appendwire_gen.go),
// without the reflection raft's NetworkTransport encodes its RPCs with,
// and decoded with every array and byte string bounded (the limit below):
// the entries' data, which may be large, follow the body and are sliced
// out of the message without a copy. The dialer sends appendReqs, the
// acceptor appendReplies; both write whatever is queued in one write(2).
// Regenerate after changing a type here with: go generate ./cluster/raftnet

//go:generate go run github.com/tinylib/msgp@v1.6.5 -file appendwire.go -o appendwire_gen.go -io=false -marshal=true -tests=false -unexported
//msgp:tuple appendReq appendLog appendReply
//msgp:limit arrays:65536

// appendReq is one shard's raft.AppendEntriesRequest, answered by the
// appendReply with its Seq.
type appendReq struct {
	Seq               uint64
	Shard             int32
	ProtocolVersion   int
	ID, Addr          []byte
	Term              uint64
	Leader            []byte
	PrevLogEntry      uint64
	PrevLogTerm       uint64
	LeaderCommitIndex uint64
	Entries           []appendLog
}

// appendLog is a raft.Log, its AppendedAt in Unix nanoseconds and its
// Data, Size bytes, after the message's body.
type appendLog struct {
	Index      uint64
	Term       uint64
	Type       uint8
	Size       uint32
	Extensions []byte
	AppendedAt int64
}

// appendReply answers the request with Seq. Refused means it was not
// handed to a Raft (no replica of the shard here, a fault on the shard's
// traffic, the shard closing): the leader sends it on the shard's own
// stream. Error is the Raft's error answering it. The rest is the
// raft.AppendEntriesResponse.
type appendReply struct {
	Seq            uint64
	Refused        bool
	Error          string
	Term           uint64
	LastLog        uint64
	Success        bool
	NoRetryBackoff bool
}

// appendFieldLimit is the msgp:limit above: the most elements of an array
// and bytes of a byte string a decoder takes. appendAppendReq refuses a
// request that would exceed it (errAppendTooLarge), which then goes on
// its shard's own stream.
const appendFieldLimit = 65536

// maxAppendMessage bounds one message of the append stream, so a reader
// never allocates more for one. An AppendEntries that would not fit goes
// on its shard's own stream (NetworkTransport), which has no such bound.
const maxAppendMessage = 64 << 20

// errAppendTooLarge is an AppendEntries larger than maxAppendMessage.
var errAppendTooLarge = errors.New("cluster: AppendEntries too large for the append stream")

// appendAppendReq appends the message of req, shard's AppendEntries
// numbered seq, to buf. On errAppendTooLarge buf is returned as it was.
func appendAppendReq(buf []byte, seq uint64, shard int32, req *raft.AppendEntriesRequest) ([]byte, error) {
	start := len(buf)
	m := appendReq{
		Seq: seq, Shard: shard,
		ProtocolVersion: int(req.ProtocolVersion), ID: req.ID, Addr: req.Addr,
		Term: req.Term, Leader: req.Leader,
		PrevLogEntry: req.PrevLogEntry, PrevLogTerm: req.PrevLogTerm, LeaderCommitIndex: req.LeaderCommitIndex,
		Entries: make([]appendLog, len(req.Entries)),
	}
	if len(req.ID) > appendFieldLimit || len(req.Addr) > appendFieldLimit || len(req.Leader) > appendFieldLimit || len(req.Entries) > appendFieldLimit {
		return buf, errAppendTooLarge
	}
	data := 0
	for i, e := range req.Entries {
		if len(e.Extensions) > appendFieldLimit {
			return buf, errAppendTooLarge
		}
		m.Entries[i] = appendLog{Index: e.Index, Term: e.Term, Type: uint8(e.Type), Size: uint32(len(e.Data)), Extensions: e.Extensions}
		if !e.AppendedAt.IsZero() {
			m.Entries[i].AppendedAt = e.AppendedAt.UnixNano()
		}
		data += len(e.Data)
	}
	if m.Msgsize()+data > maxAppendMessage {
		return buf, errAppendTooLarge
	}
	buf = append(buf, 0, 0, 0, 0)
	buf, err := m.MarshalMsg(buf)
	if err != nil {
		return buf[:start], err
	}
	for _, e := range req.Entries {
		buf = append(buf, e.Data...)
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(len(buf)-start-4))
	return buf, nil
}

// appendAppendReply appends the message of r to buf.
func appendAppendReply(buf []byte, r *appendReply) []byte {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	buf, _ = r.MarshalMsg(buf) // an appendReply has no field that can fail to encode
	binary.BigEndian.PutUint32(buf[start:], uint32(len(buf)-start-4))
	return buf
}

// readAppendLength reads a message's length. got is how many of its four
// bytes were read, so a caller can tell a stream that ended or timed out
// between messages (got 0) from one cut inside a message.
func readAppendLength(r io.Reader, head []byte) (n uint32, got int, err error) {
	if got, err = io.ReadFull(r, head[:4]); err != nil {
		return 0, got, err
	}
	n = binary.BigEndian.Uint32(head)
	if n > maxAppendMessage {
		return 0, got, fmt.Errorf("cluster: append stream message of %d bytes, over %d", n, maxAppendMessage)
	}
	return n, got, nil
}

// appendReadChunk is how much more of a message readAppendBody allocates
// at a time, so a length a peer claims costs memory only as its bytes
// arrive.
const appendReadChunk = 64 << 10

// readAppendBody reads the n bytes of a message after its length.
func readAppendBody(r io.Reader, n uint32) ([]byte, error) {
	msg := make([]byte, 0, min(int(n), appendReadChunk))
	for len(msg) < int(n) {
		if len(msg) == cap(msg) {
			msg = slices.Grow(msg, min(int(n)-len(msg), max(cap(msg), appendReadChunk)))
		}
		k, err := r.Read(msg[len(msg):min(cap(msg), int(n))])
		msg = msg[:len(msg)+k]
		if err != nil && len(msg) < int(n) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return msg, nil
}

// decodeAppendReq decodes a request message: its sequence number, shard
// and the raft request, whose entries' data are slices of msg.
func decodeAppendReq(msg []byte) (uint64, int32, *raft.AppendEntriesRequest, error) {
	var m appendReq
	rest, err := m.UnmarshalMsg(msg)
	if err != nil {
		return 0, 0, nil, err
	}
	logs := make([]raft.Log, len(m.Entries))
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(m.ProtocolVersion), ID: m.ID, Addr: m.Addr},
		Term:      m.Term, Leader: m.Leader,
		PrevLogEntry: m.PrevLogEntry, PrevLogTerm: m.PrevLogTerm, LeaderCommitIndex: m.LeaderCommitIndex,
	}
	if len(logs) > 0 {
		req.Entries = make([]*raft.Log, len(logs))
	}
	for i, e := range m.Entries {
		if uint64(e.Size) > uint64(len(rest)) {
			return 0, 0, nil, errors.New("cluster: append stream entry data cut short")
		}
		logs[i] = raft.Log{Index: e.Index, Term: e.Term, Type: raft.LogType(e.Type), Data: rest[:e.Size:e.Size], Extensions: e.Extensions}
		if e.AppendedAt != 0 {
			logs[i].AppendedAt = time.Unix(0, e.AppendedAt)
		}
		rest = rest[e.Size:]
		req.Entries[i] = &logs[i]
	}
	if len(rest) != 0 {
		return 0, 0, nil, errors.New("cluster: append stream message has bytes after its entries")
	}
	return m.Seq, m.Shard, req, nil
}

// decodeAppendReply decodes a reply message.
func decodeAppendReply(msg []byte) (appendReply, error) {
	var r appendReply
	rest, err := r.UnmarshalMsg(msg)
	if err == nil && len(rest) != 0 {
		err = errors.New("cluster: append stream reply has trailing bytes")
	}
	return r, err
}
