package raftnet

import (
	"bytes"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// benchAppend is an AppendEntries as a busy leader sends one: 64 entries
// of 120 bytes (offset commits).
func benchAppend() *raft.AppendEntriesRequest {
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("1"), Addr: []byte("127.0.0.1:7000")},
		Term:      7, Leader: []byte("127.0.0.1:7000"), PrevLogEntry: 1000, PrevLogTerm: 7, LeaderCommitIndex: 999,
	}
	for i := range 64 {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(1001 + i), Term: 7, Type: raft.LogCommand, Data: bytes.Repeat([]byte{'x'}, 120)})
	}
	return req
}

// BenchmarkAppendWire encodes and decodes one AppendEntries as the append
// stream does (appendwire.go, code msgp generates).
func BenchmarkAppendWire(b *testing.B) {
	req := benchAppend()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = appendAppendReq(buf[:0], 1, 3, req); err != nil {
			b.Fatal(err)
		}
		if _, _, _, err := decodeAppendReq(buf[4:]); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAppendWireReflection is the same request through the
// reflection codec raft's NetworkTransport encodes its RPCs with, the
// baseline BenchmarkAppendWire is read against.
func BenchmarkAppendWireReflection(b *testing.B) {
	req := benchAppend()
	h := &codec.MsgpackHandle{}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := codec.NewEncoder(&buf, h).Encode(req); err != nil {
			b.Fatal(err)
		}
		var got raft.AppendEntriesRequest
		if err := codec.NewDecoder(&buf, h).Decode(&got); err != nil {
			b.Fatal(err)
		}
	}
}
