package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// testLogger returns an hclog.Logger writing to t.Log that goes quiet when
// the test ends (raft goroutines may log late). KCOORD_TEST_LOG sets the
// level (default info).
func testLogger(t testing.TB) hclog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop)
	level := hclog.Info
	if l := os.Getenv("KCOORD_TEST_LOG"); l != "" {
		level = hclog.LevelFromString(l)
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: w, Level: level})
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Helper()
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// kvFSM is a test FSM: commands are "set <key> <value>" (response: the
// previous value) and "fail <message>" (response: an error).
type kvFSM struct {
	mu       sync.Mutex
	data     map[string]string
	applied  int
	restores int
}

func newKVFSM() *kvFSM { return &kvFSM{data: map[string]string{}} }

func (f *kvFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied++
	op, rest, _ := strings.Cut(string(l.Data), " ")
	switch op {
	case "set":
		k, v, _ := strings.Cut(rest, " ")
		prev := f.data[k]
		f.data[k] = v
		return prev
	case "fail":
		return errors.New(rest)
	}
	return fmt.Errorf("unknown command %q", l.Data)
}

func (f *kvFSM) get(k string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.data[k]
	return v, ok
}

func (f *kvFSM) snapshotData() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.data)
}

func (f *kvFSM) restoreCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restores
}

func (f *kvFSM) Snapshot() (raft.FSMSnapshot, error) {
	return kvSnapshot(f.snapshotData()), nil
}

func (f *kvFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data := map[string]string{}
	if err := json.NewDecoder(rc).Decode(&data); err != nil {
		return err
	}
	f.mu.Lock()
	f.data = data
	f.restores++
	f.mu.Unlock()
	return nil
}

type kvSnapshot map[string]string

func (s kvSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(map[string]string(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s kvSnapshot) Release() {}

// leadershipLog records OnLeadership calls.
type leadershipLog struct {
	mu     sync.Mutex
	events map[int32][]bool
}

func (l *leadershipLog) record(shard int32, isLeader bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.events == nil {
		l.events = map[int32][]bool{}
	}
	l.events[shard] = append(l.events[shard], isLeader)
}

func (l *leadershipLog) get(shard int32) []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.events[shard]...)
}

// testNode is a Node with its FSMs and leadership log.
type testNode struct {
	*Node
	cfg  Config
	fsms map[int32]*kvFSM
	lead *leadershipLog
}

func (tn *testNode) fsm(shard int32) *kvFSM { return tn.fsms[shard] }

// testConfig is a small, fast node config in dir.
func testConfig(t testing.TB, dir string, nodeID int32, shards int32) Config {
	cfg := DefaultConfig()
	cfg.NodeID = nodeID
	cfg.DataDir = dir
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.KafkaAddr = fmt.Sprintf("127.0.0.1:%d", 19000+nodeID)
	cfg.Shards = shards
	cfg.Logger = testLogger(t).With("node", nodeID)
	return cfg
}

// startTestNode starts a node with kvFSMs; it is shut down at cleanup.
func startTestNode(t testing.TB, cfg Config) *testNode {
	t.Helper()
	tn := &testNode{fsms: map[int32]*kvFSM{}, lead: &leadershipLog{}}
	var mu sync.Mutex
	cfg.NewShardFSM = func(shard int32) raft.FSM {
		f := newKVFSM()
		mu.Lock()
		tn.fsms[shard] = f
		mu.Unlock()
		return f
	}
	cfg.NewMetaFSM = func() raft.FSM {
		f := newKVFSM()
		mu.Lock()
		tn.fsms[MetaShard] = f
		mu.Unlock()
		return f
	}
	cfg.OnLeadership = tn.lead.record
	n, err := NewNode(cfg)
	if err != nil {
		t.Fatalf("NewNode: %v", err)
	}
	tn.Node, tn.cfg = n, cfg
	t.Cleanup(func() { _ = n.Shutdown() })
	return tn
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
