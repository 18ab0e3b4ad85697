package fsm

// The OffsetCommit command and the committed offset it stores: the one
// command of the hot path (every OffsetCommit is one, and every replica
// decodes it), so its msgpack body is encoded and decoded by code msgp
// generates (offsetcommit_gen.go) instead of go-msgpack's reflection. It
// writes the same msgpack map of the same codec names and value encodings,
// keys in declaration order where go-msgpack sorts them, so either codec
// reads what the other wrote (TestGeneratedCodecMatchesGoMsgpack).
// Regenerate after changing a type here with: go generate ./fsm

//go:generate go run github.com/tinylib/msgp@v1.6.5 -file offsetcommit.go -o offsetcommit_gen.go -io=false -tests=false
//msgp:tag codec

// OffsetCommit is the body of OffsetCommitType. A commit to a group that
// does not exist creates it Empty with no protocol type, as Kafka does for
// simple consumers and admin clients.
type OffsetCommit struct {
	GroupID string `json:"group_id" codec:"group_id"`
	// Timestamp is the leader's wall clock at commit, in Unix milliseconds.
	Timestamp int64                   `json:"ts" codec:"ts"`
	Offsets   []OffsetCommitPartition `json:"offsets" codec:"offsets,allownil"`
}

// OffsetCommitPartition is one partition's committed offset in OffsetCommit.
type OffsetCommitPartition struct {
	Topic     string `json:"t" codec:"t"`
	Partition int32  `json:"p" codec:"p"`
	Offset    Offset `json:"o" codec:"o"`
}

// Offset is one committed offset, as Kafka's OffsetCommitValue record.
type Offset struct {
	Offset      int64  `json:"offset" codec:"offset"`
	LeaderEpoch int32  `json:"leader_epoch" codec:"leader_epoch"`
	Metadata    string `json:"metadata,omitempty" codec:"metadata,omitempty"`
	// CommitTimestamp is when the leader accepted the commit, Unix ms.
	CommitTimestamp int64 `json:"commit_ts" codec:"commit_ts"`
	// ExpireTimestamp is an explicit expiry from OffsetCommit v1–v4's
	// retention time, Unix ms; -1 when retention follows the group.
	ExpireTimestamp int64 `json:"expire_ts" codec:"expire_ts"`
}
