package groups

import (
	"bytes"
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// classicMember is one live classicMember of a group. Every field is guarded by the
// group's lock.
type classicMember struct {
	id         string
	instanceID string
	clientID   string
	clientHost string
	// sessionTimeout and rebalanceTimeout as the member asked.
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []fsm.Protocol
	assignment       []byte

	// isNew is set until the member's first JoinGroup is answered; a new
	// member that stops rejoining expires after NewMemberJoinTimeout.
	isNew bool
	// joinCh is non-nil while the member waits in JoinGroup.
	joinCh chan JoinResult
	// syncCh is non-nil while the member waits in SyncGroup.
	syncCh chan SyncResult
	// session is the liveness timer; sessionToken invalidates a timer that
	// fired after it was replaced.
	session      *time.Timer
	sessionToken uint64
	// inherited is when this coordinator's activation loaded the member
	// from the shard's state (a failover or a leadership move), until its
	// first heartbeat here; zero for members that joined here.
	inherited time.Time
}

func (m *classicMember) awaitingJoin() bool { return m.joinCh != nil }

// justMoved reports whether the member came with a coordinator move and has
// not been heard from here since, within its session timeout of the move.
func (m *classicMember) justMoved() bool {
	return !m.inherited.IsZero() && time.Since(m.inherited) < m.sessionTimeout
}
func (m *classicMember) awaitingSync() bool { return m.syncCh != nil }

// metadataFor returns the member's metadata for a protocol name.
func (m *classicMember) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// sameProtocols reports whether a rejoin carries exactly the protocols the
// member already has (Kafka's matches()).
func (m *classicMember) sameProtocols(ps []fsm.Protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i, p := range ps {
		if p.Name != m.protocols[i].Name || !bytes.Equal(p.Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// respondJoin answers the member's waiting JoinGroup, if any.
func (m *classicMember) respondJoin(r JoinResult) {
	if m.joinCh != nil {
		m.joinCh <- r
		m.joinCh = nil
	}
	m.isNew = false
}

// respondSync answers the member's waiting SyncGroup, if any.
func (m *classicMember) respondSync(r SyncResult) {
	if m.syncCh != nil {
		m.syncCh <- r
		m.syncCh = nil
	}
}

// record converts the member for storage.
func (m *classicMember) record() fsm.Member {
	return fsm.Member{
		ID:                 m.id,
		InstanceID:         m.instanceID,
		ClientID:           m.clientID,
		ClientHost:         m.clientHost,
		SessionTimeoutMs:   int32(m.sessionTimeout / time.Millisecond),
		RebalanceTimeoutMs: int32(m.rebalanceTimeout / time.Millisecond),
		Protocols:          m.protocols,
		Assignment:         m.assignment,
	}
}

// classicMemberFromRecord rebuilds a live member from storage.
func classicMemberFromRecord(r fsm.Member, protocolType string) *classicMember {
	return &classicMember{
		id:               r.ID,
		instanceID:       r.InstanceID,
		clientID:         r.ClientID,
		clientHost:       r.ClientHost,
		sessionTimeout:   time.Duration(r.SessionTimeoutMs) * time.Millisecond,
		rebalanceTimeout: time.Duration(r.RebalanceTimeoutMs) * time.Millisecond,
		protocolType:     protocolType,
		protocols:        r.Protocols,
		assignment:       r.Assignment,
	}
}
