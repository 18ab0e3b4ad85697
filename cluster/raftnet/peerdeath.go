package raftnet

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// defaultProbeTimeout bounds a death probe's dial. A probe that times out
// proves nothing: the peer may be paused or cut off, and only Raft's own
// timeouts decide about it.
const defaultProbeTimeout = 250 * time.Millisecond

// reprobeInterval is how often a peer recorded dead is probed again: a
// peer that restarts on its address is alive again within it, even when
// nothing else dials it.
const reprobeInterval = 500 * time.Millisecond

// PeerDeaths records which Raft peers (by advertised Raft address) are proven
// gone: their address refused a TCP connection, so no process listens there
// any more. A peer that is merely slow, paused (SIGSTOP) or cut off by a
// partition refuses nothing (a dial hangs or times out), so it is never
// recorded here and waits out Raft's timeouts as before.
//
// Proof comes from three places: a dial of Raft's own (StreamLayer.Dial)
// refused; a connection with the peer that ended from its side (EOF or reset,
// what a killed process's kernel sends at once), after which a probe dial is
// refused; and gossip, where a node that proved a death tells the others,
// each of which probes the peer itself before believing it. Any connection
// that opens with the peer again, either way, clears the record.
//
// Routing reads it (cluster.Shard.Settling, cluster.Node.LeaderOf, cluster.Node.Brokers), so that
// FindCoordinator stops naming a dead node the moment its death is proven,
// instead of after a heartbeat timeout. Any goroutine may call its methods;
// none blocks (probes run on goroutines of their own, one per peer at a time).
type PeerDeaths struct {
	logger       hclog.Logger
	probeTimeout time.Duration

	mu      sync.Mutex
	dead    map[string]time.Time // address -> when its death was proven
	alives  map[string]time.Time // address -> when a connection with it last opened
	probing map[string]bool
	closed  bool
	stop    chan struct{} // closed by close: the reprobe loop ends
	// onDeath is told of each newly proven death (cluster.Node gossips it), and
	// onChange of every change of the record (cluster.Node fires its routing
	// signal). They run on the goroutine that made the change, without mu,
	// and must not block.
	onDeath  func(addr string)
	onChange func()
}

func newPeerDeaths(logger hclog.Logger) *PeerDeaths {
	d := &PeerDeaths{
		logger:       logger,
		probeTimeout: defaultProbeTimeout,
		dead:         make(map[string]time.Time),
		alives:       make(map[string]time.Time),
		probing:      make(map[string]bool),
		stop:         make(chan struct{}),
	}
	go d.reprobeLoop()
	return d
}

// reprobeLoop probes every peer recorded dead each reprobeInterval, so a
// record ends when its peer listens again, until close. Runs on its own
// goroutine.
func (d *PeerDeaths) reprobeLoop() {
	t := time.NewTicker(reprobeInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.mu.Lock()
		dead := make([]string, 0, len(d.dead))
		for addr := range d.dead {
			dead = append(dead, addr)
		}
		d.mu.Unlock()
		for _, addr := range dead {
			d.Suspect(addr)
		}
	}
}

// Watch installs the callbacks told of each newly proven death and of every
// change of the record.
func (d *PeerDeaths) Watch(onDeath func(addr string), onChange func()) {
	d.mu.Lock()
	d.onDeath, d.onChange = onDeath, onChange
	d.mu.Unlock()
}

// IsDead reports whether addr's death is proven and not disproven since.
func (d *PeerDeaths) IsDead(addr string) bool {
	_, dead := d.DeadSince(addr)
	return dead
}

// DeadSince returns when addr's death was proven, if it is. Routing counts
// a death only for a peer not heard from since (Raft's last contact): a
// record is a hint that a newer contact overrides.
func (d *PeerDeaths) DeadSince(addr string) (time.Time, bool) {
	d.mu.Lock()
	at, dead := d.dead[addr]
	d.mu.Unlock()
	return at, dead
}

// alive records that a connection with addr opened: whatever died there
// lives again.
func (d *PeerDeaths) alive(addr string) {
	d.mu.Lock()
	_, was := d.dead[addr]
	delete(d.dead, addr)
	d.alives[addr] = time.Now()
	onChange := d.onChange
	d.mu.Unlock()
	if was {
		d.logger.Info("raft peer reachable again", "peer", addr)
		if onChange != nil {
			onChange()
		}
	}
}

// dialFailed looks at the error of a dial to addr begun at start: a
// refusal proves the peer dead, unless a connection with it opened since
// start (it restarted meanwhile).
func (d *PeerDeaths) dialFailed(addr string, start time.Time, err error) {
	if IsRefused(err) {
		d.declare(addr, start)
	}
}

// Forget drops what is recorded about addr (the peer left the cluster).
func (d *PeerDeaths) Forget(addr string) {
	d.mu.Lock()
	_, was := d.dead[addr]
	delete(d.dead, addr)
	delete(d.alives, addr)
	onChange := d.onChange
	d.mu.Unlock()
	if was && onChange != nil {
		onChange()
	}
}

// Suspect starts a probe of addr (unless one is running): a connection
// with it ended from its side, or gossip says it died. The probe declares it
// dead if its dial is refused, alive if it connects, and nothing if it
// times out.
func (d *PeerDeaths) Suspect(addr string) {
	d.mu.Lock()
	if d.closed || d.probing[addr] || addr == "" {
		d.mu.Unlock()
		return
	}
	d.probing[addr] = true
	d.mu.Unlock()
	go func() {
		defer func() {
			d.mu.Lock()
			delete(d.probing, addr)
			d.mu.Unlock()
		}()
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, d.probeTimeout)
		if err == nil {
			// It listens. Closing at once, before any header, is what the
			// mux's handshake recognizes as a probe and drops quietly.
			_ = c.Close()
			d.alive(addr)
			return
		}
		d.dialFailed(addr, start, err)
	}()
}

// declare records addr's death, once, and tells onDeath, unless a
// connection with addr opened after since (the refused dial was older).
func (d *PeerDeaths) declare(addr string, since time.Time) {
	d.mu.Lock()
	_, known := d.dead[addr]
	if d.closed || known || d.alives[addr].After(since) {
		d.mu.Unlock()
		return
	}
	d.dead[addr] = time.Now()
	onDeath, onChange := d.onDeath, d.onChange
	d.mu.Unlock()
	d.logger.Info("raft peer refused a connection: its process is gone", "peer", addr)
	if onChange != nil {
		onChange()
	}
	if onDeath != nil {
		onDeath(addr)
	}
}

// close stops new probes and declarations (the node is shutting down).
func (d *PeerDeaths) close() {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.stop)
	}
	d.mu.Unlock()
}

// IsRefused reports whether a dial error is a refused connection: the
// address answered, and nothing listens on the port.
func IsRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}
