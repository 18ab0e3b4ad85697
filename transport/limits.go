package transport

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// rejectLogInterval is how often a kind of rejection (a connection over a
// limit, a frame larger than the request memory pool) is logged at most;
// the line then says how many were not logged since the previous one.
const rejectLogInterval = 10 * time.Second

// Limit names: the Kafka config each enforces. Each is the "limit" of the
// rejection's log line and the reason label of
// kcoord_transport_connections_rejected_total.
const (
	limitMaxConnections      = "max.connections"
	limitMaxConnectionsPerIP = "max.connections.per.ip"
)

// reasonStarting is the reason label of a connection refused before
// Server.Open (Config.RefuseUntilOpen).
const reasonStarting = "starting"

// connLimits enforces max.connections and max.connections.per.ip (Kafka's
// ConnectionQuotas, without per-IP overrides, listener limits or rates).
// The accept loop's goroutine calls admit; each connection's goroutine
// calls release once the connection has ended. Neither blocks beyond a
// short mutex.
type connLimits struct {
	maxConnections      int
	maxConnectionsPerIP int

	mu        sync.Mutex
	open      int            // connections admitted and not released
	openPerIP map[string]int // by clientIP; entries at zero are deleted
}

func newConnLimits(maxConnections, maxConnectionsPerIP int) *connLimits {
	return &connLimits{maxConnections: maxConnections, maxConnectionsPerIP: maxConnectionsPerIP,
		openPerIP: make(map[string]int)}
}

// admit counts a new connection from ip, or counts nothing and returns
// ErrMaxConnections or ErrMaxConnectionsPerIP (checked in that order, as
// Kafka does).
func (l *connLimits) admit(ip string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.open >= l.maxConnections:
		return ErrMaxConnections
	case l.openPerIP[ip] >= l.maxConnectionsPerIP:
		return ErrMaxConnectionsPerIP
	}
	l.open++
	l.openPerIP[ip]++
	return nil
}

// release frees the slots of a connection from ip that admit counted.
func (l *connLimits) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.openPerIP[ip]--; l.openPerIP[ip] <= 0 {
		delete(l.openPerIP, ip)
	}
}

// openConnections is the number of connections admitted and not released.
func (l *connLimits) openConnections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// clientIP is the key max.connections.per.ip counts addr under: its IP
// address, an IPv4-mapped IPv6 address as IPv4, or the address's string
// when it is not an IP (a test's pipe).
func clientIP(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap().String()
	}
	if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
		return ap.Addr().Unmap().String()
	}
	return addr.String()
}

// logLimiter lets one log line of a kind through per interval and counts
// the ones it holds back, so that a flood (of rejected connections, say)
// writes a line per interval instead of one per event. It is safe for
// concurrent use and never blocks beyond a short mutex.
type logLimiter struct {
	interval time.Duration

	mu         sync.Mutex
	next       time.Time // when the next line may be written
	suppressed int       // events held back since the last line
}

// allow reports whether the event at now may be logged and, if so, how
// many events were held back since the previous line.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	suppressed, l.suppressed = l.suppressed, 0
	l.next = now.Add(l.interval)
	return true, suppressed
}
