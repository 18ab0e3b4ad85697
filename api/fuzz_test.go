package api

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/fsm"
	"github.com/kcoord/kcoord/groups"
	"github.com/kcoord/kcoord/transport"
)

// FuzzRequestHandlers runs a sequence of fuzzed requests through the real
// handlers over a fresh single-shard node (a coordinator over a
// groups.MemLog and a topic registry in memory, as the handler tests use).
//
// The input is a sequence of records: api key (1 byte), version (1 byte),
// body length (2 bytes, big endian), then the body, which kmsg decodes at
// that version (a record of a key or version not served, or whose body
// does not decode, is skipped: refusing those is the transport's job, and
// FuzzFrameDecoding's). A member id written "@N" is replaced by the N-th
// member id the coordinator handed out in a JoinGroup answer, so a
// sequence can join, sync, heartbeat and commit as the member it became.
//
// Each request runs on its own goroutine, as on its own connection; one
// that has not answered within fuzzSettle is left waiting (a JoinGroup
// waiting for the other members) while the next starts. Properties: no
// handler panics or logs an error (an unmapped error or a recovered
// panic); every answer is a response of the request's key that encodes
// and decodes again with kmsg at the request's version to the same bytes;
// a handler returns an error only once its connection closed; every
// waiting handler returns soon after its connection closes; and afterwards
// the node still answers about every group the sequence named.
func FuzzRequestHandlers(f *testing.F) {
	served := servedVersions(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		n := newFuzzNode(t)
		defer n.stop()
		var reqs []kmsg.Request
		for _, r := range fuzzRecords(input) {
			v, ok := served[r.key]
			if !ok || r.version < v.min || r.version > v.max {
				continue
			}
			req := kmsg.RequestForKey(r.key)
			req.SetVersion(r.version)
			if req.ReadFrom(bytes.Clone(r.body)) != nil {
				continue
			}
			reqs = append(reqs, req)
		}
		n.run(t, reqs)
	})
}

// fuzzSettle is how long a request is given to answer before the next
// starts beside it.
const fuzzSettle = 5 * time.Millisecond

// fuzzMaxRequests bounds the requests of one input, so that one input
// cannot wait for long.
const fuzzMaxRequests = 16

type versionRange struct{ min, max int16 }

// servedVersions is the table Register gives the mux, ApiVersions (served
// by transport) left out. It fails if a key is served that handlerFor
// does not dispatch.
func servedVersions(tb testing.TB) map[int16]versionRange {
	mux := transport.NewMux()
	New(Config{}, fakeCluster{}, newMemTopics(), nil).Register(mux)
	h := &Handlers{}
	out := make(map[int16]versionRange)
	for _, k := range mux.Versions() {
		if k.ApiKey == 18 {
			continue
		}
		if handlerFor(h, k.ApiKey) == nil {
			tb.Fatalf("%s is served but the fuzz target does not dispatch it", kmsg.NameForKey(k.ApiKey))
		}
		out[k.ApiKey] = versionRange{k.MinVersion, k.MaxVersion}
	}
	return out
}

// handlerFor returns h's handler of key, as Register routes it.
func handlerFor(h *Handlers, key int16) transport.HandlerFunc {
	return map[int16]transport.HandlerFunc{
		1: h.fetch, 2: h.listOffsets, 3: h.metadata, 8: h.offsetCommit, 9: h.offsetFetch,
		10: h.findCoordinator, 11: h.joinGroup, 12: h.heartbeat, 13: h.leaveGroup,
		14: h.syncGroup, 15: h.describeGroups, 16: h.listGroups, 19: h.createTopics,
		20: h.deleteTopics, 42: h.deleteGroups, 47: h.offsetDelete,
		68: h.consumerGroupHeartbeat, 69: h.consumerGroupDescribe,
	}[key]
}

type fuzzRecord struct {
	key, version int16
	body         []byte
}

// fuzzRecords splits input into at most fuzzMaxRequests records; a body
// longer than what is left takes what is left.
func fuzzRecords(input []byte) []fuzzRecord {
	var out []fuzzRecord
	for len(input) >= 4 && len(out) < fuzzMaxRequests {
		r := fuzzRecord{key: int16(input[0]), version: int16(input[1])}
		size := int(binary.BigEndian.Uint16(input[2:]))
		input = input[4:]
		size = min(size, len(input))
		r.body, input = input[:size], input[size:]
		out = append(out, r)
	}
	return out
}

// errorLog fails the exec on any line logged at error.
type errorLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *errorLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSpace(string(p)))
	return len(p), nil
}

func (l *errorLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) > 0 {
		t.Fatalf("logged at error:\n%s", strings.Join(l.lines, "\n"))
	}
}

// fuzzNode is one fresh node of the fuzz target: handlers over one active
// shard, and the requests waiting for their answers.
type fuzzNode struct {
	h       *Handlers
	coord   *groups.Coordinator
	errs    *errorLog
	ctx     context.Context // the connections'; cancelled when they close
	cancel  context.CancelFunc
	results chan fuzzResult
	members []string // member ids handed out, in order
	groups  []string // group ids the requests named
}

type fuzzResult struct {
	i     int
	req   kmsg.Request
	resp  kmsg.Response
	err   error
	panic string // with the stack
}

func newFuzzNode(t *testing.T) *fuzzNode {
	errs := new(errorLog)
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: errs})
	gcfg := groups.DefaultConfig()
	gcfg.InitialRebalanceDelay = 0
	gcfg.MinSessionTimeout = time.Millisecond
	gcfg.Logger = logger
	topics := newMemTopics(fsm.Topic{Name: "t", ID: [16]byte{1}, Partitions: 4})
	gcfg.Topics = topics
	log := groups.NewMemLog()
	c, err := groups.NewCoordinator(gcfg, 0, log, log.FSM)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Activate(log.Epoch()); err != nil {
		t.Fatal(err)
	}
	h := New(Config{NodeID: 1,
		MaxFetchWait: time.Millisecond, Logger: logger},
		fakeCluster{}, topics, []Shard{{Coordinator: c}})
	ctx, cancel := context.WithCancel(context.Background())
	return &fuzzNode{h: h, coord: c, errs: errs, ctx: ctx, cancel: cancel, results: make(chan fuzzResult, fuzzMaxRequests)}
}

func (n *fuzzNode) stop() {
	n.cancel()
	n.coord.Stop()
	n.coord.Deactivate()
}

// run sends reqs in order, then closes the connections and checks that
// every handler returned and the node still answers.
func (n *fuzzNode) run(t *testing.T, reqs []kmsg.Request) {
	pending := make(map[int]bool)
	for i, req := range reqs {
		n.substituteMembers(req)
		n.noteGroups(req)
		pending[i] = true
		n.start(i, req)
		settle := time.NewTimer(fuzzSettle)
	wait:
		for pending[i] {
			select {
			case r := <-n.results:
				delete(pending, r.i)
				n.check(t, r, false)
			case <-settle.C:
				break wait
			}
		}
		settle.Stop()
	}
	n.cancel() // the connections close
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for len(pending) > 0 {
		select {
		case r := <-n.results:
			delete(pending, r.i)
			n.check(t, r, true)
		case <-deadline.C:
			t.Fatalf("%d handlers still running 5 s after their connections closed", len(pending))
		}
	}
	n.checkStillAnswers(t)
	n.errs.check(t)
}

// start runs req's handler on a goroutine of its own, as a connection's.
func (n *fuzzNode) start(i int, req kmsg.Request) {
	fn := handlerFor(n.h, req.Key())
	rc := &transport.RequestContext{ConnID: uint64(i + 1), ClientID: "fuzz", ClientHost: "/127.0.0.1"}
	go func() {
		r := fuzzResult{i: i, req: req}
		defer func() {
			if p := recover(); p != nil {
				r.panic = fmt.Sprintf("%v\n%s", p, debug.Stack())
			}
			n.results <- r
		}()
		r.resp, r.err = fn(n.ctx, rc, req)
	}()
}

// check checks one answer; closed says whether the connections were closed
// before it arrived.
func (n *fuzzNode) check(t *testing.T, r fuzzResult, closed bool) {
	t.Helper()
	name := fmt.Sprintf("%s v%d (request %d)", kmsg.NameForKey(r.req.Key()), r.req.GetVersion(), r.i)
	switch {
	case r.panic != "":
		t.Fatalf("%s: handler panicked: %s", name, r.panic)
	case r.err != nil:
		if !closed && n.ctx.Err() == nil {
			t.Fatalf("%s: handler failed on an open connection: %v", name, r.err)
		}
		return
	}
	checkWellFormed(t, name, r.req, r.resp)
	if jr, ok := r.resp.(*kmsg.JoinGroupResponse); ok && jr.MemberID != "" && !contains(n.members, jr.MemberID) {
		n.members = append(n.members, jr.MemberID)
	}
}

// checkWellFormed checks that resp answers req and survives the trip the
// transport and a client give it: encoded at req's version, decoded by kmsg
// and encoded again to the same bytes.
func checkWellFormed(t *testing.T, name string, req kmsg.Request, resp kmsg.Response) {
	t.Helper()
	if resp == nil {
		t.Fatalf("%s: nil response", name)
	}
	if resp.Key() != req.Key() {
		t.Fatalf("%s: answered with a %s response", name, kmsg.NameForKey(resp.Key()))
	}
	resp.SetVersion(req.GetVersion())
	wire := resp.AppendTo(nil)
	again := req.ResponseKind()
	again.SetVersion(req.GetVersion())
	if err := again.ReadFrom(wire); err != nil {
		t.Fatalf("%s: the response does not decode: %v", name, err)
	}
	if re := again.AppendTo(nil); !bytes.Equal(re, wire) {
		t.Fatalf("%s: the response decodes to another one:\n% x\n% x", name, wire, re)
	}
}

// substituteMembers replaces each member id "@N" of req by the N-th member
// id handed out, when there is one.
func (n *fuzzNode) substituteMembers(req kmsg.Request) {
	sub := func(id *string) {
		if len(*id) == 2 && (*id)[0] == '@' && (*id)[1] >= '0' && (*id)[1] <= '9' {
			if i := int((*id)[1] - '0'); i < len(n.members) {
				*id = n.members[i]
			}
		}
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		sub(&r.MemberID)
	case *kmsg.SyncGroupRequest:
		sub(&r.MemberID)
		for i := range r.GroupAssignment {
			sub(&r.GroupAssignment[i].MemberID)
		}
	case *kmsg.HeartbeatRequest:
		sub(&r.MemberID)
	case *kmsg.LeaveGroupRequest:
		sub(&r.MemberID)
		for i := range r.Members {
			sub(&r.Members[i].MemberID)
		}
	case *kmsg.OffsetCommitRequest:
		sub(&r.MemberID)
	}
}

// noteGroups remembers the group ids req names.
func (n *fuzzNode) noteGroups(req kmsg.Request) {
	var ids []string
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		ids = []string{r.Group}
	case *kmsg.SyncGroupRequest:
		ids = []string{r.Group}
	case *kmsg.HeartbeatRequest:
		ids = []string{r.Group}
	case *kmsg.LeaveGroupRequest:
		ids = []string{r.Group}
	case *kmsg.OffsetCommitRequest:
		ids = []string{r.Group}
	case *kmsg.OffsetDeleteRequest:
		ids = []string{r.Group}
	case *kmsg.OffsetFetchRequest:
		ids = []string{r.Group}
		for _, g := range r.Groups {
			ids = append(ids, g.Group)
		}
	case *kmsg.DescribeGroupsRequest:
		ids = r.Groups
	case *kmsg.DeleteGroupsRequest:
		ids = r.Groups
	}
	for _, id := range ids {
		if len(n.groups) < 32 && !contains(n.groups, id) {
			n.groups = append(n.groups, id)
		}
	}
}

// checkStillAnswers asks, on a new connection, about every group the
// sequence named: each request must be answered within 5 s, well formed.
func (n *fuzzNode) checkStillAnswers(t *testing.T) {
	t.Helper()
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Version, describe.Groups = 5, n.groups
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	for _, g := range n.groups {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		fetch.Groups = append(fetch.Groups, rg)
	}
	list := kmsg.NewPtrListGroupsRequest()
	list.Version = 4
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	for _, req := range []kmsg.Request{describe, fetch, list, meta} {
		done := make(chan fuzzResult, 1)
		go func() {
			r := fuzzResult{req: req}
			defer func() {
				if p := recover(); p != nil {
					r.panic = fmt.Sprintf("%v\n%s", p, debug.Stack())
				}
				done <- r
			}()
			rc := &transport.RequestContext{ConnID: 1000, ClientID: "after", ClientHost: "/127.0.0.1"}
			r.resp, r.err = handlerFor(n.h, req.Key())(context.Background(), rc, req)
		}()
		select {
		case r := <-done:
			name := "afterwards, " + kmsg.NameForKey(req.Key())
			if r.panic != "" || r.err != nil {
				t.Fatalf("%s: %v%s", name, r.err, r.panic)
			}
			checkWellFormed(t, name, req, r.resp)
		case <-time.After(5 * time.Second):
			t.Fatalf("afterwards, %s was not answered within 5 s", kmsg.NameForKey(req.Key()))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
