package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/release"
)

// ApplyMetadataChange applies cmd, an encoded metadata change, to the
// metadata group and returns the FSM's answer or the failure. It carries
// topic changes (fsm.TopicCreate, fsm.TopicDelete: answered
// fsm.ErrTopicExists, fsm.ErrTopicNotFound) and SCRAM credential changes
// (fsm.ScramCredentialSet, fsm.ScramCredentialDelete: answered
// fsm.ErrInvalidScramCredential, fsm.ErrScramCredentialNotFound) and ACL
// changes (fsm.ACLCreate, fsm.ACLDelete: answered fsm.ErrInvalidACL). On
// the metadata leader it applies here; elsewhere it forwards cmd to the
// leader over the admin stream, as a KRaft broker forwards CreateTopics,
// AlterUserScramCredentials and CreateAcls to its controller (KIP-590),
// so those requests work on any node. Without a known,
// reachable leader it fails with raft.ErrNotLeader, which the Kafka
// handlers answer as NOT_CONTROLLER.
//
// It returns only once this node's own replica has applied the change (or
// the no-op the FSM refused), so a read on this node that follows sees it;
// a change that takes something away (revokes: a deleted topic, ACL or
// credential, a replaced credential, a DENY ACL) only once every live
// replica has applied it (confirmMetaApplied), refused ones included (a
// retry of a removal whose first attempt timed out finds nothing to remove,
// and must still mean "in effect everywhere"), failing with ErrApplyTimeout
// when one does not confirm in time; and any other change once every live
// replica has applied it or addConfirmWait has passed, so that a listing
// through any node right after shows it. Called by the Kafka handlers'
// goroutines; it blocks at most about timeout in all (the forwarding call
// also at most adminTimeout).
func (n *Node) ApplyMetadataChange(ctx context.Context, cmd []byte, timeout time.Duration) error {
	cmd, c, err := metadataChange(cmd)
	if err != nil {
		return err
	}
	if n.closed.Load() || !n.shardsStarted.Load() {
		return raft.ErrRaftShutdown
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var index uint64
	if n.meta.IsLeader() {
		index, err = n.applyMetaHere(ctx, cmd, timeout)
	} else {
		index, err = n.forwardMetadataChange(ctx, cmd, c, timeout)
	}
	if index == 0 {
		return err // not applied (or a leader of the previous release: see forwardMetadataChange)
	}
	if werr := n.awaitMetaApplied(ctx, index); werr != nil {
		return werr
	}
	if revokes(c) {
		if cerr := n.confirmMetaApplied(ctx, index, remaining(ctx)); cerr != nil {
			return cerr
		}
		return err
	}
	if err != nil {
		return err // refused: nothing changed for the other replicas to apply
	}
	// Anything else is waited for a little too, so that a listing
	// through another node right after shows it (a lookup by name there
	// would find it anyway: metasync.go); a replica that has not
	// applied it by then is left to catch up.
	if cerr := n.confirmMetaApplied(ctx, index, min(remaining(ctx), addConfirmWait)); cerr != nil {
		n.logger.Debug("a metadata change is answered before every replica confirmed it", "index", index, "error", cerr)
	}
	return nil
}

// remaining is the time left before ctx's deadline (a second when it has
// none).
func remaining(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Millisecond, time.Until(d))
	}
	return time.Second
}

// addConfirmWait bounds how long a metadata change that revokes nothing
// waits for the other replicas to confirm it.
const addConfirmWait = time.Second

// applyMetaHere applies cmd on the metadata leader and returns its index
// with the FSM's answer; the index is 0 when the command was not applied
// (not leading, a replica too old for it, a timeout).
func (n *Node) applyMetaHere(ctx context.Context, cmd []byte, timeout time.Duration) (uint64, error) {
	if err := n.checkReplicasApply(fsm.CommandType(cmd[0])); err != nil {
		return 0, err
	}
	if fsm.CommandType(cmd[0]) == fsm.FeatureLevelSetType {
		c, err := fsm.Decode(cmd)
		if err != nil {
			return 0, err
		}
		if err := n.checkFinalizeHere(c.(*fsm.FeatureLevelSet)); err != nil {
			return 0, err
		}
	}
	f := n.meta.ApplyAsync(cmd, timeout)
	_, err := WaitApply(ctx, f, timeout)
	if err != nil && !isFSMAnswer(err) {
		return 0, err
	}
	n.meta.nudgeFollowers()
	return f.Index(), err
}

// isFSMAnswer reports whether err is a metadata FSM's answer to a command
// it applied (refusing it changed nothing, but the entry is in the log).
func isFSMAnswer(err error) bool {
	for _, e := range []error{fsm.ErrTopicExists, fsm.ErrTopicNotFound, fsm.ErrInvalidScramCredential,
		fsm.ErrScramCredentialNotFound, fsm.ErrInvalidACL, fsm.ErrFeatureDowngrade, fsm.ErrInvalidFeatureLevel} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// forwardMetadataChange sends cmd to the metadata leader and returns the
// index it applied it at with its answer. A leader of the previous release
// answers no index: then the index is 0 and, when the change applied, this
// replica is first brought up to the leader's (SyncMetadata), so that a
// read here that follows sees it; no other replica is asked to confirm
// it (that leader's followers cannot be told which index to wait for).
func (n *Node) forwardMetadataChange(ctx context.Context, cmd []byte, c fsm.Command, timeout time.Duration) (uint64, error) {
	b, ok := n.MetaLeader()
	if !ok {
		return 0, fmt.Errorf("%w: no metadata leader is known to forward the metadata change to", raft.ErrNotLeader)
	}
	addr, ok := n.members.raftAddrs(n.mux.Deaths())[b.NodeID]
	if !ok {
		return 0, fmt.Errorf("%w: the metadata leader, node %d, is not reachable", raft.ErrNotLeader, b.NodeID)
	}
	// The op keeps the name it had when it carried topic changes only: the
	// nodes of earlier releases serve it under that name (and refuse a
	// SCRAM or ACL command in it, as not a topic change).
	resp, err := n.adminCall(ctx, addr, adminRequest{Op: "topic-change", Command: cmd, TimeoutMs: timeout.Milliseconds()})
	switch {
	case errors.Is(err, errAdminDial):
		return 0, fmt.Errorf("%w: forwarding the metadata change to the metadata leader, node %d: %v", raft.ErrNotLeader, b.NodeID, err)
	case err != nil:
		// Sent, but no answer: the leader may have applied it.
		return 0, fmt.Errorf("%w: the metadata leader, node %d, did not answer the metadata change (it may be applied): %v", ErrApplyTimeout, b.NodeID, err)
	}
	err = adminError(resp)
	if errors.Is(err, ErrNotMetaLeader) {
		// Leadership moved meanwhile: the client looks again, as after
		// NOT_CONTROLLER from Kafka.
		return 0, fmt.Errorf("%w: %v", raft.ErrNotLeader, err)
	}
	if resp.Index == 0 && (err == nil || isFSMAnswer(err)) {
		// A leader of the previous release: no index to wait for.
		if revokes(c) {
			n.warnOldRelease(b.NodeID)
		}
		if serr := n.SyncMetadata(ctx); serr != nil {
			return 0, fmt.Errorf("%w: the change is applied on the metadata leader, not yet known here: %v", ErrApplyTimeout, serr)
		}
	}
	return resp.Index, err
}

// revokes reports whether a metadata change can take a permission or a
// name away, so that every replica must apply it before it is answered: a
// deleted topic, ACL or SCRAM credential, a credential replaced (its old
// password must stop working everywhere), or a DENY ACL created (it
// overrides grants).
func revokes(c fsm.Command) bool {
	switch c := c.(type) {
	case *fsm.TopicDelete, *fsm.ACLDelete, *fsm.ScramCredentialDelete, *fsm.ScramCredentialSet:
		return true
	case *fsm.ACLCreate:
		for _, a := range c.ACLs {
			if a.Permission == fsm.ACLPermissionDeny {
				return true
			}
		}
	}
	return false
}

// metadataChange checks that cmd is a command ApplyMetadataChange may
// apply and returns it in this node's encoding: a peer's forwarded
// command reaches the metadata group only if it decodes here as a
// TopicCreate of a named topic with partitions, a TopicDelete of a named
// topic, a ScramCredentialSet of a credential with a user and a known
// mechanism (fsm.ScramCredential.Validate), a ScramCredentialDelete
// naming a user, or an ACLCreate or ACLDelete of at least one ACL, each
// with its strings non-empty and its codes in range (fsm.ACL.Validate).
// A body this node cannot decode (a malformed one, a newer
// version during an upgrade) is refused here, for every replica would
// panic applying it.
func metadataChange(cmd []byte) ([]byte, fsm.Command, error) {
	// The type first: only these are decoded for a peer at all.
	if len(cmd) == 0 || !isMetadataChange(fsm.CommandType(cmd[0])) {
		return nil, nil, errors.New("cluster: a forwarded command that is not a metadata change")
	}
	c, err := fsm.Decode(cmd)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: a metadata change that does not decode: %w", err)
	}
	switch c := c.(type) {
	case *fsm.TopicCreate:
		if c.Topic.Name == "" || c.Topic.Partitions < 1 {
			return nil, nil, fmt.Errorf("cluster: a topic change creating %q with %d partitions", c.Topic.Name, c.Topic.Partitions)
		}
	case *fsm.TopicDelete:
		if c.Name == "" {
			return nil, nil, errors.New("cluster: a topic change deleting no topic")
		}
	case *fsm.ScramCredentialSet:
		if err := c.Credential.Validate(); err != nil {
			return nil, nil, fmt.Errorf("cluster: a SCRAM credential change: %w", err)
		}
	case *fsm.ScramCredentialDelete:
		if c.User == "" {
			return nil, nil, fmt.Errorf("cluster: a SCRAM credential change deleting no user's credential: %w", fsm.ErrInvalidScramCredential)
		}
	case *fsm.ACLCreate:
		if err := validACLs(c.ACLs); err != nil {
			return nil, nil, fmt.Errorf("cluster: an ACL change creating %w", err)
		}
	case *fsm.ACLDelete:
		if err := validACLs(c.ACLs); err != nil {
			return nil, nil, fmt.Errorf("cluster: an ACL change deleting %w", err)
		}
	case *fsm.FeatureLevelSet:
		if c.Feature != release.Feature || c.Level < int16(release.Level1) {
			return nil, nil, fmt.Errorf("cluster: a finalization of %q at %d: %w", c.Feature, c.Level, fsm.ErrInvalidFeatureLevel)
		}
	default:
		return nil, nil, fmt.Errorf("cluster: command %T is not a metadata change", c)
	}
	b, err := fsm.Encode(c)
	return b, c, err
}

// isMetadataChange reports whether typ is one of the commands
// ApplyMetadataChange carries.
func isMetadataChange(typ fsm.CommandType) bool {
	switch typ {
	case fsm.TopicCreateType, fsm.TopicDeleteType, fsm.ScramCredentialSetType, fsm.ScramCredentialDeleteType,
		fsm.ACLCreateType, fsm.ACLDeleteType, fsm.FeatureLevelSetType:
		return true
	}
	return false
}

// validACLs checks the ACLs of an ACL change: at least one, each valid
// (fsm.ACL.Validate). Its error wraps fsm.ErrInvalidACL.
func validACLs(acls []fsm.ACL) error {
	if len(acls) == 0 {
		return fmt.Errorf("no ACLs: %w", fsm.ErrInvalidACL)
	}
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// applyMetadataChangeHere serves a forwarded metadata change on the
// metadata leader and returns the index it applied it at (0 when it did
// not). Called by serveAdminConn.
func (n *Node) applyMetadataChangeHere(cmd []byte, timeoutMs int64) (uint64, error) {
	cmd, _, err := metadataChange(cmd)
	if err != nil {
		return 0, err
	}
	if !n.meta.IsLeader() {
		return 0, ErrNotMetaLeader
	}
	timeout := adminBudget(timeoutMs)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return n.applyMetaHere(ctx, cmd, timeout)
}
