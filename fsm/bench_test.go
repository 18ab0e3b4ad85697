package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// BenchmarkCommandCodec compares Encode+Decode of typical commands in the
// JSON bodies of version 1 with the msgpack bodies of version 2, by
// go-msgpack's reflection and by Encode and Decode (msgp's generated code
// where a command has it, OffsetCommit), side by side in one run:
// go test ./fsm -run '^$' -bench CommandCodec -benchmem
func BenchmarkCommandCodec(b *testing.B) {
	for _, tc := range []struct {
		name string
		cmd  Command
	}{
		{"OffsetCommit10", benchOffsetCommit(10)},
		{"GroupPut10", benchGroupPut(10)},
	} {
		b.Run(tc.name+"/v1-json", func(b *testing.B) {
			entry, err := encodeV1(tc.cmd)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				entry, err := encodeV1(tc.cmd)
				if err != nil {
					b.Fatal(err)
				}
				cmd, _ := newCommand(CommandType(entry[0]))
				if err := decodeV1Body(entry[2:], cmd); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(entry)), "entry-bytes")
		})
		b.Run(tc.name+"/v2-msgpack-reflection", func(b *testing.B) {
			entry, err := encodeReflect(tc.cmd)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				entry, err := encodeReflect(tc.cmd)
				if err != nil {
					b.Fatal(err)
				}
				cmd, _ := newCommand(CommandType(entry[0]))
				if err := codec.NewDecoderBytes(entry[2:], msgpack).Decode(cmd); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(entry)), "entry-bytes")
		})
		b.Run(tc.name+"/v2-msgpack", func(b *testing.B) {
			entry, err := Encode(tc.cmd)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				entry, err := Encode(tc.cmd)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Decode(entry); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(entry)), "entry-bytes")
		})
	}
}

func benchOffsetCommit(partitions int) *OffsetCommit {
	c := &OffsetCommit{GroupID: "orders-consumer", Timestamp: 1700000000000}
	for p := range partitions {
		c.Offsets = append(c.Offsets, OffsetCommitPartition{Topic: "orders.events", Partition: int32(p), Offset: Offset{
			Offset: 1234567 + int64(p), LeaderEpoch: 5, CommitTimestamp: 1700000000000, ExpireTimestamp: -1,
		}})
	}
	return c
}

func benchGroupPut(members int) *GroupPut {
	g := Group{ID: "orders-consumer", ProtocolType: "consumer", Protocol: "cooperative-sticky", Generation: 12,
		State: StateStable, StateTimestamp: 1700000000000}
	for m := range members {
		id := fmt.Sprintf("kgo-%08x-4b1c-4f6e-9a3d-%012x", m, m*7919)
		if m == 0 {
			g.Leader = id
		}
		// A consumer subscription to one topic and a two-partition
		// assignment, at the sizes clients send.
		g.Members = append(g.Members, Member{
			ID: id, ClientID: "orders-service", ClientHost: fmt.Sprintf("/10.0.%d.%d", m/250, m%250),
			SessionTimeoutMs: 45000, RebalanceTimeoutMs: 60000,
			Protocols: []Protocol{
				{Name: "cooperative-sticky", Metadata: make([]byte, 48)},
				{Name: "range", Metadata: make([]byte, 31)},
			},
			Assignment: make([]byte, 41),
		})
	}
	return &GroupPut{Group: g}
}

// BenchmarkApplyOffsetCommit is a replica's work for one commit of a
// fill: a new group's 10 partitions, from the log entry to the state. Its
// allocations are what the GC of a node filling a million groups marks
// the live state for, cycle after cycle.
//
//	go test ./fsm -run '^$' -bench ApplyOffsetCommit -benchmem
func BenchmarkApplyOffsetCommit(b *testing.B) {
	f := NewShardFSM(0, nil)
	c := benchOffsetCommit(10)
	entries := make([][]byte, 1<<14)
	for i := range entries {
		c.GroupID = fmt.Sprintf("group-%07d", i)
		entry, err := Encode(c)
		if err != nil {
			b.Fatal(err)
		}
		entries[i] = entry
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%len(entries) == 0 {
			f = NewShardFSM(0, nil) // every commit makes its group
		}
		if r := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: entries[i%len(entries)]}); r != nil {
			b.Fatal(r)
		}
		i++
	}
}
