package fsm

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/tinylib/msgp/msgp"
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
	// ClusterIDType stamps the id of the cluster a shard or the metadata
	// group belongs to. Both ShardFSM and MetaFSM apply it.
	ClusterIDType CommandType = 7
	// NodeRegisterType registers a node for placement in the metadata group.
	NodeRegisterType CommandType = 8
	// NodeDrainType marks a node draining: its replicas move away.
	NodeDrainType CommandType = 9
	// PlacementSetType sets the desired voters of shards.
	PlacementSetType CommandType = 10
	// ConsumerGroupWriteType changes a consumer-protocol group (KIP-848):
	// its epochs and its members' subscriptions, targets and
	// reconciliation.
	ConsumerGroupWriteType CommandType = 11
	// ScramCredentialSetType creates or replaces one user's SCRAM
	// credential for one mechanism in the metadata group.
	ScramCredentialSetType CommandType = 12
	// ScramCredentialDeleteType removes one user's SCRAM credential for
	// one mechanism from the metadata group.
	ScramCredentialDeleteType CommandType = 13
	// ACLCreateType adds Kafka ACLs to the metadata group.
	ACLCreateType CommandType = 14
	// ACLDeleteType removes Kafka ACLs from the metadata group.
	ACLDeleteType CommandType = 15
	// FeatureLevelSetType finalizes a feature level (release.Feature): in
	// the metadata group, where the cluster's finalized level lives, and
	// as a stamp in each group shard once the level is finalized. Written
	// from release.Level2 on (see CommandType.Level).
	FeatureLevelSetType CommandType = 16

	// LatestCommandType is the highest command type this build applies.
	// Nodes gossip it, so that a metadata leader writes a type only once
	// every replica of the metadata group can apply it: a replica of an
	// older release panics on a type it does not know (see
	// cluster.ErrReplicaTooOld).
	LatestCommandType = FeatureLevelSetType
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
	case ClusterIDType:
		return "ClusterID"
	case NodeRegisterType:
		return "NodeRegister"
	case NodeDrainType:
		return "NodeDrain"
	case PlacementSetType:
		return "PlacementSet"
	case ConsumerGroupWriteType:
		return "ConsumerGroupWrite"
	case ScramCredentialSetType:
		return "ScramCredentialSet"
	case ScramCredentialDeleteType:
		return "ScramCredentialDelete"
	case ACLCreateType:
		return "ACLCreate"
	case ACLDeleteType:
		return "ACLDelete"
	case FeatureLevelSetType:
		return "FeatureLevelSet"
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// Body versions: the encoding of an entry's body, its second byte.
const (
	// bodyVersionJSON is JSON (the json tags), written by releases before
	// msgpack and still read. It has no body for ClusterIDType.
	bodyVersionJSON uint8 = 1
	// bodyVersionMsgpack is msgpack (the codec tags; see codec.go).
	bodyVersionMsgpack uint8 = 2
	// bodyVersion is the version this build writes; Decode reads every
	// version up to it.
	bodyVersion = bodyVersionMsgpack
)

// Command is one FSM command body. Every body carries all the inputs its Apply
// needs (times stamped by the leader), so Apply is deterministic.
type Command interface {
	CommandType() CommandType
}

// GroupPut is the body of GroupPutType.
type GroupPut struct {
	Group Group `json:"group" codec:"group"`
	// Downgrade replaces a consumer group of the id even with members:
	// the online downgrade, whose group holds every member that remained.
	// It was computed at the consumer group's write ConsumerAfter (see
	// ConsumerGroupWrite.After), and is refused with
	// ErrStaleConsumerGroupWrite at any other.
	Downgrade     bool   `json:"downgrade,omitempty" codec:"downgrade,omitempty"`
	ConsumerAfter uint64 `json:"consumer_after,omitempty" codec:"consumer_after,omitempty"`
}

// GroupDelete is the body of GroupDeleteType.
type GroupDelete struct {
	GroupID string `json:"group_id" codec:"group_id"`
}

// OffsetDelete is the body of OffsetDeleteType.
type OffsetDelete struct {
	GroupID    string           `json:"group_id" codec:"group_id"`
	Partitions []TopicPartition `json:"partitions" codec:"partitions"`
}

// TopicCreate is the body of TopicCreateType.
type TopicCreate struct {
	Topic Topic `json:"topic" codec:"topic"`
}

// TopicDelete is the body of TopicDeleteType.
type TopicDelete struct {
	Name string `json:"name" codec:"name"`
}

// ClusterStamp is the body of ClusterIDType: the id of the cluster whose
// bootstrap created this Raft group. The first stamp an FSM applies sets its
// cluster id; a later stamp with the same id changes nothing, and one with
// another id is answered ErrClusterIDMismatch (and changes nothing). An
// empty ID stamps nothing on an FSM without a cluster id and mismatches one
// with a cluster id.
type ClusterStamp struct {
	ID string `codec:"id"`
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

// CommandType implements Command.
func (ClusterStamp) CommandType() CommandType { return ClusterIDType }

// stampClusterID applies c to an FSM's cluster id (both FSMs hold one)
// and returns Apply's response.
func stampClusterID(clusterID *string, c *ClusterStamp) any {
	switch *clusterID {
	case c.ID:
		return nil
	case "":
		*clusterID = c.ID
		return nil
	}
	return ErrClusterIDMismatch
}

// Encode serializes cmd as a Raft log entry: one type byte, one body version
// byte (bodyVersion), then the msgpack body. Equal commands encode to equal
// bytes. A command with msgp's generated code (offsetcommit.go) is encoded
// by it, the others by go-msgpack's reflection; the format is the same.
// Safe for concurrent use.
func Encode(cmd Command) ([]byte, error) {
	if m, ok := cmd.(msgp.Marshaler); ok {
		size := 64
		if s, ok := cmd.(msgp.Sizer); ok {
			size = s.Msgsize()
		}
		entry := make([]byte, 2, 2+size)
		entry[0], entry[1] = byte(cmd.CommandType()), bodyVersion
		entry, err := m.MarshalMsg(entry)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", cmd.CommandType(), err)
		}
		return entry, nil
	}
	return encodeReflect(cmd)
}

// encodeReflect is Encode through go-msgpack's reflection.
func encodeReflect(cmd Command) ([]byte, error) {
	buf := encodeBufs.Get().(*[]byte)
	defer putEncodeBuf(buf)
	body := (*buf)[:0]
	if err := codec.NewEncoderBytes(&body, msgpack).Encode(cmd); err != nil {
		return nil, fmt.Errorf("encode %s: %w", cmd.CommandType(), err)
	}
	*buf = body
	entry := make([]byte, 2+len(body))
	entry[0], entry[1] = byte(cmd.CommandType()), bodyVersion
	copy(entry[2:], body)
	return entry, nil
}

// encodeBufs holds scratch buffers for Encode, so an entry is allocated
// once at its final size instead of growing.
var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func putEncodeBuf(b *[]byte) {
	if cap(*b) <= 64<<10 { // big entries are rare: let them go
		encodeBufs.Put(b)
	}
}

// Decode parses a Raft log entry written by Encode, or by a release that
// wrote JSON bodies (version 1).
func Decode(b []byte) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: entry of %d bytes", ErrMalformedCommand, len(b))
	}
	typ, ver, body := CommandType(b[0]), b[1], b[2:]
	if ver == 0 || ver > bodyVersion {
		return nil, fmt.Errorf("%w: %s body version %d", ErrUnknownVersion, typ, ver)
	}
	cmd, err := newCommand(typ)
	if err != nil {
		return nil, err
	}
	switch ver {
	case bodyVersionJSON:
		if typ > TopicDeleteType {
			return nil, fmt.Errorf("%w: %s has no body version %d", ErrMalformedCommand, typ, ver)
		}
		err = json.Unmarshal(body, cmd)
	default:
		err = decodeBody(body, cmd)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedCommand, typ, err)
	}
	return cmd, nil
}

// decodeBody decodes a msgpack body into cmd: with msgp's generated code
// where cmd has it, else with go-msgpack's reflection. Either way every
// byte must belong to the body.
func decodeBody(body []byte, cmd Command) error {
	if u, ok := cmd.(msgp.Unmarshaler); ok {
		rest, err := u.UnmarshalMsg(body)
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%d bytes after the body", len(rest))
		}
		return err
	}
	d := codec.NewDecoderBytes(body, msgpack)
	err := d.Decode(cmd)
	if err == nil && d.NumBytesRead() != len(body) {
		err = fmt.Errorf("%d bytes after the body", len(body)-d.NumBytesRead())
	}
	return err
}

// newCommand returns a new, empty body of typ.
func newCommand(typ CommandType) (Command, error) {
	switch typ {
	case GroupPutType:
		return new(GroupPut), nil
	case GroupDeleteType:
		return new(GroupDelete), nil
	case OffsetCommitType:
		return new(OffsetCommit), nil
	case OffsetDeleteType:
		return new(OffsetDelete), nil
	case TopicCreateType:
		return new(TopicCreate), nil
	case TopicDeleteType:
		return new(TopicDelete), nil
	case ClusterIDType:
		return new(ClusterStamp), nil
	case NodeRegisterType:
		return new(NodeRegister), nil
	case NodeDrainType:
		return new(NodeDrain), nil
	case PlacementSetType:
		return new(PlacementSet), nil
	case ConsumerGroupWriteType:
		return new(ConsumerGroupWrite), nil
	case ScramCredentialSetType:
		return new(ScramCredentialSet), nil
	case ScramCredentialDeleteType:
		return new(ScramCredentialDelete), nil
	case ACLCreateType:
		return new(ACLCreate), nil
	case ACLDeleteType:
		return new(ACLDelete), nil
	case FeatureLevelSetType:
		return new(FeatureLevelSet), nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownCommand, typ)
}
