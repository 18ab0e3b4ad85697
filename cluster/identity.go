package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	uuid "github.com/hashicorp/go-uuid"

	"github.com/kcoord/kcoord/release"
)

// identityFile, in DataDir, records who the data dir belongs to: the node id,
// the shard count, the log store kind and the cluster id. Start writes it
// before any shard's Raft runs on a fresh data dir, so its absence means the
// data dir is empty: new, or wiped (see ErrEmptyDataDirVoter).
const identityFile = "node.json"

// identityVersion is the version of node.json this code writes.
//
//   - 1: version, node_id, shards, log_store.
//
//   - 2: adds cluster_id and awaiting_peers (both omitted when empty).
//     Later version-2 files may also hold proposal, view and agreement (a
//     node's part in a multi-node bootstrap, omitted when empty); a release
//     that does not know them ignores them and drops them when it rewrites
//     the file, which only costs the recovery they allow (see
//     Node.participantSeat).
//
//   - 3: log_store "node" means the write-ahead log in DataDir/wal (in
//     versions 1 and 2 it meant the bolt file DataDir/raft.db, which this
//     code imports into the log and removes). A node rewrites an older
//     file as version 3 before it imports, so a kcoord that knows only
//     version 2 refuses the data dir instead of starting with a new, empty
//     raft.db: every shard would have forgotten its term and vote, and
//     could vote twice in one term.
//
//   - 4: adds features, the feature levels the cluster finalized (see
//     features.go), written only once a level above release.Level1 is
//     finalized: release 0.1.0 refuses version 4, so a data dir a
//     finalized cluster wrote cannot be opened by a binary too old for
//     it, and until then the file stays version 3, which 0.1.0 opens (an
//     upgraded node can go back).
//
// A version-1 file loads as one without a cluster id: the node adopts the id
// of the cluster it belongs to (see Node.adoptFromPeers), and the file is
// rewritten when that happens. A file of a newer version is refused: it may
// mean something this code does not know.
const identityVersion = 3

// identityVersionFeatures is the version of a node.json that records
// finalized feature levels, and the newest this code reads.
const identityVersionFeatures = 4

// identity is the content of node.json.
type identity struct {
	Version int   `json:"version"`
	NodeID  int32 `json:"node_id"`
	// Shards is the cluster's shard count, written when the data dir is
	// initialised (shardcount.go): a node started with the count unset
	// runs this one, so an upgrade that changes DefaultShards keeps it.
	Shards int32 `json:"shards"`
	// LogStore is LogStoreNode or LogStoreShard; empty (written before the
	// choice existed) means LogStoreShard.
	LogStore string `json:"log_store,omitempty"`
	// ClusterID is the id of the cluster this data dir belongs to (a UUID):
	// written when the node bootstraps a cluster or adopts the id of the
	// cluster it joined. Empty: not known yet.
	ClusterID string `json:"cluster_id,omitempty"`
	// AwaitingPeers is set when the data dir was initialised before any
	// seed could confirm that this node id holds no seat (is no voter) in
	// the seeds' cluster: no Join was given, or no seed answered within
	// JoinTimeout. Until that is confirmed, or the node bootstraps a cluster
	// itself, or shows with Proposal that it took part in the bootstrap that
	// gave it its seat, it adopts no cluster id that lists it as a voter, and
	// its Raft accepts no connection that names a cluster (see
	// Mux.SetClusterPending).
	// The flag survives restarts, so a wiped node that could not ask its
	// seeds stays unable to vote.
	AwaitingPeers bool `json:"awaiting_peers,omitempty"`
	// Proposal is the cluster id this node proposes for a multi-node
	// bootstrap (BootstrapExpect > 1), recorded before the node first
	// gossips it and reused after a restart for as long as the node has not
	// bootstrapped. A node that restarts without Raft state can show with
	// it that it took part in the agreement that placed it (a wiped data
	// dir has lost it): see Node.participantSeat.
	Proposal string `json:"proposal,omitempty"`
	// View and Agreement are the sorted node ids and the digest (see
	// agreementDigest) of the bootstrap agreement this node acted on,
	// recorded before it writes any shard's configuration. The node keeps
	// gossiping them with its proposal, across restarts, so that a peer of
	// the same agreement that crashed before it bootstrapped its own shards
	// can still show it took part.
	View      []int32 `json:"view,omitempty"`
	Agreement string  `json:"agreement,omitempty"`
	// Features is the feature levels the cluster finalized, as this node
	// last learned them from its replica of the metadata group (version
	// 4; empty while nothing above release.Level1 is finalized). Open
	// refuses to start on a level this binary does not support.
	Features map[string]int16 `json:"features,omitempty"`
}

// version is the node.json version id is written as: 4 when it records
// finalized levels, else identityVersion.
func (id identity) version() int {
	if len(id.Features) > 0 {
		return identityVersionFeatures
	}
	return identityVersion
}

// equal reports whether two identities say the same.
func (id identity) equal(o identity) bool {
	return id.Version == o.Version && id.NodeID == o.NodeID && id.Shards == o.Shards && id.LogStore == o.LogStore &&
		id.ClusterID == o.ClusterID && id.AwaitingPeers == o.AwaitingPeers &&
		id.Proposal == o.Proposal && id.Agreement == o.Agreement && slices.Equal(id.View, o.View) &&
		maps.Equal(id.Features, o.Features)
}

// readIdentity returns the identity recorded in dataDir, and whether there was
// one.
func readIdentity(dataDir string) (identity, bool, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, identityFile))
	if errors.Is(err, fs.ErrNotExist) {
		return identity{}, false, nil
	}
	if err != nil {
		return identity{}, false, fmt.Errorf("cluster: read identity: %w", err)
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil {
		return identity{}, false, fmt.Errorf("cluster: parse %s: %w", identityFile, err)
	}
	if id.Version > identityVersionFeatures {
		return identity{}, false, fmt.Errorf("cluster: %s has version %d; this kcoord (%s) reads versions up to %d (was the data dir written by a newer kcoord?)",
			filepath.Join(dataDir, identityFile), id.Version, release.Version, identityVersionFeatures)
	}
	return id, true, nil
}

// writeIdentity records id in dataDir durably (write, fsync, rename, fsync
// the directory), as the version its content needs (identity.version).
func writeIdentity(dataDir string, id identity) error {
	id.Version = id.version()
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dataDir, identityFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("cluster: write identity: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dataDir, identityFile))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cluster: write identity: %w", err)
	}
	if d, err := os.Open(dataDir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// newClusterID returns a fresh random cluster id (a version-4 UUID string).
func newClusterID() (string, error) {
	id, err := uuid.GenerateUUID()
	if err != nil {
		return "", fmt.Errorf("cluster: generate cluster id: %w", err)
	}
	return id, nil
}

// shardDir is where a shard keeps its Raft log, stable store and snapshots.
func shardDir(dataDir string, shard int32) string {
	if shard == MetaShard {
		return filepath.Join(dataDir, "meta")
	}
	return filepath.Join(dataDir, "shards", strconv.Itoa(int(shard)))
}

// ClusterID is the id of the cluster this node belongs to, as its data dir
// records it: set when the node bootstraps a cluster or adopts the id of
// the cluster it joined; "" until then (a fresh node that has not joined
// yet, or a data dir from before cluster ids until the cluster mints one).
// Any goroutine may call it; it does not block.
func (n *Node) ClusterID() string {
	id, _ := n.clusterID.Load().(string)
	return id
}

// AdoptClusterID records id as this node's cluster id when it learned it
// other than through gossip, e.g. from the stamp in the metadata FSM. The id
// the data dir records already: nothing to do. Another id than the recorded
// one: ErrClusterIDMismatch, and nothing changes. No id recorded yet: id is
// written to node.json (with fsync) before AdoptClusterID returns, and used
// from then on by gossip (asynchronously) and by Raft connections. Any
// goroutine may call it, an FSM's Apply included: it waits on neither Raft
// nor gossip.
func (n *Node) AdoptClusterID(id string) error {
	if id == "" {
		return fmt.Errorf("cluster: AdoptClusterID: empty cluster id")
	}
	if n.closed.Load() {
		return ErrShutdown
	}
	return n.setClusterID(id, true)
}

// setClusterID makes id this node's cluster id: in memory (ClusterID, the
// mux, gossip) and, when persist, in node.json. It refuses a different id
// than the one recorded with ErrClusterIDMismatch.
func (n *Node) setClusterID(id string, persist bool) error {
	n.idMu.Lock()
	defer n.idMu.Unlock()
	if cur := n.ident.ClusterID; cur != "" && cur != id {
		return fmt.Errorf("%w: %s records cluster %s, not %s", ErrClusterIDMismatch, n.cfg.DataDir, cur, id)
	}
	changed := n.ClusterID() != id
	prev := n.ident
	n.ident.ClusterID, n.ident.AwaitingPeers = id, false
	if persist {
		if err := n.persistIdentityLocked(); err != nil {
			n.ident = prev // not recorded: a retry must try again
			return err
		}
	}
	if changed {
		n.clusterID.Store(id)
		n.mux.SetClusterID(id)
		if g := n.gossip; g != nil {
			g.purgeForeign()
			g.poke() // the cluster loop re-gossips the meta
		}
	}
	return nil
}

// persistIdentity writes node.json if it differs from what the file holds.
func (n *Node) persistIdentity() error {
	n.idMu.Lock()
	defer n.idMu.Unlock()
	return n.persistIdentityLocked()
}

func (n *Node) persistIdentityLocked() error {
	want := n.ident
	want.Version = want.version()
	if want.equal(n.onDisk) {
		return nil
	}
	if err := writeIdentity(n.cfg.DataDir, want); err != nil {
		return err
	}
	n.onDisk = want
	return nil
}

// awaitingPeers reports whether the data dir still awaits the seeds'
// confirmation that this node id holds no seat in their cluster.
func (n *Node) awaitingPeers() bool {
	n.idMu.Lock()
	defer n.idMu.Unlock()
	return n.ident.AwaitingPeers
}

// setAwaitingPeers records (and persists, if node.json exists) whether the
// data dir awaits that confirmation.
func (n *Node) setAwaitingPeers(awaiting bool) error {
	n.idMu.Lock()
	defer n.idMu.Unlock()
	n.ident.AwaitingPeers = awaiting && n.ident.ClusterID == ""
	if n.onDisk.equal(identity{}) {
		return nil // Start writes it
	}
	return n.persistIdentityLocked()
}

// setProposal records (in memory; the caller persists node.json) the
// bootstrap proposal this node takes part with, "" for none.
func (n *Node) setProposal(proposal string) {
	n.idMu.Lock()
	defer n.idMu.Unlock()
	n.ident.Proposal = proposal
}

// bootRecord is this node's part in a multi-node bootstrap as node.json
// records it: its proposal and, once it acted on an agreement, the
// agreement's view and digest.
func (n *Node) bootRecord() (proposal string, view []int32, agreement string) {
	n.idMu.Lock()
	defer n.idMu.Unlock()
	return n.ident.Proposal, slices.Clone(n.ident.View), n.ident.Agreement
}

// recordAgreement records the view and digest of the bootstrap agreement
// this node acts on, and writes node.json when persist. A failed write
// keeps the record in memory (it is gossiped all the same, and the next
// write of node.json carries it).
func (n *Node) recordAgreement(view []int32, digest string, persist bool) error {
	n.idMu.Lock()
	defer n.idMu.Unlock()
	n.ident.View, n.ident.Agreement = slices.Clone(view), digest
	if !persist {
		return nil
	}
	return n.persistIdentityLocked()
}
