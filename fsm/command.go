package fsm

import (
	"encoding/json"
	"fmt"
)

// CommandType tags every Raft log entry kcoord writes. The numbers are part of
// the on-disk format: append new types at the end, never renumber or reuse.
type CommandType uint8

const (
	// GroupPutType stores a group's whole metadata: written when a rebalance
	// completes (before members get their assignment) and when a group
	// becomes Empty.
	GroupPutType CommandType = 1
	// GroupDeleteType removes a group and all of its committed offsets.
	GroupDeleteType CommandType = 2
	// OffsetCommitType stores committed offsets for one group.
	OffsetCommitType CommandType = 3
	// OffsetDeleteType removes committed offsets of one group.
	OffsetDeleteType CommandType = 4
	// TopicCreateType registers a topic in the metadata group.
	TopicCreateType CommandType = 5
	// TopicDeleteType removes a topic from the metadata group.
	TopicDeleteType CommandType = 6
)

// String names the command type for logs.
func (t CommandType) String() string {
	switch t {
	case GroupPutType:
		return "GroupPut"
	case GroupDeleteType:
		return "GroupDelete"
	case OffsetCommitType:
		return "OffsetCommit"
	case OffsetDeleteType:
		return "OffsetDelete"
	case TopicCreateType:
		return "TopicCreate"
	case TopicDeleteType:
		return "TopicDelete"
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// bodyVersion is the version of the body encoding written by this build. A
// reader accepts every version up to it.
const bodyVersion uint8 = 1

// Command is one FSM command body. Every body carries all the inputs its Apply
// needs (times stamped by the leader), so Apply is deterministic.
type Command interface {
	CommandType() CommandType
}

// GroupPut is the body of GroupPutType.
type GroupPut struct {
	Group Group `json:"group"`
}

// GroupDelete is the body of GroupDeleteType.
type GroupDelete struct {
	GroupID string `json:"group_id"`
}

// OffsetCommit is the body of OffsetCommitType. A commit to a group that
// does not exist creates it Empty with no protocol type, as Kafka does for
// simple consumers and admin clients.
type OffsetCommit struct {
	GroupID string `json:"group_id"`
	// Timestamp is the leader's wall clock at commit, in Unix milliseconds.
	Timestamp int64                   `json:"ts"`
	Offsets   []OffsetCommitPartition `json:"offsets"`
}

// OffsetCommitPartition is one partition's committed offset in OffsetCommit.
type OffsetCommitPartition struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
	Offset    Offset `json:"o"`
}

// OffsetDelete is the body of OffsetDeleteType.
type OffsetDelete struct {
	GroupID    string           `json:"group_id"`
	Partitions []TopicPartition `json:"partitions"`
}

// TopicCreate is the body of TopicCreateType.
type TopicCreate struct {
	Topic Topic `json:"topic"`
}

// TopicDelete is the body of TopicDeleteType.
type TopicDelete struct {
	Name string `json:"name"`
}

// CommandType implements Command.
func (GroupPut) CommandType() CommandType { return GroupPutType }

// CommandType implements Command.
func (GroupDelete) CommandType() CommandType { return GroupDeleteType }

// CommandType implements Command.
func (OffsetCommit) CommandType() CommandType { return OffsetCommitType }

// CommandType implements Command.
func (OffsetDelete) CommandType() CommandType { return OffsetDeleteType }

// CommandType implements Command.
func (TopicCreate) CommandType() CommandType { return TopicCreateType }

// CommandType implements Command.
func (TopicDelete) CommandType() CommandType { return TopicDeleteType }

// Encode serializes cmd as a Raft log entry: one type byte, one body version
// byte, then the body.
func Encode(cmd Command) ([]byte, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", cmd.CommandType(), err)
	}
	out := make([]byte, 0, len(body)+2)
	out = append(out, byte(cmd.CommandType()), bodyVersion)
	return append(out, body...), nil
}

// Decode parses a Raft log entry written by Encode.
func Decode(b []byte) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: entry of %d bytes", ErrMalformedCommand, len(b))
	}
	typ, ver, body := CommandType(b[0]), b[1], b[2:]
	if ver == 0 || ver > bodyVersion {
		return nil, fmt.Errorf("%w: %s body version %d", ErrUnknownVersion, typ, ver)
	}
	var cmd Command
	switch typ {
	case GroupPutType:
		cmd = new(GroupPut)
	case GroupDeleteType:
		cmd = new(GroupDelete)
	case OffsetCommitType:
		cmd = new(OffsetCommit)
	case OffsetDeleteType:
		cmd = new(OffsetDelete)
	case TopicCreateType:
		cmd = new(TopicCreate)
	case TopicDeleteType:
		cmd = new(TopicDelete)
	default:
		return nil, fmt.Errorf("%w: %s", ErrUnknownCommand, typ)
	}
	if err := json.Unmarshal(body, cmd); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedCommand, typ, err)
	}
	return cmd, nil
}
