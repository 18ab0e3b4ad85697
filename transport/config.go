package transport

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults used by DefaultConfig and, for zero fields, by NewServer.
const (
	// DefaultAddr is the listener address of `kcoord serve --kafka-addr`.
	DefaultAddr = "127.0.0.1:9092"
	// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default, in bytes.
	DefaultMaxRequestBytes int32 = 104857600
	// DefaultMaxInFlightRequests is the default per-connection bound on
	// requests queued or being handled.
	DefaultMaxInFlightRequests = 16
	// DefaultIdleTimeout is Kafka's connections.max.idle.ms default.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultQueuedMaxRequestBytes is kcoord's queued.max.request.bytes
	// default, in bytes: twice DefaultMaxRequestBytes. Kafka's default is
	// -1 (unbounded); kcoord bounds request memory out of the box.
	DefaultQueuedMaxRequestBytes int64 = 2 * int64(DefaultMaxRequestBytes)
	// DefaultPoolExemptFrameBytes is the default PoolExemptFrameBytes.
	DefaultPoolExemptFrameBytes int32 = 64 << 10
	// DefaultMaxConnections is Kafka's max.connections default, a count.
	DefaultMaxConnections = math.MaxInt32
	// DefaultMaxConnectionsPerIP is Kafka's max.connections.per.ip
	// default, a count.
	DefaultMaxConnectionsPerIP = math.MaxInt32
)

// UnboundedQueuedMaxRequestBytes is the QueuedMaxRequestBytes that turns
// the request memory pool off, as queued.max.request.bytes=-1 does in Kafka.
const UnboundedQueuedMaxRequestBytes int64 = -1

// minFrameBytes is the smallest frame that can hold a request header:
// api key (2), api version (2) and correlation id (4). Every request but
// ControlledShutdown v0 also needs the 2-byte client id length.
const minFrameBytes = 8

// Config configures a Server. The zero value of every field but Addr means
// its default.
type Config struct {
	// Addr is the host:port the listener binds; port 0 picks a free port
	// (read it back with Server.Addr).
	Addr string

	// TLS, when set, serves the listener over TLS with it (nil:
	// plaintext). A client that does not speak TLS fails its handshake,
	// and its connection closes.
	TLS *tls.Config

	// SASL, when set, makes every connection authenticate with SASL
	// before it may send any request but ApiVersions, SaslHandshake and
	// SaslAuthenticate (sasl.go). nil: no SASL.
	SASL SASL

	// SASLMaxReceiveBytes is sasl.server.max.receive.size: the largest
	// frame, in bytes, a connection may send before it has authenticated;
	// a larger one closes it. 0 means DefaultSASLMaxReceiveBytes.
	SASLMaxReceiveBytes int32

	// MaxRequestBytes is socket.request.max.bytes: the largest request frame
	// accepted, in bytes, not counting the 4-byte size prefix. A larger frame
	// closes the connection. 0 means DefaultMaxRequestBytes.
	MaxRequestBytes int32

	// MaxInFlightRequests bounds, per connection, the number of requests
	// that are read and queued or being handled, as a count of requests.
	// When it is reached the connection's reader waits (holding at most one
	// more frame) before queueing the next. 0 means
	// DefaultMaxInFlightRequests.
	MaxInFlightRequests int

	// QueuedMaxRequestBytes is queued.max.request.bytes: the bytes of
	// request frames (size prefixes not counted) the whole server holds in
	// memory at once, over all connections: frames being read, read ahead
	// and queued, or being handled, until their response is written. A
	// connection's reader reserves a frame's size once it has read the
	// size prefix and before it reads the body; while the reservation
	// cannot be granted, that connection reads nothing more (the client
	// sees TCP backpressure), and other connections carry on. 0 means
	// DefaultQueuedMaxRequestBytes; UnboundedQueuedMaxRequestBytes (-1)
	// means no bound. Otherwise it must be at least MaxRequestBytes, as
	// Kafka requires, so that every accepted frame can be served.
	QueuedMaxRequestBytes int64

	// PoolExemptFrameBytes is the largest frame, in bytes, read outside
	// the QueuedMaxRequestBytes pool and allocated only as its bytes arrive
	// (see frame.go for why). 0 means
	// DefaultPoolExemptFrameBytes; 1 counts every frame (tests).
	PoolExemptFrameBytes int32

	// MaxConnections is max.connections: the most connections served at
	// once, as a count. A connection accepted beyond it is closed at once,
	// counted in kcoord_transport_connections_rejected_total and logged at
	// warn (one line per 10 s at most, with the number not logged). 0
	// means DefaultMaxConnections.
	MaxConnections int

	// MaxConnectionsPerIP is max.connections.per.ip: the most connections
	// served at once from one client IP address, as a count; a connection
	// beyond it is closed as for MaxConnections. 0 means
	// DefaultMaxConnectionsPerIP.
	MaxConnectionsPerIP int

	// IdleTimeout is connections.max.idle.ms, as a duration: a connection
	// with no request in flight that has received no byte and written no
	// response for this long is closed. 0 means DefaultIdleTimeout; a
	// negative value disables it.
	IdleTimeout time.Duration

	// RefuseUntilOpen makes Serve close, with a reset, every connection
	// it accepts until Server.Open is called. A node binds its port before
	// it can answer (its Raft shards start in between); a client that
	// connects meanwhile is refused and tries another broker at once,
	// where a listener not yet served would keep it waiting in the accept
	// backlog for as long as the start takes (a group member's heartbeat
	// stuck there can outlive its session). Refused connections count in
	// kcoord_transport_connections_rejected_total{reason="starting"}.
	RefuseUntilOpen bool

	// Logger receives the server's log lines; nil means hclog.NewNullLogger().
	Logger hclog.Logger

	// Registerer receives the server's Prometheus collectors; nil means no
	// metrics. Two live servers need distinct registerers (or one wrapped
	// with prometheus.WrapRegistererWith and a distinguishing label).
	Registerer prometheus.Registerer
}

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	return Config{
		Addr:                  DefaultAddr,
		MaxRequestBytes:       DefaultMaxRequestBytes,
		MaxInFlightRequests:   DefaultMaxInFlightRequests,
		QueuedMaxRequestBytes: DefaultQueuedMaxRequestBytes,
		MaxConnections:        DefaultMaxConnections,
		MaxConnectionsPerIP:   DefaultMaxConnectionsPerIP,
		PoolExemptFrameBytes:  DefaultPoolExemptFrameBytes,
		IdleTimeout:           DefaultIdleTimeout,
		SASLMaxReceiveBytes:   DefaultSASLMaxReceiveBytes,
	}
}

// Validate reports whether c can configure a Server; zero fields count as
// their defaults. Every error it returns wraps ErrInvalidConfig.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return fmt.Errorf("%w: Addr is empty", ErrInvalidConfig)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("%w: Addr %q: %v", ErrInvalidConfig, c.Addr, err)
	}
	if c.MaxRequestBytes != 0 && c.MaxRequestBytes < minFrameBytes+2 {
		return fmt.Errorf("%w: MaxRequestBytes %d is below the %d bytes of a request header",
			ErrInvalidConfig, c.MaxRequestBytes, minFrameBytes+2)
	}
	if c.MaxInFlightRequests < 0 {
		return fmt.Errorf("%w: MaxInFlightRequests %d is negative", ErrInvalidConfig, c.MaxInFlightRequests)
	}
	if c.MaxConnections < 0 {
		return fmt.Errorf("%w: MaxConnections %d is negative", ErrInvalidConfig, c.MaxConnections)
	}
	if c.MaxConnectionsPerIP < 0 {
		return fmt.Errorf("%w: MaxConnectionsPerIP %d is negative", ErrInvalidConfig, c.MaxConnectionsPerIP)
	}
	if c.SASLMaxReceiveBytes < 0 {
		return fmt.Errorf("%w: SASLMaxReceiveBytes %d is negative", ErrInvalidConfig, c.SASLMaxReceiveBytes)
	}
	if c.PoolExemptFrameBytes < 0 {
		return fmt.Errorf("%w: PoolExemptFrameBytes %d is negative", ErrInvalidConfig, c.PoolExemptFrameBytes)
	}
	d := c.withDefaults()
	if q := d.QueuedMaxRequestBytes; q != UnboundedQueuedMaxRequestBytes && q < int64(d.MaxRequestBytes) {
		return fmt.Errorf("%w: QueuedMaxRequestBytes (queued.max.request.bytes) %d must be -1 or at least MaxRequestBytes (socket.request.max.bytes) %d",
			ErrInvalidConfig, q, d.MaxRequestBytes)
	}
	return nil
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxInFlightRequests == 0 {
		c.MaxInFlightRequests = DefaultMaxInFlightRequests
	}
	if c.QueuedMaxRequestBytes == 0 {
		c.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnectionsPerIP == 0 {
		c.MaxConnectionsPerIP = DefaultMaxConnectionsPerIP
	}
	if c.PoolExemptFrameBytes == 0 {
		c.PoolExemptFrameBytes = DefaultPoolExemptFrameBytes
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.SASLMaxReceiveBytes == 0 {
		c.SASLMaxReceiveBytes = DefaultSASLMaxReceiveBytes
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c
}
