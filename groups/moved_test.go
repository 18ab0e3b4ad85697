package groups

import (
	"context"
	"testing"
)

// moveCoordinator hands the shard to a new leadership epoch of this node,
// as a failover or a planned move does: the new coordinator rebuilds the
// groups from the log.
func moveCoordinator(t *testing.T, c *Coordinator, log *MemLog) {
	t.Helper()
	log.SetLeader(false)
	c.Deactivate()
	if err := c.Activate(log.SetLeader(true)); err != nil {
		t.Fatal(err)
	}
}

// TestMembersRejoiningAfterAMoveKeepTheGeneration: sarama and kafka-go end
// a member's session when their coordinator's connection breaks, and rejoin
// with their member id. After a coordinator move, such a rejoin (the
// leader's included) gets the current generation back, and SyncGroup the
// stored assignment, so the group does not rebalance. Once the leader has
// heartbeated on the new coordinator, its rejoin rebalances as in Kafka.
func TestMembersRejoiningAfterAMoveKeepTheGeneration(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	ids, gen := stableGroup(t, c, "g", 2)
	moveCoordinator(t, c, log)

	var leader string
	for _, id := range ids {
		r := c.Join(context.Background(), joinReq("g", id))
		if r.Err != nil || r.Generation != gen {
			t.Fatalf("%s rejoined after the move: generation %d, %v; want %d", id, r.Generation, r.Err, gen)
		}
		leader = r.Leader
		if r.Leader == id && len(r.Members) != len(ids) {
			t.Fatalf("the leader's rejoin lists %d members, want %d", len(r.Members), len(ids))
		}
		s := c.Sync(context.Background(), SyncRequest{GroupID: "g", MemberID: id, Generation: gen,
			Assignments: map[string][]byte{ids[0]: []byte("other"), ids[1]: []byte("other")}})
		if s.Err != nil || string(s.Assignment) != "assignment-of-"+id {
			t.Fatalf("%s synced after the move: %q, %v; want its stored assignment", id, s.Assignment, s.Err)
		}
		if err := c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: id, Generation: gen}); err != nil {
			t.Fatalf("%s heartbeat in the kept generation: %v", id, err)
		}
	}

	// The leader is settled on this coordinator: its rejoin rebalances.
	follower := ids[0]
	if follower == leader {
		follower = ids[1]
	}
	done := joinAsync(c, joinReq("g", leader))
	assertPending(t, done)
	if err := c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: follower, Generation: gen}); err != ErrRebalanceInProgress {
		t.Fatalf("heartbeat after the settled leader rejoined: %v, want REBALANCE_IN_PROGRESS", err)
	}
}
