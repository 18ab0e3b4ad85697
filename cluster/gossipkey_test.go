package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// newGossipKey is a fresh AES-256 gossip key, base64 as in a key file.
func newGossipKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// writeKeyFile writes keys, one a line, to path, atomically (a key watch
// loop never reads half a file).
func writeKeyFile(t *testing.T, path string, keys ...string) string {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startKeyedNode starts node id with 1 shard, gossip encrypted with keys
// (none: plaintext), joining seed unless it is empty (then bootstrapping
// alone). A node that joins waits at most joinTimeout for its seed.
func startKeyedNode(t *testing.T, id int32, seed string, joinTimeout time.Duration, keys ...string) *testNode {
	t.Helper()
	cfg := gossipConfig(t, t.TempDir(), id, 1)
	if len(keys) > 0 {
		cfg.GossipKeyFile = writeKeyFile(t, filepath.Join(t.TempDir(), "gossip.keys"), keys...)
	}
	if seed != "" {
		cfg.BootstrapExpect, cfg.Join, cfg.JoinTimeout = 0, []string{seed}, joinTimeout
	}
	logs := capture(t, &cfg)
	tn := startTestNode(t, cfg)
	tn.logs = logs
	return tn
}

// seesEachOther reports whether every node lists every other as a broker.
func seesEachOther(nodes ...*testNode) bool {
	var want []int32
	for _, tn := range nodes {
		want = append(want, tn.ID())
	}
	slices.Sort(want)
	for _, tn := range nodes {
		got := brokerIDs(tn.Node)
		for _, id := range want {
			if !slices.Contains(got, id) {
				return false
			}
		}
	}
	return true
}

// TestMalformedGossipKeyFileRefusesStartup: a key file that is not base64,
// holds a key of another length or no key at all stops the node with an
// error naming the file and the line; blank lines and comments are fine.
func TestMalformedGossipKeyFileRefusesStartup(t *testing.T) {
	good := newGossipKey(t)
	short := base64.StdEncoding.EncodeToString([]byte("only ten b"))
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not base64", good + "\nnot*base64!\n", "line 2: not a base64 key"},
		{"wrong length", "# rotation of May\n\n" + short + "\n" + good, "line 3: a key of 10 bytes"},
		{"no key", "# nothing yet\n\n", "no key in it"},
		{"empty", "", "no key in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gossip.keys")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := withFSMs(gossipConfig(t, t.TempDir(), 1, 1))
			cfg.GossipKeyFile = path
			n, err := NewNode(cfg)
			if err == nil {
				_ = n.Shutdown()
				t.Fatal("the node started")
			}
			if !errors.Is(err, ErrGossipKeyFile) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewNode: %v; want ErrGossipKeyFile naming %s and %q", err, path, tc.want)
			}
			if strings.Contains(err.Error(), "not*base64!") {
				t.Errorf("the error quotes the file's line (a secret): %v", err)
			}
		})
	}

	other := newGossipKey(t)
	keys, err := parseGossipKeys("f", []byte("# primary first\n"+good+"\r\n\n  "+other+"  \n"))
	if err != nil || len(keys) != 2 || base64.StdEncoding.EncodeToString(keys[0]) != good || base64.StdEncoding.EncodeToString(keys[1]) != other {
		t.Fatalf("parseGossipKeys = %d keys, %v; want the two keys in file order", len(keys), err)
	}
	if _, err := loadGossipKeys(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrGossipKeyFile) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestGossipKeyKeepsOutNodesWithoutIt: nodes with the same key form a
// cluster; a node without a key, or with another one, cannot join, and
// the node it tries to join logs each refusal at warn with its address.
func TestGossipKeyKeepsOutNodesWithoutIt(t *testing.T) {
	key := newGossipKey(t)
	n1 := startKeyedNode(t, 1, "", 0, key)
	n2 := startKeyedNode(t, 2, n1.GossipAddr(), 5*time.Second, key)
	eventually(t, 5*time.Second, "nodes 1 and 2 see each other", func() bool { return seesEachOther(n1, n2) })

	// Each gives up waiting for its seed after the join timeout.
	plain := startKeyedNode(t, 3, n1.GossipAddr(), time.Second)
	stranger := startKeyedNode(t, 4, n1.GossipAddr(), time.Second, newGossipKey(t))
	for _, tc := range []struct {
		tn    *testNode
		cause string
	}{
		{plain, "encryption is configured but remote state is not encrypted"},
		{stranger, "no installed keys could decrypt the message"},
	} {
		eventually(t, 5*time.Second, "node 1 logs the refusal of "+tc.cause, func() bool {
			return len(n1.logs.Lines("[WARN]", "gossip refused: the peer's encryption does not match this node's gossip keys", "remote=127.0.0.1:", tc.cause)) > 0
		})
		if got := len(tc.tn.logs.Lines("[WARN]", "gossip join refused")); got != 1 {
			t.Errorf("node %d logged its refused join %d times, want once", tc.tn.ID(), got)
		}
		if tc.tn.ClusterID() != "" || !slices.Equal(brokerIDs(tc.tn.Node), []int32{tc.tn.ID()}) {
			t.Errorf("node %d joined: cluster id %q, brokers %v", tc.tn.ID(), tc.tn.ClusterID(), brokerIDs(tc.tn.Node))
		}
	}
	for _, tn := range []*testNode{n1, n2} {
		if got := brokerIDs(tn.Node); !slices.Equal(got, []int32{1, 2}) {
			t.Errorf("node %d lists brokers %v, want [1 2]", tn.ID(), got)
		}
	}
}

// TestGossipKeyRotationKeepsNodesTogether rotates the key of a running
// cluster as gossipkey.go says, without restarts: add the new key second,
// move it first node by node, drop the old one. Midway a node whose file
// has the old key second joins a node whose primary is still the old key;
// no gossip is refused at any step; at the end a node with only the new
// key joins and one with only the old key is kept out.
func TestGossipKeyRotationKeepsNodesTogether(t *testing.T) {
	oldKey, newKey := newGossipKey(t), newGossipKey(t)
	n1 := startKeyedNode(t, 1, "", 0, oldKey)
	n2 := startKeyedNode(t, 2, n1.GossipAddr(), 5*time.Second, oldKey)
	eventually(t, 5*time.Second, "nodes 1 and 2 see each other", func() bool { return seesEachOther(n1, n2) })
	rewrite := func(tn *testNode, keys ...string) {
		t.Helper()
		writeKeyFile(t, tn.cfg.GossipKeyFile, keys...)
		tn.gossip.keys.check() // the watch loop would, within a second
		if got := tn.gossip.keys.ring.GetPrimaryKey(); base64.StdEncoding.EncodeToString(got) != keys[0] {
			t.Fatalf("node %d: primary not switched", tn.ID())
		}
		time.Sleep(300 * time.Millisecond) // a few gossip and probe rounds
	}

	rewrite(n1, oldKey, newKey)
	rewrite(n2, oldKey, newKey)
	rewrite(n1, newKey, oldKey)
	// Node 3 has the old key second; node 2's primary is still the old key.
	n3 := startKeyedNode(t, 3, n2.GossipAddr(), 5*time.Second, newKey, oldKey)
	eventually(t, 5*time.Second, "node 3 joins midway", func() bool { return seesEachOther(n1, n2, n3) })
	rewrite(n2, newKey, oldKey)
	// The last step through the watch loop.
	for _, tn := range []*testNode{n1, n2, n3} {
		writeKeyFile(t, tn.cfg.GossipKeyFile, newKey)
	}
	for _, tn := range []*testNode{n1, n2, n3} {
		eventually(t, 3*time.Second, "the watch loop reloads the file", func() bool { return len(tn.gossip.keys.ring.GetKeys()) == 1 })
		// The keyring changes before the reload is logged: wait for the
		// line, then hold it to one.
		reloaded := func() []string {
			return tn.logs.Lines("[INFO]", "gossip keys reloaded", "keys=1", "primary_key_id="+keyIDOf(t, newKey))
		}
		eventually(t, 3*time.Second, "the reload is logged", func() bool { return len(reloaded()) > 0 })
		if got := reloaded(); len(got) != 1 {
			t.Errorf("node %d: reload logged %d times: %q", tn.ID(), len(got), got)
		}
	}

	n4 := startKeyedNode(t, 4, n1.GossipAddr(), 5*time.Second, newKey)
	eventually(t, 5*time.Second, "a node with only the new key joins", func() bool { return seesEachOther(n1, n2, n3, n4) })
	for _, tn := range []*testNode{n1, n2, n3, n4} {
		if got := tn.logs.Lines("gossip refused"); len(got) > 0 {
			t.Errorf("node %d refused gossip during the rotation: %q", tn.ID(), got)
		}
		if got := tn.logs.Lines("gossip key file not reloaded"); len(got) > 0 {
			t.Errorf("node %d: %q", tn.ID(), got)
		}
	}
	old := startKeyedNode(t, 5, n1.GossipAddr(), time.Second, oldKey)
	if old.ClusterID() != "" || slices.Contains(brokerIDs(n1.Node), 5) {
		t.Error("a node with only the old key joined after the rotation")
	}
	eventually(t, 5*time.Second, "node 1 refuses the old key", func() bool {
		return len(n1.logs.Lines("[WARN]", "gossip refused", "no installed keys could decrypt the message")) > 0
	})
}

func keyIDOf(t *testing.T, b64 string) string {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return keyID(k)
}

// TestGossipRefusalsLogAtWarnOncePerPeer: memberlist's lines about gossip
// it could not decrypt become one warning per sender host and cause every
// gossipWarnInterval, naming the sender; memberlist's other lines stay
// out of a log that is not at debug.
func TestGossipRefusalsLogAtWarnOncePerPeer(t *testing.T) {
	var buf bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	w := newMemberlistLog(logger)
	write := func(line string) { _, _ = io.WriteString(w, line+"\n") }
	for range 3 {
		write("[ERR] memberlist: failed to receive: no installed keys could decrypt the message from=10.0.0.7:51234")
		write("[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=10.0.0.7:7946")
	}
	write("[ERR] memberlist: failed to receive: encryption is configured but remote state is not encrypted from=10.0.0.7:51240")
	write("[ERR] memberlist: failed to receive: no installed keys could decrypt the message from=10.0.0.8:40000")
	write("[ERR] memberlist: Failed to send ack: broken pipe from=10.0.0.9:7946")
	write("[DEBUG] memberlist: Stream connection from=10.0.0.9:1234")
	write("[DEBUG] memberlist: Failed to join 10.0.0.7:7946: no installed keys could decrypt the message")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"remote=10.0.0.7:51234 error=\"no installed keys could decrypt the message\"",
		"remote=10.0.0.7:51240 error=\"encryption is configured but remote state is not encrypted\"",
		"remote=10.0.0.8:40000 error=\"no installed keys could decrypt the message\"",
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		if !strings.Contains(l, "[WARN]") || !strings.Contains(l, "gossip refused") || !strings.Contains(l, want[i]) {
			t.Errorf("line %d: %s\nwant a warning with %s", i, l, want[i])
		}
	}

	// After the interval the next one says how many were left out.
	w.warns.Backdate(gossipWarnInterval)
	buf.Reset()
	write("[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=10.0.0.7:7946")
	if l := buf.String(); !strings.Contains(l, "suppressed=5") {
		t.Errorf("after the interval: %q, want suppressed=5", l)
	}
}
