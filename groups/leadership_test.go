package groups

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kcoord/kcoord/fsm"
)

// TestDeposedLeaderServesNoStaleReads: a coordinator whose leadership a
// quorum no longer confirms (a paused leader that resumed, a partitioned
// one) answers NOT_COORDINATOR to every read of its state instead of the
// state it still holds.
func TestDeposedLeaderServesNoStaleReads(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	ids, gen := stableGroup(t, c, "g", 2)
	if log.Confirms() == 0 {
		t.Fatal("a Stable group's syncs and heartbeats must be confirmed by a quorum")
	}

	log.SetConfirmFault(errors.New("a newer term exists"))
	wantErr(t, c.Check(context.Background()), ErrNotCoordinator)
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen}), ErrNotCoordinator)
	_, err := c.Describe(context.Background(), "g")
	wantErr(t, err, ErrNotCoordinator)
	_, err = c.List(context.Background())
	wantErr(t, err, ErrNotCoordinator)
	s := c.Sync(context.Background(), SyncRequest{GroupID: "g", MemberID: ids[1], Generation: gen})
	wantErr(t, s.Err, ErrNotCoordinator)

	log.SetConfirmFault(nil)
	if err := c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen}); err != nil {
		t.Fatalf("heartbeat once confirmed again: %v", err)
	}
	if d, err := c.Describe(context.Background(), "g"); err != nil || d.State != Stable.String() {
		t.Fatalf("describe once confirmed again: %+v, %v", d, err)
	}
}

// TestStaleActivationAfterLeadershipFlapChangesNothing: leadership is lost
// and regained quickly, and an activation retried for the first term runs
// after the new term's coordinator already serves. It must install nothing
// and start no timer: in the bug it replaced the live groups with copies
// whose session timers expired the members nobody heartbeats there and
// stored "Empty, next generation" over the Stable group.
func TestStaleActivationAfterLeadershipFlapChangesNothing(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	first := log.Epoch()

	// A quick loss and regain of leadership: two notifications.
	log.SetLeader(false)
	c.Deactivate()
	current := log.SetLeader(true)
	if err := c.Activate(current); err != nil {
		t.Fatal(err)
	}

	// Long enough that a loaded machine's scheduling gaps between two
	// heartbeats never expire the member; the check waits several of them.
	const session = time.Second
	req := joinReq("g", "")
	req.SessionTimeoutMs = int32(session / time.Millisecond)
	j := recv(t, joinAsync(c, req))
	if j.Err != nil {
		t.Fatal(j.Err)
	}
	s := recv(t, syncAsync(c, SyncRequest{GroupID: "g", MemberID: j.MemberID, Generation: j.Generation,
		Assignments: map[string][]byte{j.MemberID: []byte("a")}}))
	if s.Err != nil {
		t.Fatal(s.Err)
	}

	// The late activations of the earlier epochs install nothing: the live
	// group stays the one its member talks to.
	live := c.classics["g"]
	wantErr(t, c.Activate(first), ErrNotCoordinator)
	if err := c.Activate(current); err != nil { // served already: a no-op
		t.Fatalf("activating the served epoch again: %v", err)
	}
	if !c.Active() {
		t.Fatal("a stale activation deactivated the coordinator")
	}
	if c.classics["g"] != live {
		t.Fatal("a late activation replaced the live group")
	}

	// The member keeps heartbeating the live coordinator for several
	// session timeouts; nothing may expire it.
	for end := time.Now().Add(3 * session); time.Now().Before(end); time.Sleep(session / 10) {
		if err := c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: j.MemberID, Generation: j.Generation}); err != nil {
			t.Fatalf("heartbeat after the stale activation: %v", err)
		}
	}
	g, ok := log.FSM.Group("g")
	if !ok || g.State != fsm.StateStable || g.Generation != j.Generation || len(g.Members) != 1 {
		t.Fatalf("stored group after the stale activation: %+v", g)
	}
}

// TestActivationOfAPassedEpochInstallsNothing: an activation whose barrier
// finishes after its leadership ended (lost and regained meanwhile) leaves
// the coordinator to the current epoch's activation.
func TestActivationOfAPassedEpochInstallsNothing(t *testing.T) {
	c, log := newTestCoordinator(t, nil)
	ids, gen := stableGroup(t, c, "g", 1)
	c.Deactivate()
	passed := log.SetLeader(true)
	log.SetLeader(false)
	wantErr(t, c.Activate(passed), ErrNotCoordinator)
	if c.Active() {
		t.Fatal("an activation of a passed epoch serves")
	}
	wantErr(t, c.Heartbeat(context.Background(), HeartbeatRequest{GroupID: "g", MemberID: ids[0], Generation: gen}), ErrNotCoordinator)
}
