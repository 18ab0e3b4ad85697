package groups

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRequestsDuringAnElectionWaitForItsOutcome: a heartbeat that reaches a
// replica while its shard's leadership settles is held, then served when
// this node wins, answered NOT_COORDINATOR as soon as another node wins, and
// answered NOT_COORDINATOR when the hold runs out; never sent away before
// the outcome is known.
func TestRequestsDuringAnElectionWaitForItsOutcome(t *testing.T) {
	c, log := newTestCoordinator(t, func(cfg *Config) { cfg.ElectionHold = time.Second })
	ids, gen := stableGroup(t, c, "g", 1)
	hb := HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen}
	heartbeat := func() <-chan error {
		ch := make(chan error, 1)
		go func() { ch <- c.Heartbeat(context.Background(), hb) }()
		return ch
	}

	// This node wins the election.
	log.SetLeader(false)
	c.Deactivate()
	log.SetSettling(true)
	held := heartbeat()
	assertPending(t, held)
	won := log.SetLeader(true) // Raft leads; the coordinator is not active yet
	assertPending(t, held)
	if err := c.Activate(won); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, held); err != nil {
		t.Fatalf("heartbeat held through an election this node won: %v", err)
	}

	// Another node wins: the held request is answered at once.
	log.SetLeader(false)
	c.Deactivate()
	held = heartbeat()
	assertPending(t, held)
	lost := time.Now()
	log.SetSettling(false) // a leader elsewhere is known now
	wantErr(t, recv(t, held), ErrNotCoordinator)
	if waited := time.Since(lost); waited > 500*time.Millisecond {
		t.Fatalf("answered %v after another node won", waited)
	}

	// Nobody wins within the hold.
	log.SetSettling(true)
	start := time.Now()
	wantErr(t, recv(t, heartbeat()), ErrNotCoordinator)
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("answered after %v, before the 1s hold ran out", waited)
	}
	if st := c.Stats(); st.Held < 3 || st.HoldsExpired != 1 {
		t.Fatalf("stats %+v: want 3 held, 1 expired", st)
	}
}

// TestARequestIsHeldOnce: a commit held until the hold runs out is answered
// after one hold, not one per check it passes through (kafka-go gives up on
// a request after 5 s).
func TestARequestIsHeldOnce(t *testing.T) {
	c, log := newTestCoordinator(t, func(cfg *Config) { cfg.ElectionHold = 300 * time.Millisecond })
	ids, gen := stableGroup(t, c, "g", 1)
	log.SetLeader(false)
	c.Deactivate()
	log.SetSettling(true)
	start := time.Now()
	err := commitOffsets(c, CommitRequest{GroupID: "g", MemberID: ids[0], Generation: gen,
		Partitions: []CommitPartition{{Topic: "t", Partition: 0, Offset: 1}}})
	wantErr(t, err, ErrNotCoordinator)
	if waited := time.Since(start); waited >= 600*time.Millisecond {
		t.Fatalf("commit answered after %v: held more than once (hold 300ms)", waited)
	}
	if _, err := c.List(context.Background()); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("List of a settling shard: %v, want NOT_COORDINATOR at once", err)
	}
	if st := c.Stats(); st.Held != 1 {
		t.Fatalf("%d requests held, want 1 (List is never held)", st.Held)
	}
}

// TestAWinnerStillLoadingHoldsRequests: between this node's win and its
// coordinator's activation, requests wait for the activation instead of
// being told NOT_COORDINATOR (which sends the client to look elsewhere) or
// COORDINATOR_LOAD_IN_PROGRESS (on which sarama ends a member's session).
func TestAWinnerStillLoadingHoldsRequests(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	ids, gen := stableGroup(t, c, "g", 1)
	log.SetLeader(false)
	c.Deactivate()
	won := log.SetLeader(true)
	log.SetSettling(true) // Raft leads: the shard settles here
	done := make(chan error, 1)
	go func() {
		done <- c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen})
	}()
	assertPending(t, done)
	if err := c.Activate(won); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, done); err != nil {
		t.Fatalf("heartbeat held across the activation: %v", err)
	}
}

// TestHeldRequestsEndWithTheCoordinator: a request held while the shard
// settles is answered as soon as the server stops the coordinator (before
// it closes the listener, which waits for every handler), not when the hold
// runs out; and nothing is held after.
func TestHeldRequestsEndWithTheCoordinator(t *testing.T) {
	c, log := newTestCoordinator(t, func(cfg *Config) { cfg.ElectionHold = time.Minute })
	ids, gen := stableGroup(t, c, "g", 1)
	log.SetLeader(false)
	c.Deactivate()
	log.SetSettling(true)
	hb := HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen}
	done := make(chan error, 1)
	go func() { done <- c.Heartbeat(context.Background(), hb) }()
	assertPending(t, done)
	start := time.Now()
	c.Stop()
	wantErr(t, recv(t, done), ErrNotCoordinator)
	wantErr(t, c.Heartbeat(context.Background(), hb), ErrNotCoordinator)
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("held requests answered %v after Stop", waited)
	}
}

// TestARequestNamingManyGroupsIsHeldOnce: under OneHold (DescribeGroups,
// DeleteGroups and OffsetFetch take one per request), the waits for several
// groups of settling shards share one bound, so the request is answered
// within one hold however many groups it names.
func TestARequestNamingManyGroupsIsHeldOnce(t *testing.T) {
	c, log := newTestCoordinator(t, func(cfg *Config) { cfg.ElectionHold = 200 * time.Millisecond })
	stableGroup(t, c, "g", 1)
	log.SetLeader(false)
	c.Deactivate()
	log.SetSettling(true)
	ctx := OneHold(context.Background())
	start := time.Now()
	for range 5 {
		_, err := c.Describe(ctx, "g")
		wantErr(t, err, ErrNotCoordinator)
	}
	if waited := time.Since(start); waited >= 400*time.Millisecond {
		t.Fatalf("five describes under one hold took %v; the hold is 200ms", waited)
	}
}
