package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/kcoord/kcoord/cluster/raftnet"
)

// This file is gossip encryption (Config.GossipKeyFile, --gossip-key-file):
// memberlist's AES-GCM, with a keyring read from a file, on every gossip
// packet and stream (GossipVerifyIncoming and GossipVerifyOutgoing: a node
// with a key neither sends nor accepts plaintext). It also routes
// memberlist's own log, so that a peer refused for its encryption shows at
// warn on the node that refuses it.
//
// # The key file
//
// One key a line, each the standard base64 of 16, 24 or 32 bytes (AES-128,
// -192 or -256), the form of Consul's gossip keys (`openssl rand -base64
// 32` makes one). Blank lines and lines starting with # are ignored. The
// first key is the primary: it encrypts everything this node sends. Every
// key of the file decrypts what it receives. A file that is not base64, has
// a key of another length, or holds no key stops Open with an error
// naming the file and line (ErrGossipKeyFile).
//
// The node re-reads the file every keyFileCheckInterval and applies a
// changed one to memberlist's keyring without a restart ("gossip keys
// reloaded", with the number of keys and the primary's id, the first bytes
// of its SHA-256); a changed file that does not parse is logged and the
// keys in use are kept. Encryption itself is switched on or off only by a
// restart.
//
// # Rotating the key
//
//  1. Add the new key as the second line of every node's file. Every node
//     still encrypts with the old key, and now also decrypts the new one.
//  2. Once every node has reloaded (its log says "gossip keys reloaded"
//     with keys=2) or restarted with both keys, move the new key to the
//     first line, node by node: each such node encrypts with the new key,
//     which every node decrypts, and still decrypts the old one, which the
//     others still send.
//  3. Once every node has the new key first (primary_key_id, the same on
//     every node, is the new key's), remove the old key's line.
//
// A step taken before the previous one reached every node leaves a node
// sending with a key that another lacks: that other node refuses its gossip
// and logs so at warn ("gossip refused: ..." with the sender's address),
// and failure detection soon takes the sender for dead there.

// ErrGossipKeyFile wraps the errors of reading and parsing a gossip key
// file.
var ErrGossipKeyFile = errors.New("cluster: gossip key file")

// keyFileCheckInterval is how often the key file is re-read.
const keyFileCheckInterval = time.Second

// gossipWarnInterval is how often a refusal for the same host and cause is
// logged: a peer with another key sends several packets a second.
const gossipWarnInterval = 10 * time.Second

// gossipKeys is the keyring of encrypted gossip and the file it comes
// from. The key watch loop calls check (tests too); memberlist reads the
// keyring on its own goroutines (it has its own lock).
type gossipKeys struct {
	path   string
	ring   *memberlist.Keyring
	logger hclog.Logger

	mu   sync.Mutex
	last []byte // the file as last applied or refused
}

// loadGossipKeys reads the key file, or returns nil without one. Called
// by Open before anything binds: a node does not start with keys it
// cannot read.
func loadGossipKeys(path string) (*gossipKeys, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGossipKeyFile, err)
	}
	keys, err := parseGossipKeys(path, b)
	if err != nil {
		return nil, err
	}
	ring, err := memberlist.NewKeyring(keys[1:], keys[0])
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrGossipKeyFile, path, err)
	}
	return &gossipKeys{path: path, ring: ring, logger: hclog.NewNullLogger(), last: b}, nil
}

// parseGossipKeys parses a key file's contents: its keys in file order,
// the primary first.
func parseGossipKeys(path string, b []byte) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// The line is a secret, maybe mistyped: it is not quoted.
		key, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%w %s line %d: not a base64 key: %w", ErrGossipKeyFile, path, i+1, err)
		}
		if err := memberlist.ValidateKey(key); err != nil {
			return nil, fmt.Errorf("%w %s line %d: a key of %d bytes; a gossip key is 16, 24 or 32 bytes (AES-128, -192 or -256)", ErrGossipKeyFile, path, i+1, len(key))
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w %s: no key in it (want one base64 key a line, the primary first)", ErrGossipKeyFile, path)
	}
	return keys, nil
}

// keyID names a key in logs without giving it away: the first bytes of its
// SHA-256, the same on every node that has the key.
func keyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// check re-reads the key file and, when it changed, makes the keyring
// hold exactly its keys with its first as the primary. A file that cannot
// be read or parsed keeps the keys in use (logged once per change). Any
// goroutine; the key watch loop calls it.
func (k *gossipKeys) check() {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, err := os.ReadFile(k.path)
	if err != nil {
		if k.last != nil {
			k.logger.Warn("gossip key file not reloaded; keeping the keys in use", "key_file", k.path, "error", err)
		}
		k.last = nil
		return
	}
	if bytes.Equal(b, k.last) {
		return
	}
	k.last = b
	keys, err := parseGossipKeys(k.path, b)
	if err == nil {
		err = applyKeys(k.ring, keys)
	}
	if err != nil {
		k.logger.Warn("gossip key file not reloaded; keeping the keys in use", "key_file", k.path, "error", err)
		return
	}
	k.logger.Info("gossip keys reloaded", "key_file", k.path, "keys", len(keys), "primary_key_id", keyID(keys[0]))
}

// applyKeys makes ring hold exactly keys, keys[0] as its primary: the new
// keys are added first, so that no message in flight finds its key gone
// before it is needed, and the primary is switched before the old keys go
// (memberlist never removes its primary).
func applyKeys(ring *memberlist.Keyring, keys [][]byte) error {
	for _, key := range keys {
		if err := ring.AddKey(key); err != nil {
			return err
		}
	}
	if err := ring.UseKey(keys[0]); err != nil {
		return err
	}
	for _, old := range ring.GetKeys() {
		if !containsKey(keys, old) {
			if err := ring.RemoveKey(old); err != nil {
				return err
			}
		}
	}
	return nil
}

func containsKey(keys [][]byte, key []byte) bool {
	for _, k := range keys {
		if bytes.Equal(k, key) {
			return true
		}
	}
	return false
}

// watchKeys re-reads the key file every keyFileCheckInterval until the
// node stops. Runs on its own goroutine, started by startGossip when the
// node has a key file.
func (g *gossip) watchKeys() {
	t := time.NewTicker(keyFileCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			g.keys.check()
		case <-g.n.stop:
			return
		}
	}
}

// keyMismatches are what memberlist's log lines and Join errors say when
// gossip's encryption does not match, and what that means, first match
// first: UDP packets that do not decrypt (plaintext ones do not either),
// a stream from a peer without a key to a node with one, a peer whose key
// is not in this node's keyring, a peer that encrypts to a node without a
// key.
var keyMismatches = []struct{ says, means string }{
	{"Decrypt packet failed", "the peer sends plaintext or encrypts with a key this node's key file lacks"},
	{"encryption is configured but remote state is not encrypted", "the peer sends plaintext: it has no gossip key file"},
	{"no installed keys could decrypt the message", "the peer encrypts with a key this node's key file lacks"},
	{"remote state is encrypted and encryption is not configured", "the peer encrypts and this node has no gossip key file"},
}

// keyMismatch says what a memberlist log line or error about gossip
// encryption that does not match means; "" for any other.
func keyMismatch(s string) string {
	for _, m := range keyMismatches {
		if strings.Contains(s, m.says) {
			return m.means
		}
	}
	return ""
}

// memberlistLog is the writer of memberlist's log.Logger, which writes one
// line per call. memberlist logs every stream and packet it refuses for
// its encryption at [ERR], with the sender's address as "from=host:port";
// those lines become a warning on this node's gossip logger, at most one
// per sender host and cause every gossipWarnInterval (saying how many were
// left out). Everything else memberlist says goes, with its level, to the
// gossip logger when it logs debug, and nowhere otherwise (memberlist is
// chatty, and the refusals kcoord's delegates make are logged by them).
// memberlist's goroutines write to it.
type memberlistLog struct {
	logger hclog.Logger
	debug  io.Writer // nil unless logger logs debug
	warns  *raftnet.WarnLimiter
}

func newMemberlistLog(logger hclog.Logger) *memberlistLog {
	w := &memberlistLog{logger: logger, warns: raftnet.NewWarnLimiter(gossipWarnInterval)}
	if logger.IsDebug() {
		w.debug = logger.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true})
	}
	return w
}

func (w *memberlistLog) Write(p []byte) (int, error) {
	// "[ERR] memberlist: failed to receive: <cause> from=<addr>". A line
	// without a sender (memberlist's own failed Join, at debug) is not a
	// refusal by this node: joinLoop logs that one.
	cause, remote, received := strings.Cut(strings.TrimSpace(string(p)), " from=")
	means := keyMismatch(cause)
	if !received || means == "" {
		if w.debug != nil {
			return w.debug.Write(p)
		}
		return len(p), nil
	}
	if _, after, ok := strings.Cut(cause, "memberlist: "); ok {
		cause = after
	}
	cause = strings.TrimPrefix(strings.TrimPrefix(cause, "failed to receive: "), "Decrypt packet failed: ")
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	ok, left := w.warns.Allow(host + "\x00" + cause)
	if !ok {
		return len(p), nil
	}
	kv := []any{"remote", remote, "error", cause, "meaning", means}
	if left > 0 {
		kv = append(kv, "suppressed", left)
	}
	w.logger.Warn("gossip refused: the peer's encryption does not match this node's gossip keys", kv...)
	return len(p), nil
}
