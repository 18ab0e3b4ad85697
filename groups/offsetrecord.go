package groups

import (
	"github.com/kcoord/kcoord/fsm"
)

// This file is what an OffsetCommit may store (offset.metadata.max.bytes
// and basic sanity) and how a partition the client sent becomes a stored
// offset record with its commit and expiry times (KIP-211).

// noExpiry marks an offset whose retention follows its group (KIP-211).
const noExpiry int64 = -1

// validateOffset checks one partition against offset.metadata.max.bytes and
// basic sanity; nil means it can be stored.
func validateOffset(p CommitPartition, maxMetadataBytes int32) error {
	switch {
	case p.Topic == "":
		return ErrInvalidTopic
	case p.Partition < 0:
		return ErrInvalidPartition
	case p.Metadata != nil && javaLength(*p.Metadata) > int(maxMetadataBytes):
		return ErrOffsetMetadataTooLarge
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

// offsetRecord converts a validated partition for storage. now is the
// leader's clock (Unix ms); retentionMs is OffsetCommit v2–v4's
// RetentionTimeMillis (nil or -1: the group's retention). An explicit v1
// timestamp sets the commit time and, as in Kafka, an expiry of that time
// plus the default retention.
func offsetRecord(p CommitPartition, now int64, retentionMs *int64, defaultRetentionMs int64) fsm.OffsetCommitPartition {
	o := fsm.Offset{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, CommitTimestamp: now, ExpireTimestamp: noExpiry}
	if p.Metadata != nil {
		o.Metadata = *p.Metadata
	}
	switch {
	case retentionMs != nil && *retentionMs >= 0:
		o.ExpireTimestamp = now + *retentionMs
	case p.Timestamp != nil && *p.Timestamp >= 0:
		o.CommitTimestamp = *p.Timestamp
		o.ExpireTimestamp = *p.Timestamp + defaultRetentionMs
	}
	return fsm.OffsetCommitPartition{Topic: p.Topic, Partition: p.Partition, Offset: o}
}
