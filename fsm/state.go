package fsm

// The types here are stored in log entries and snapshots. Their codec tags
// name the fields of the msgpack format (body and snapshot version 2), their
// json tags those of the JSON format (version 1, still read). Both are
// on-disk formats: never rename or reuse a name; add fields with new names.

// Group state names as persisted. Only states a group can rest in are
// stored: a rebalance in progress is the leader's memory, and a group that
// failed over mid-rebalance comes back in its last stored state.
const (
	StateEmpty  = "Empty"
	StateStable = "Stable"
)

// Group is a group's durable metadata, as Kafka's GroupMetadataValue record.
type Group struct {
	ID           string `json:"id" codec:"id"`
	ProtocolType string `json:"protocol_type,omitempty" codec:"protocol_type,omitempty"`
	// Protocol is the protocol (assignor) chosen by the member vote; empty
	// when the group has no members.
	Protocol   string `json:"protocol,omitempty" codec:"protocol,omitempty"`
	Generation int32  `json:"generation" codec:"generation"`
	Leader     string `json:"leader,omitempty" codec:"leader,omitempty"`
	State      string `json:"state" codec:"state"`
	// StateTimestamp is when the group entered State, in Unix milliseconds
	// (Kafka's currentStateTimestamp; offset retention counts from it).
	StateTimestamp int64    `json:"state_ts" codec:"state_ts"`
	Members        []Member `json:"members,omitempty" codec:"members,omitempty"`
}

// Member is one member of a stored group.
type Member struct {
	ID         string `json:"id" codec:"id"`
	InstanceID string `json:"instance_id,omitempty" codec:"instance_id,omitempty"`
	ClientID   string `json:"client_id" codec:"client_id"`
	ClientHost string `json:"client_host" codec:"client_host"`
	// SessionTimeoutMs and RebalanceTimeoutMs are in milliseconds.
	SessionTimeoutMs   int32      `json:"session_timeout_ms" codec:"session_timeout_ms"`
	RebalanceTimeoutMs int32      `json:"rebalance_timeout_ms" codec:"rebalance_timeout_ms"`
	Protocols          []Protocol `json:"protocols" codec:"protocols"`
	Assignment         []byte     `json:"assignment,omitempty" codec:"assignment,omitempty"`
}

// Protocol is one protocol a member supports, with its metadata
// (subscription).
type Protocol struct {
	Name     string `json:"name" codec:"name"`
	Metadata []byte `json:"metadata,omitempty" codec:"metadata,omitempty"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"t" codec:"t"`
	Partition int32  `json:"p" codec:"p"`
}

// Topic is a topic in the metadata group's registry.
type Topic struct {
	Name              string   `json:"name" codec:"name"`
	ID                [16]byte `json:"id" codec:"id"`
	Partitions        int32    `json:"partitions" codec:"partitions"`
	ReplicationFactor int16    `json:"replication_factor" codec:"replication_factor"`
	// Configs are the topic configs given at creation.
	Configs map[string]string `json:"configs,omitempty" codec:"configs,omitempty"`
}

// Empty reports whether the group has no members.
func (g *Group) Empty() bool { return len(g.Members) == 0 }
