package raftnet

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestHeartbeatsReuseOnlyAFreshSuccessOfTheSameTerm(t *testing.T) {
	beat := func(term uint64) *raft.AppendEntriesRequest { return &raft.AppendEntriesRequest{Term: term} }
	ok := &raft.AppendEntriesResponse{Term: 3, Success: true, LastLog: 9}
	const f1, f2 = raft.ServerID("2"), raft.ServerID("3")

	h := newHeartbeats(300*time.Millisecond, time.Second)
	var resp raft.AppendEntriesResponse
	if h.reused(f1, beat(3), &resp) {
		t.Fatal("reused before any answer")
	}
	h.answeredFrame(f1, time.Now(), 3, ok, nil)
	if !h.reused(f1, beat(3), &resp) || resp.LastLog != ok.LastLog || !resp.Success {
		t.Fatalf("fresh success not reused: %+v", resp)
	}
	if h.reused(f2, beat(3), &resp) {
		t.Fatal("one follower's answer reused for another")
	}
	if h.reused(f1, beat(4), &resp) {
		t.Fatal("an answer of term 3 reused in term 4")
	}
	entries := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 8, PrevLogTerm: 3, LeaderCommitIndex: 8, Entries: []*raft.Log{{Index: 9}}}
	if h.reused(f1, entries, &resp) {
		t.Fatal("an AppendEntries with entries was not sent")
	}
	if h.reused(f1, &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 9, PrevLogTerm: 3, LeaderCommitIndex: 9}, &resp) {
		t.Fatal("replication's empty AppendEntries (it checks the log) was not sent")
	}

	h.beginConfirm()
	if h.reused(f1, beat(3), &resp) {
		t.Fatal("reused during a leadership confirmation")
	}
	h.endConfirm()
	if !h.reused(f1, beat(3), &resp) {
		t.Fatal("not reused after the confirmation ended")
	}

	h.answered(f1, time.Now(), beat(3), &raft.AppendEntriesResponse{Term: 4}, nil)
	if h.reused(f1, beat(3), &resp) {
		t.Fatal("reused after the follower refused a heartbeat")
	}
	h.answeredFrame(f1, time.Now(), 3, ok, nil)
	h.answered(f1, time.Now(), beat(3), &raft.AppendEntriesResponse{}, errors.New("connection refused"))
	if h.reused(f1, beat(3), &resp) {
		t.Fatal("reused after a heartbeat failed")
	}
	h.answeredFrame(f1, time.Now(), 3, ok, nil)
	h.answeredFrame(f1, time.Now(), 3, nil, errors.New("i/o timeout"))
	if h.reused(f1, beat(3), &resp) {
		t.Fatal("reused after a frame failed")
	}

	// Only a frame's answer answers a heartbeat: frames go every tick,
	// while an answer sent one by one, a heartbeat's or a replication's,
	// says nothing of when the follower hears next. A replication the
	// follower took keeps the term's frame answer reusable; one it
	// refused (a log mismatch) does not end that reuse either.
	h = newHeartbeats(300*time.Millisecond, time.Second)
	h.answered(f2, time.Now(), beat(3), ok, nil)
	h.answered(f2, time.Now(), entries, &raft.AppendEntriesResponse{Term: 3, LastLog: 9, Success: true}, nil)
	if h.reused(f2, beat(3), &resp) {
		t.Fatal("an answer sent one by one reused as a heartbeat's answer")
	}
	h.answeredFrame(f2, time.Now(), 3, ok, nil)
	h.answered(f2, time.Now(), entries, &raft.AppendEntriesResponse{Term: 3, LastLog: 9, Success: true}, nil)
	if !h.reused(f2, beat(3), &resp) || !resp.Success {
		t.Fatal("a replication the follower took ended the reuse of a frame's answer")
	}
	h.answered(f2, time.Now(), entries, &raft.AppendEntriesResponse{Term: 3, LastLog: 8}, nil)
	if !h.reused(f2, beat(3), &resp) {
		t.Fatal("a refused replication ended reuse of an earlier answer")
	}
	h.answered(f2, time.Now(), entries, &raft.AppendEntriesResponse{}, errors.New("i/o timeout"))
	if h.reused(f2, beat(3), &resp) {
		t.Fatal("reused after a replication failed")
	}
	h.answeredFrame(f2, time.Now().Add(-400*time.Millisecond), 3, ok, nil)
	h.answered(f2, time.Now(), beat(3), ok, nil)
	if h.reused(f2, beat(3), &resp) {
		t.Fatal("a fresh answer sent one by one revived a frame's answer older than the reuse window")
	}

	// Nothing is reused from a leadership transfer's start until a
	// heartbeat timeout after it ended.
	h.answeredFrame(f2, time.Now(), 3, ok, nil)
	if !h.reused(f2, beat(3), &resp) {
		t.Fatal("fresh success not reused")
	}
	h.transferring()
	if h.reused(f2, beat(3), &resp) {
		t.Fatal("reused during a leadership transfer")
	}

	// An answer's age counts from when its request was sent.
	h = newHeartbeats(300*time.Millisecond, time.Second)
	h.answeredFrame(f1, time.Now().Add(-400*time.Millisecond), 3, ok, nil)
	if h.reused(f1, beat(3), &resp) {
		t.Fatal("reused the answer to a frame sent longer ago than the reuse window")
	}

	// A reused answer shares no memory with the answer it copies: raft
	// decodes each goroutine's next answer into the same struct.
	h = newHeartbeats(300*time.Millisecond, time.Second)
	decoded := &raft.AppendEntriesResponse{RPCHeader: raft.RPCHeader{ID: []byte("3"), Addr: []byte("127.0.0.1:1")}, Term: 3, Success: true}
	h.answeredFrame(f2, time.Now(), 3, ok, nil)
	h.answered(f2, time.Now(), entries, decoded, nil)
	if !h.reused(f2, beat(3), &resp) || resp.RPCHeader.ID != nil || resp.RPCHeader.Addr != nil {
		t.Fatalf("a reused answer carries the decoded header's slices: %+v", resp.RPCHeader)
	}

	h = newHeartbeats(15*time.Millisecond, 50*time.Millisecond)
	h.answeredFrame(f1, time.Now(), 3, ok, nil)
	time.Sleep(20 * time.Millisecond)
	if h.reused(f1, beat(3), &resp) {
		t.Fatal("an answer older than the reuse window was reused")
	}
}

// An idle replication probe the follower already took (same term, log
// position and commit index) is answered from its last answer while the
// follower answered something real within the reuse window, for at most
// probeReuseFor; anything that could mean the follower lost track ends it.
func TestHeartbeatsReuseAProbeOnlyAsSentBefore(t *testing.T) {
	beat := &raft.AppendEntriesRequest{Term: 3}
	probe := func(commit uint64) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 9, PrevLogTerm: 3, LeaderCommitIndex: commit}
	}
	ok := &raft.AppendEntriesResponse{Term: 3, Success: true, LastLog: 9}
	const f = raft.ServerID("2")
	var resp raft.AppendEntriesResponse

	h := newHeartbeats(300*time.Millisecond, time.Second)
	if h.reused(f, probe(9), &resp) {
		t.Fatal("a probe reused before one was sent")
	}
	h.answered(f, time.Now(), probe(9), ok, nil)
	if !h.reused(f, probe(9), &resp) || !resp.Success || resp.LastLog != 9 {
		t.Fatalf("the same probe was not answered from the last answer: %+v", resp)
	}
	if h.reused(f, probe(10), &resp) {
		t.Fatal("a probe with a new commit index was not sent")
	}
	if h.reused(f, &raft.AppendEntriesRequest{Term: 4, PrevLogEntry: 9, PrevLogTerm: 3, LeaderCommitIndex: 9}, &resp) {
		t.Fatal("a probe of another term was reused")
	}
	h.beginConfirm()
	if h.reused(f, probe(9), &resp) {
		t.Fatal("a probe reused during a leadership confirmation")
	}
	h.endConfirm()

	// The follower's last real answer must be fresh, as for heartbeats.
	h = newHeartbeats(300*time.Millisecond, time.Second)
	h.answered(f, time.Now().Add(-400*time.Millisecond), probe(9), ok, nil)
	if h.reused(f, probe(9), &resp) {
		t.Fatal("a probe reused with no real answer within the reuse window")
	}
	h.answered(f, time.Now(), beat, ok, nil)
	if !h.reused(f, probe(9), &resp) {
		t.Fatal("a probe not reused once a heartbeat's answer is fresh")
	}

	// At least one real probe every probeReuseFor.
	h = newHeartbeats(300*time.Millisecond, time.Second)
	h.answered(f, time.Now().Add(-probeReuseFor-time.Second), probe(9), ok, nil)
	h.answered(f, time.Now(), beat, ok, nil)
	if h.reused(f, probe(9), &resp) {
		t.Fatalf("a probe reused %v after the last one was sent", probeReuseFor)
	}

	// A failure, a refused heartbeat or a refused replication ends it.
	for name, end := range map[string]func(h *heartbeats){
		"error":        func(h *heartbeats) { h.answered(f, time.Now(), beat, nil, errors.New("connection reset")) },
		"refused beat": func(h *heartbeats) { h.answered(f, time.Now(), beat, &raft.AppendEntriesResponse{Term: 4}, nil) },
		"refused entries": func(h *heartbeats) {
			h.answered(f, time.Now(), probe(9), &raft.AppendEntriesResponse{Term: 3, LastLog: 5}, nil)
		},
	} {
		h = newHeartbeats(300*time.Millisecond, time.Second)
		h.answered(f, time.Now(), probe(9), ok, nil)
		end(h)
		h.answered(f, time.Now(), beat, ok, nil)
		if h.reused(f, probe(9), &resp) {
			t.Fatalf("a probe reused after %s", name)
		}
	}
}
