// Package offsets owns committed offsets: validating what a commit may
// store, computing expiry, and reading offsets back for OffsetFetch. The
// group coordinator decides whether a member may commit; this package
// decides what a commit contains.
package offsets

import (
	"github.com/kcoord/kcoord/fsm"
)

// NoExpiry marks an offset whose retention follows its group (KIP-211).
const NoExpiry int64 = -1

// Partition is one partition of an OffsetCommit as the client sent it.
type Partition struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
	// Timestamp is OffsetCommit v1's per-partition commit time, Unix ms; -1
	// when not given.
	Timestamp int64
}

// Validate checks one partition against offset.metadata.max.bytes and basic
// sanity; nil means it can be stored.
func Validate(p Partition, maxMetadataBytes int32) error {
	switch {
	case p.Topic == "":
		return ErrInvalidTopic
	case p.Partition < 0:
		return ErrInvalidPartition
	case p.Metadata != nil && javaLength(*p.Metadata) > int(maxMetadataBytes):
		return ErrMetadataTooLarge
	}
	return nil
}

// javaLength is Java's String.length() of s: UTF-16 code units, which is
// what Kafka compares with offset.metadata.max.bytes despite its name.
func javaLength(s string) int {
	n := 0
	for _, r := range s {
		if r > 0xFFFF {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// Record converts a validated partition for storage. now is the leader's
// clock (Unix ms); retentionMs is OffsetCommit v2–v4's RetentionTimeMillis
// (-1: the group's retention). An explicit v1 timestamp sets the commit
// time and, as in Kafka, an expiry of that time plus the default retention.
func Record(p Partition, now, retentionMs, defaultRetentionMs int64) fsm.OffsetCommitPartition {
	o := fsm.Offset{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, CommitTimestamp: now, ExpireTimestamp: NoExpiry}
	if p.Metadata != nil {
		o.Metadata = *p.Metadata
	}
	switch {
	case retentionMs >= 0:
		o.ExpireTimestamp = now + retentionMs
	case p.Timestamp >= 0:
		o.CommitTimestamp = p.Timestamp
		o.ExpireTimestamp = p.Timestamp + defaultRetentionMs
	}
	return fsm.OffsetCommitPartition{Topic: p.Topic, Partition: p.Partition, Offset: o}
}
