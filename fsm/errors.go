package fsm

import "errors"

var (
	// ErrUnknownCommand means a log entry's type byte is not one this build
	// knows: the log was written by a newer kcoord.
	ErrUnknownCommand = errors.New("unknown command type")
	// ErrUnknownVersion means a log entry's body version is newer than this
	// build reads.
	ErrUnknownVersion = errors.New("unknown command body version")
	// ErrMalformedCommand means a log entry could not be decoded.
	ErrMalformedCommand = errors.New("malformed command")
	// ErrMalformedSnapshot means a snapshot could not be decoded.
	ErrMalformedSnapshot = errors.New("malformed snapshot")

	// ErrGroupNotEmpty is Apply's answer to deleting a group with members.
	ErrGroupNotEmpty = errors.New("group is not empty")
	// ErrGroupNotFound is Apply's answer to deleting a group that does not exist.
	ErrGroupNotFound = errors.New("group not found")
	// ErrGroupTypeConflict is Apply's answer to a consumer-group write for
	// a group id that a classic group with members holds.
	ErrGroupTypeConflict = errors.New("group id is held by a group of the other protocol")
	// ErrInvalidConsumerGroupWrite is Apply's answer to a consumer-group
	// write that contradicts itself or names parts of members that are
	// not in the group. Only a writer's bug makes one.
	ErrInvalidConsumerGroupWrite = errors.New("invalid consumer group write")
	// ErrStaleConsumerGroupWrite is Apply's answer to a consumer-group
	// write computed at another state of the group than the stored one (a
	// write before it was lost).
	ErrStaleConsumerGroupWrite = errors.New("consumer group write computed from a state that is not the stored one")
	// ErrTopicExists is Apply's answer to creating a topic that exists.
	ErrTopicExists = errors.New("topic already exists")
	// ErrTopicNotFound is Apply's answer to deleting a topic that does not exist.
	ErrTopicNotFound = errors.New("topic not found")
	// ErrClusterIDMismatch is Apply's answer to a ClusterStamp whose id is
	// not the cluster id the FSM already holds: the Raft group belongs to
	// another cluster. The FSM keeps its cluster id.
	ErrClusterIDMismatch = errors.New("cluster id mismatch")
	// ErrForeignCommand is Apply's answer to a command that belongs to the
	// other FSM's log: a topic command in a shard's log, or a group or
	// offset command in the metadata group's. Only a writer's bug puts one
	// there; every replica answers it alike and changes nothing, rather
	// than every replica panicking on it at every replay.
	ErrForeignCommand = errors.New("command of another FSM's log")
	// ErrFeatureDowngrade is Apply's answer to a FeatureLevelSet below the
	// level already finalized: a finalized level is never lowered (the
	// FSM keeps its level).
	ErrFeatureDowngrade = errors.New("a finalized feature level cannot be lowered")
	// ErrInvalidFeatureLevel is Apply's answer to a FeatureLevelSet
	// without a feature name or with a level below 1.
	ErrInvalidFeatureLevel = errors.New("invalid feature level")
	// ErrNodeNotFound is Apply's answer to a placement command naming a
	// node that is not registered.
	ErrNodeNotFound = errors.New("node not registered")
	// ErrLastActiveNode is Apply's answer to draining the only active
	// node: its replicas would have nowhere to go.
	ErrLastActiveNode = errors.New("the last active node cannot be removed")
	// ErrInvalidPlacement is Apply's answer to a PlacementSet whose voter
	// set is empty, unsorted or repeats a node.
	ErrInvalidPlacement = errors.New("invalid placement")
	// ErrScramCredentialNotFound is Apply's answer to deleting a SCRAM
	// credential that is not stored (no credential of that user for that
	// mechanism).
	ErrScramCredentialNotFound = errors.New("SCRAM credential not found")
	// ErrInvalidScramCredential is Apply's answer to a ScramCredentialSet
	// without a user or of a mechanism other than SCRAM-SHA-256 (1) and
	// SCRAM-SHA-512 (2) (ScramCredential.Validate), and
	// cluster.Node.ApplyMetadataChange's to such a set or to a
	// ScramCredentialDelete naming no user, which it does not write.
	ErrInvalidScramCredential = errors.New("invalid SCRAM credential")
	// ErrInvalidACL is Apply's answer to an ACLCreate holding an ACL with
	// an empty resource name, principal or host, or a code out of range
	// (ACL.Validate), and cluster.Node.ApplyMetadataChange's to such an
	// ACLCreate or ACLDelete or to one of no ACLs, which it does not
	// write.
	ErrInvalidACL = errors.New("invalid ACL")
)
