package offsets

import "errors"

var (
	// ErrMetadataTooLarge means a commit's metadata string is longer than
	// offset.metadata.max.bytes. Kafka: OFFSET_METADATA_TOO_LARGE.
	ErrMetadataTooLarge = errors.New("offset metadata too large")
	// ErrInvalidPartition means a commit names a negative partition. Kafka
	// answers UNKNOWN_TOPIC_OR_PARTITION.
	ErrInvalidPartition = errors.New("invalid partition")
	// ErrInvalidTopic means a commit names an empty topic. Kafka answers
	// UNKNOWN_TOPIC_OR_PARTITION.
	ErrInvalidTopic = errors.New("invalid topic")
)
