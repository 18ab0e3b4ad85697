package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// nodeMeta is what every node gossips about itself (memberlist node meta,
// at most 512 bytes).
type nodeMeta struct {
	ID    int32  `json:"id"`
	Kafka string `json:"kafka"`
	Raft  string `json:"raft"`
	// HasState is set once the node's shards hold Raft state (bootstrapped,
	// or restarted with data): the cluster exists, nobody bootstraps again.
	HasState bool `json:"state"`
	// Expect is the node's --bootstrap-expect.
	Expect int `json:"expect"`
}

// leaderMsg is a gossip broadcast: node leads shard as of term.
type leaderMsg struct {
	Shard int32       `json:"s"`
	Entry leaderEntry `json:"e"`
}

// gossip runs memberlist for a Node: membership (Brokers, raft addresses)
// and the leader table. memberlist calls the delegate methods on its own
// goroutines.
type gossip struct {
	n       *Node
	ml      *memberlist.Memberlist
	queue   *memberlist.TransmitLimitedQueue
	logger  hclog.Logger
	changed chan struct{} // poked on membership changes (bootstrap waits on it)

	// known holds the last meta of every live node, from memberlist's
	// events (reading memberlist's own node list races with its updates).
	mu    sync.Mutex
	known map[string]nodeMeta // by memberlist node name
}

// startGossip creates the memberlist and joins the seeds (best effort: a
// node that finds no seed yet keeps retrying in the background).
func (n *Node) startGossip() error {
	cfg := n.cfg
	host, portStr, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("cluster: gossip addr: %w", err)
	}
	port, _ := strconv.Atoi(portStr)
	g := &gossip{n: n, logger: n.logger.Named("gossip"), changed: make(chan struct{}, 1), known: make(map[string]nodeMeta)}
	mc := memberlist.DefaultLANConfig()
	mc.Name = "kcoord-" + strconv.Itoa(int(cfg.NodeID))
	mc.BindAddr, mc.BindPort = host, port
	if cfg.AdvertiseGossipAddr != "" {
		ah, ap, err := net.SplitHostPort(cfg.AdvertiseGossipAddr)
		if err != nil {
			return fmt.Errorf("cluster: advertise gossip addr: %w", err)
		}
		if ips, err := net.LookupIP(ah); err == nil && len(ips) > 0 {
			ah = ips[0].String()
		}
		mc.AdvertiseAddr = ah
		mc.AdvertisePort, _ = strconv.Atoi(ap)
	}
	mc.PushPullInterval = cfg.GossipPushPullInterval
	mc.GossipInterval = 100 * time.Millisecond
	mc.ProbeInterval = cfg.GossipProbeInterval
	mc.Delegate, mc.Events = g, g
	mc.Logger = log.New(io.Discard, "", 0)
	if g.logger.IsDebug() {
		mc.Logger = g.logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	}
	var created atomic.Pointer[memberlist.Memberlist]
	g.queue = &memberlist.TransmitLimitedQueue{RetransmitMult: 3, NumNodes: func() int {
		if ml := created.Load(); ml != nil {
			return ml.NumMembers()
		}
		return 1
	}}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("cluster: gossip: %w", err)
	}
	g.ml = ml
	created.Store(ml)
	n.gossip = g
	if len(cfg.Join) > 0 {
		go g.joinLoop(cfg.Join)
	}
	return nil
}

// joinLoop joins the seeds, retrying until one answers or the node stops.
func (g *gossip) joinLoop(seeds []string) {
	for delay := 100 * time.Millisecond; !g.n.closed.Load(); delay = min(2*delay, 2*time.Second) {
		if _, err := g.ml.Join(seeds); err == nil {
			return
		} else {
			g.logger.Debug("join failed; retrying", "seeds", seeds, "error", err)
		}
		time.Sleep(delay)
	}
}

// addr is this node's gossip address as others reach it.
func (g *gossip) addr() string {
	ln := g.ml.LocalNode()
	return net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
}

func (g *gossip) meta() nodeMeta {
	return nodeMeta{ID: g.n.cfg.NodeID, Kafka: g.n.cfg.KafkaAddr, Raft: g.n.mux.advertise, HasState: g.n.hasState.Load() || g.n.holdsShards(), Expect: g.n.cfg.BootstrapExpect}
}

// announce re-gossips this node's meta after it changed.
func (g *gossip) announce() {
	if err := g.ml.UpdateNode(time.Second); err != nil {
		g.logger.Warn("gossip meta update failed", "error", err)
	}
}

// broadcastLeader tells the cluster this node leads shard as of term.
func (g *gossip) broadcastLeader(shard int32, e leaderEntry) {
	b, _ := json.Marshal(leaderMsg{Shard: shard, Entry: e})
	g.queue.QueueBroadcast(simpleBroadcast(b))
}

// peers returns the live nodes' metas, this node's current one included.
func (g *gossip) peers() []nodeMeta {
	self := g.meta()
	out := []nodeMeta{self}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, nm := range g.known {
		if nm.ID != self.ID {
			out = append(out, nm)
		}
	}
	return out
}

func (g *gossip) poke() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// leave announces the departure and stops gossip.
func (g *gossip) leave(timeout time.Duration) {
	if err := g.ml.Leave(timeout); err != nil {
		g.logger.Warn("gossip leave failed", "error", err)
	}
	_ = g.ml.Shutdown()
}

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	b, _ := json.Marshal(g.meta())
	if len(b) > limit {
		g.logger.Error("gossip meta too large", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}

// NotifyMsg implements memberlist.Delegate: a leader broadcast.
func (g *gossip) NotifyMsg(b []byte) {
	var m leaderMsg
	if json.Unmarshal(b, &m) == nil && g.live(m.Entry.Node) {
		g.n.leaders.update(m.Shard, m.Entry)
	}
}

// live reports whether a node is in the membership view; gossip about
// nodes that left is stale and must not bring their entries back.
func (g *gossip) live(node int32) bool {
	_, ok := g.n.members.broker(node)
	return ok
}

// GetBroadcasts implements memberlist.Delegate.
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte {
	return g.queue.GetBroadcasts(overhead, limit)
}

// LocalState implements memberlist.Delegate: the whole leader table.
func (g *gossip) LocalState(bool) []byte { return g.n.leaders.encode() }

// MergeRemoteState implements memberlist.Delegate.
func (g *gossip) MergeRemoteState(b []byte, _ bool) { g.n.leaders.merge(b, g.live) }

// NotifyJoin implements memberlist.EventDelegate.
func (g *gossip) NotifyJoin(node *memberlist.Node) { g.upsert(node) }

// NotifyUpdate implements memberlist.EventDelegate.
func (g *gossip) NotifyUpdate(node *memberlist.Node) { g.upsert(node) }

// NotifyLeave implements memberlist.EventDelegate.
func (g *gossip) NotifyLeave(node *memberlist.Node) {
	var nm nodeMeta
	if json.Unmarshal(node.Meta, &nm) != nil || nm.ID == g.n.cfg.NodeID {
		return
	}
	g.mu.Lock()
	delete(g.known, node.Name)
	g.mu.Unlock()
	g.logger.Info("node left", "node_id", nm.ID)
	g.n.members.remove(nm.ID)
	g.n.leaders.forgetNode(nm.ID)
	g.poke()
}

func (g *gossip) upsert(node *memberlist.Node) {
	var nm nodeMeta
	if json.Unmarshal(node.Meta, &nm) != nil || nm.Raft == "" {
		return
	}
	g.mu.Lock()
	g.known[node.Name] = nm
	g.mu.Unlock()
	if _, known := g.n.members.broker(nm.ID); !known {
		g.logger.Info("node joined", "node_id", nm.ID, "kafka", nm.Kafka, "raft", nm.Raft)
	}
	g.n.members.set(Broker{NodeID: nm.ID, KafkaAddr: nm.Kafka}, nm.Raft)
	g.poke()
}

// simpleBroadcast is a memberlist.Broadcast of fixed bytes.
type simpleBroadcast []byte

func (b simpleBroadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b simpleBroadcast) Message() []byte                       { return b }
func (b simpleBroadcast) Finished()                             {}
