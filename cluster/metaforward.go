package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kcoord/kcoord/fsm"
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
// handlers answer as NOT_CONTROLLER. Called by the Kafka handlers'
// goroutines; it blocks until the leader answered, at most timeout (and
// adminTimeout when forwarded).
func (n *Node) ApplyMetadataChange(ctx context.Context, cmd []byte, timeout time.Duration) error {
	cmd, err := metadataChange(cmd)
	if err != nil {
		return err
	}
	if n.closed.Load() {
		return raft.ErrRaftShutdown
	}
	if n.meta.IsLeader() {
		if err := n.checkReplicasApply(fsm.CommandType(cmd[0])); err != nil {
			return err
		}
		_, err := n.meta.Apply(ctx, cmd, timeout)
		return err
	}
	b, ok := n.MetaLeader()
	if !ok {
		return fmt.Errorf("%w: no metadata leader is known to forward the metadata change to", raft.ErrNotLeader)
	}
	addr, ok := n.members.raftAddrs(n.mux.deaths)[b.NodeID]
	if !ok {
		return fmt.Errorf("%w: the metadata leader, node %d, is not reachable", raft.ErrNotLeader, b.NodeID)
	}
	// The op keeps the name it had when it carried topic changes only: the
	// nodes of earlier releases serve it under that name (and refuse a
	// SCRAM or ACL command in it, as not a topic change).
	resp, err := n.adminCall(ctx, addr, adminRequest{Op: "topic-change", Command: cmd, TimeoutMs: timeout.Milliseconds()})
	switch {
	case errors.Is(err, errAdminDial):
		return fmt.Errorf("%w: forwarding the metadata change to the metadata leader, node %d: %v", raft.ErrNotLeader, b.NodeID, err)
	case err != nil:
		// Sent, but no answer: the leader may have applied it.
		return fmt.Errorf("%w: the metadata leader, node %d, did not answer the metadata change (it may be applied): %v", ErrApplyTimeout, b.NodeID, err)
	}
	err = adminError(resp)
	if errors.Is(err, ErrNotMetaLeader) {
		// Leadership moved meanwhile: the client looks again, as after
		// NOT_CONTROLLER from Kafka.
		return fmt.Errorf("%w: %v", raft.ErrNotLeader, err)
	}
	return err
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
func metadataChange(cmd []byte) ([]byte, error) {
	// The type first: only these are decoded for a peer at all.
	if len(cmd) == 0 || !isMetadataChange(fsm.CommandType(cmd[0])) {
		return nil, errors.New("cluster: a forwarded command that is not a metadata change")
	}
	c, err := fsm.Decode(cmd)
	if err != nil {
		return nil, fmt.Errorf("cluster: a metadata change that does not decode: %w", err)
	}
	switch c := c.(type) {
	case *fsm.TopicCreate:
		if c.Topic.Name == "" || c.Topic.Partitions < 1 {
			return nil, fmt.Errorf("cluster: a topic change creating %q with %d partitions", c.Topic.Name, c.Topic.Partitions)
		}
	case *fsm.TopicDelete:
		if c.Name == "" {
			return nil, errors.New("cluster: a topic change deleting no topic")
		}
	case *fsm.ScramCredentialSet:
		if err := c.Credential.Validate(); err != nil {
			return nil, fmt.Errorf("cluster: a SCRAM credential change: %w", err)
		}
	case *fsm.ScramCredentialDelete:
		if c.User == "" {
			return nil, fmt.Errorf("cluster: a SCRAM credential change deleting no user's credential: %w", fsm.ErrInvalidScramCredential)
		}
	case *fsm.ACLCreate:
		if err := validACLs(c.ACLs); err != nil {
			return nil, fmt.Errorf("cluster: an ACL change creating %w", err)
		}
	case *fsm.ACLDelete:
		if err := validACLs(c.ACLs); err != nil {
			return nil, fmt.Errorf("cluster: an ACL change deleting %w", err)
		}
	default:
		return nil, fmt.Errorf("cluster: command %T is not a metadata change", c)
	}
	return fsm.Encode(c)
}

// isMetadataChange reports whether typ is one of the commands
// ApplyMetadataChange carries.
func isMetadataChange(typ fsm.CommandType) bool {
	switch typ {
	case fsm.TopicCreateType, fsm.TopicDeleteType, fsm.ScramCredentialSetType, fsm.ScramCredentialDeleteType,
		fsm.ACLCreateType, fsm.ACLDeleteType:
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
// metadata leader. Called by serveAdminConn.
func (n *Node) applyMetadataChangeHere(cmd []byte, timeoutMs int64) error {
	cmd, err := metadataChange(cmd)
	if err != nil {
		return err
	}
	if !n.meta.IsLeader() {
		return ErrNotMetaLeader
	}
	if err := n.checkReplicasApply(fsm.CommandType(cmd[0])); err != nil {
		return err
	}
	// Answer within the caller's read deadline (adminTimeout), so that it
	// hears a timeout as one rather than as a lost connection.
	budget := adminTimeout - time.Second
	timeout := min(time.Duration(timeoutMs)*time.Millisecond, budget)
	if timeout <= 0 {
		timeout = budget
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = n.meta.Apply(ctx, cmd, timeout)
	return err
}
