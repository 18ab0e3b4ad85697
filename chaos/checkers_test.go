package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var reg = Register{"g", "t", 0}

func commit(client int, v int64, call, ret time.Duration, o Outcome) Op {
	return Op{Client: client, Kind: Commit, Register: reg, Value: v, Call: call, Return: ret, Outcome: o, Generation: -1}
}

func fetch(client int, v int64, call, ret time.Duration, final bool) Op {
	return Op{Client: client, Kind: Fetch, Register: reg, Value: v, Call: call, Return: ret, Outcome: OK, Generation: -1, Final: final}
}

const ms = time.Millisecond

func TestLinearizableCheckerFlagsAStaleFetch(t *testing.T) {
	ok := Snapshot{Ops: []Op{
		commit(1, 1, 0, 10*ms, OK),
		fetch(2, 1, 20*ms, 30*ms, false),
		commit(1, 2, 40*ms, 50*ms, Unknown), // may land any time later, or never
		fetch(2, 1, 60*ms, 70*ms, false),
		fetch(2, 2, 80*ms, 90*ms, false),
	}}
	if r := CheckLinearizable(ok, time.Second, ""); len(r.Anomalies) != 0 {
		t.Fatalf("a linearizable history flagged: %v", r.Anomalies)
	}
	stale := Snapshot{Ops: []Op{
		commit(1, 1, 0, 10*ms, OK),
		commit(1, 2, 20*ms, 30*ms, OK),
		fetch(2, 1, 40*ms, 50*ms, false), // commit 2 was acknowledged before this fetch began
	}}
	if r := CheckLinearizable(stale, time.Second, ""); len(r.Anomalies) != 1 {
		t.Fatalf("a stale fetch not flagged: %+v", r)
	}
}

func TestDurableCheckerFlagsAnOverwrittenAcknowledgedCommit(t *testing.T) {
	kept := Snapshot{Ops: []Op{
		commit(1, 1, 0, 10*ms, OK),
		commit(1, 2, 20*ms, 30*ms, OK),
		commit(1, 3, 40*ms, 50*ms, Failed), // never happened
		fetch(9, 2, time.Second, time.Second+ms, true),
	}}
	if r := CheckDurable(kept); len(r.Anomalies) != 0 {
		t.Fatalf("nothing was lost, yet: %v", r.Anomalies)
	}
	lost := Snapshot{Ops: []Op{
		commit(1, 1, 0, 10*ms, OK),
		commit(1, 2, 20*ms, 30*ms, OK),
		fetch(9, 1, time.Second, time.Second+ms, true),
	}}
	if r := CheckDurable(lost); len(r.Anomalies) != 1 || !strings.Contains(r.Summary, "1 lost") {
		t.Fatalf("commit 2 was lost and not flagged: %+v", r)
	}
	gone := Snapshot{Ops: []Op{
		commit(1, 1, 0, 10*ms, OK),
		fetch(9, -1, time.Second, time.Second+ms, true),
	}}
	if r := CheckDurable(gone); len(r.Anomalies) != 1 {
		t.Fatalf("an offset gone at the end not flagged: %+v", r)
	}
}

func syncRec(member, instance string, gen int32, at time.Duration, coop bool, ps ...int32) SyncRecord {
	return SyncRecord{Group: "g", Member: member, Instance: instance, Generation: gen, Partitions: ps, At: at, Cooperative: coop}
}

func TestOwnershipCheckerFlagsTwoOwnersInOneGeneration(t *testing.T) {
	s := Snapshot{Syncs: []SyncRecord{
		syncRec("a", "", 1, 0, false, 0, 1),
		syncRec("b", "", 1, ms, false, 1, 2),
	}}
	if r := CheckOwnership(s); len(r.Anomalies) != 1 {
		t.Fatalf("partition 1 owned twice in generation 1, not flagged: %+v", r)
	}
	// A static member restarted under a new member id takes its
	// assignment over in the same generation: one owner, the instance.
	s = Snapshot{Syncs: []SyncRecord{
		syncRec("s-1", "s", 1, 0, false, 0, 1),
		syncRec("s-2", "s", 1, time.Second, false, 0, 1),
	}}
	if r := CheckOwnership(s); len(r.Anomalies) != 0 {
		t.Fatalf("a static member's restart flagged: %v", r.Anomalies)
	}
}

func TestOwnershipCheckerFlagsACooperativeHandoffBeforeRevocation(t *testing.T) {
	syncs := []SyncRecord{
		syncRec("a", "", 1, 0, true, 0, 1),
		syncRec("a", "", 2, 100*ms, true, 0), // a gives 1 up
		syncRec("b", "", 2, 100*ms, true),
		syncRec("a", "", 3, 300*ms, true, 0),
		syncRec("b", "", 3, 300*ms, true, 1),
	}
	revokedInTime := Snapshot{Syncs: syncs, Releases: []Release{{Group: "g", Member: "a", Generation: 2, Partitions: []int32{1}, At: 150 * ms}}}
	if r := CheckOwnership(revokedInTime); len(r.Anomalies) != 0 {
		t.Fatalf("a clean cooperative handoff flagged: %v", r.Anomalies)
	}
	revokedLate := Snapshot{Syncs: syncs, Releases: []Release{{Group: "g", Member: "a", Generation: 2, Partitions: []int32{1}, At: 400 * ms}}}
	if r := CheckOwnership(revokedLate); len(r.Anomalies) != 1 {
		t.Fatalf("partition 1 reached b before a revoked it, not flagged: %+v", r)
	}
	neverRevoked := Snapshot{Syncs: syncs}
	if r := CheckOwnership(neverRevoked); len(r.Anomalies) != 1 {
		t.Fatalf("partition 1 reached b and a never revoked it, not flagged: %+v", r)
	}
}

func TestOwnershipCheckerFlagsAnEagerHandoffBeforeRevocation(t *testing.T) {
	syncs := []SyncRecord{
		syncRec("a", "", 1, 0, false, 0, 1),
		syncRec("a", "", 2, 300*ms, false, 0),
		syncRec("b", "", 2, 300*ms, false, 1),
	}
	clean := Snapshot{Syncs: syncs, Releases: []Release{{Group: "g", Member: "a", Generation: 1, Partitions: []int32{0, 1}, At: 200 * ms}}}
	if r := CheckOwnership(clean); len(r.Anomalies) != 0 {
		t.Fatalf("an eager rebalance that revoked first flagged: %v", r.Anomalies)
	}
	if r := CheckOwnership(Snapshot{Syncs: syncs}); len(r.Anomalies) != 1 {
		t.Fatalf("partition 1 reached b while a, still a member, never revoked it: %+v", r)
	}
}

func TestFencingCheckerFlagsAnAcknowledgedCommitFromAPastGeneration(t *testing.T) {
	syncs := []SyncRecord{syncRec("a", "", 1, 0, false, 0), syncRec("a", "", 2, 100*ms, false, 0)}
	member := func(gen int32, call time.Duration) Op {
		op := commit(1, int64(call), call, call+ms, OK)
		op.Member, op.Generation = "a", gen
		return op
	}
	ok := Snapshot{Syncs: syncs, Ops: []Op{member(1, 50*ms), member(2, 150*ms)}}
	if r := CheckFencing(ok); len(r.Anomalies) != 0 {
		t.Fatalf("commits in their own generation flagged: %v", r.Anomalies)
	}
	stale := Snapshot{Syncs: syncs, Ops: []Op{member(1, 150*ms)}}
	if r := CheckFencing(stale); len(r.Anomalies) != 1 {
		t.Fatalf("a generation-1 commit sent after generation 2 was assigned, acknowledged and not flagged: %+v", r)
	}
}

func TestLinearizableCheckerBoundsUnknownCommitsByTheFetchesThatSawThem(t *testing.T) {
	// Commit 2's answer was lost; a fetch saw it, so it happened before
	// that fetch returned, and a later fetch of 1 is stale.
	s := Snapshot{Ops: []Op{
		commit(1, 1, 0, 10*ms, OK),
		commit(1, 2, 20*ms, 30*ms, Unknown),
		fetch(2, 2, 40*ms, 50*ms, false),
		fetch(2, 1, 60*ms, 70*ms, false),
	}}
	if r := CheckLinearizable(s, time.Second, ""); len(r.Anomalies) != 1 {
		t.Fatalf("a fetch of 1 after a fetch of 2 not flagged: %+v", r)
	}
	// A fetch that saw a value before its commit was sent.
	s = Snapshot{Ops: []Op{
		fetch(2, 5, 0, 10*ms, false),
		commit(1, 5, 20*ms, 30*ms, Unknown),
	}}
	if r := CheckLinearizable(s, time.Second, ""); len(r.Anomalies) != 1 {
		t.Fatalf("a value fetched before it was committed not flagged: %+v", r)
	}
}

func assignRec(member string, at time.Duration, ps ...int32) AssignRecord {
	return AssignRecord{Group: "k", Member: member, Epoch: 1, Partitions: ps, At: at}
}

func TestOwnershipCheckerFlagsAConsumerProtocolHandoffBeforeRevocation(t *testing.T) {
	assigns := []AssignRecord{assignRec("a", 0, 0, 1), assignRec("b", 200*ms, 1)}
	revoked := func(at time.Duration, lost bool) []Release {
		return []Release{{Group: "k", Member: "a", Partitions: []int32{1}, At: at, Lost: lost}}
	}
	if r := CheckOwnership(Snapshot{Assigns: assigns, Releases: revoked(100*ms, false)}); len(r.Anomalies) != 0 {
		t.Fatalf("a handoff after the revocation flagged: %v", r.Anomalies)
	}
	if r := CheckOwnership(Snapshot{Assigns: assigns, Releases: revoked(300*ms, false)}); len(r.Anomalies) != 1 {
		t.Fatalf("partition 1 reached b before a revoked it, not flagged: %+v", r)
	}
	if r := CheckOwnership(Snapshot{Assigns: assigns, Releases: revoked(300*ms, true)}); len(r.Anomalies) != 0 {
		t.Fatalf("a fenced member's partition handed on flagged: %v", r.Anomalies)
	}
	stayed := append(slices.Clone(assigns), assignRec("a", 400*ms, 2))
	if r := CheckOwnership(Snapshot{Assigns: stayed}); len(r.Anomalies) != 1 {
		t.Fatalf("partition 1 reached b while a, still a member, never gave it up: %+v", r)
	}
}
