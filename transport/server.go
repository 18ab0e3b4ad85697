package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Server is the Kafka protocol listener. Listen, Serve and Close may be
// called from any goroutine; Serve blocks its caller for the server's life.
type Server struct {
	cfg     Config // defaults applied
	mux     *Mux
	logger  hclog.Logger
	metrics *metrics

	ctx    context.Context // parent of every connection's ctx; cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex // guards ln, closed, serving
	ln      net.Listener
	closed  bool
	serving bool

	refusing atomic.Bool // Config.RefuseUntilOpen, until Open

	wg         sync.WaitGroup // the accept loop and every connection
	nextConnID atomic.Uint64
	unregister sync.Once

	pool   *memoryPool // queued.max.request.bytes
	limits *connLimits // max.connections, max.connections.per.ip

	// Rejection log lines, at most one per rejectLogInterval each.
	maxConnsLog      logLimiter
	maxConnsPerIPLog logLimiter
	poolTooSmallLog  logLimiter
	saslRefusedLog   logLimiter
	startingLog      logLimiter
}

// NewServer validates cfg, applies defaults to its zero fields and registers
// the metrics. It does not bind: call Listen (or Serve) for that.
func NewServer(cfg Config, mux *Mux) (*Server, error) {
	if mux == nil {
		return nil, fmt.Errorf("%w: nil Mux", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pool := newMemoryPool(cfg.QueuedMaxRequestBytes)
	m, err := newMetrics(cfg.Registerer, pool)
	if err != nil {
		return nil, fmt.Errorf("transport: registering metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, mux: mux, logger: cfg.Logger, metrics: m, ctx: ctx, cancel: cancel,
		pool:             pool,
		limits:           newConnLimits(cfg.MaxConnections, cfg.MaxConnectionsPerIP),
		maxConnsLog:      logLimiter{interval: rejectLogInterval},
		maxConnsPerIPLog: logLimiter{interval: rejectLogInterval},
		poolTooSmallLog:  logLimiter{interval: rejectLogInterval},
		saslRefusedLog:   logLimiter{interval: rejectLogInterval},
		startingLog:      logLimiter{interval: rejectLogInterval},
	}
	s.refusing.Store(cfg.RefuseUntilOpen)
	return s, nil
}

// Listen binds Config.Addr; afterwards Addr is valid. It returns
// ErrAlreadyListening when called twice and ErrServerClosed after Close.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listenLocked()
}

func (s *Server) listenLocked() error {
	switch {
	case s.closed:
		return ErrServerClosed
	case s.ln != nil:
		return ErrAlreadyListening
	}
	ln, err := (&net.ListenConfig{}).Listen(s.ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("transport: listen on %s: %w", s.cfg.Addr, err)
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.ln = ln
	s.logger.Debug("kafka listener bound", "addr", ln.Addr().String(), "tls", s.cfg.TLS != nil)
	return nil
}

// Addr returns the bound address, or nil before Listen.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve runs the accept loop on the calling goroutine, binding first if
// Listen was not called. It blocks until Close and then returns nil; called
// after Close it returns nil at once. Accept errors other than the
// listener's close are logged and retried with a backoff of up to a second.
func (s *Server) Serve() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	if s.serving {
		s.mu.Unlock()
		return ErrAlreadyServing
	}
	if s.ln == nil {
		if err := s.listenLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.serving = true
	ln := s.ln
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logger.Warn("accept failed", "error", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		if s.refusing.Load() {
			s.refuseStarting(nc)
			continue
		}
		s.startConn(nc)
	}
}

// startConn starts serving nc, or closes it when MaxConnections
// connections, or MaxConnectionsPerIP from its IP, are open. It runs on the
// accept loop's goroutine and does not block.
func (s *Server) startConn(nc net.Conn) {
	ip := clientIP(nc.RemoteAddr())
	if err := s.limits.admit(ip); err != nil {
		s.rejectConn(nc, ip, err)
		return
	}
	s.metrics.connOpened()
	c := newConn(s, nc, s.nextConnID.Add(1))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.metrics.connClosed()
		defer s.limits.release(ip)
		c.run()
	}()
}

// rejectConn closes nc, accepted over the limit err names
// (ErrMaxConnections or ErrMaxConnectionsPerIP), counts it and logs it (one
// line per rejectLogInterval and limit). It runs on the accept loop's
// goroutine; closing a fresh socket does not block.
func (s *Server) rejectConn(nc net.Conn, ip string, err error) {
	_ = nc.Close()
	limit, lim, maxCount := limitMaxConnections, &s.maxConnsLog, s.cfg.MaxConnections
	if errors.Is(err, ErrMaxConnectionsPerIP) {
		limit, lim, maxCount = limitMaxConnectionsPerIP, &s.maxConnsPerIPLog, s.cfg.MaxConnectionsPerIP
	}
	s.metrics.connRejected(limit)
	if ok, suppressed := lim.allow(time.Now()); ok {
		s.logger.Warn("connection over a connection limit closed",
			"limit", limit, "max", maxCount, "remote", nc.RemoteAddr().String(), "ip", ip,
			"not_logged_since_last_line", suppressed, "log_interval", rejectLogInterval)
	}
}

// Open ends Config.RefuseUntilOpen's refusals: connections accepted from
// now on are served. Any goroutine may call it, any number of times.
func (s *Server) Open() { s.refusing.Store(false) }

// refuseStarting closes nc, accepted before Open, with a reset (the
// client's first read or write fails at once, whatever it sent), counts it
// and logs it at info, one line per rejectLogInterval. It runs on the
// accept loop's goroutine and does not block.
func (s *Server) refuseStarting(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = nc.Close()
	s.metrics.connRejected(reasonStarting)
	if ok, suppressed := s.startingLog.allow(time.Now()); ok {
		s.logger.Info("connection refused: the node is still starting",
			"remote", nc.RemoteAddr().String(), "not_logged_since_last_line", suppressed, "log_interval", rejectLogInterval)
	}
}

// Close stops accepting, cancels every connection's ctx, closes every
// connection and waits until the accept loop and every connection goroutine,
// handlers included, have returned. It then unregisters the metrics. It is
// safe to call more than once and from any goroutine; it returns nil.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	s.mu.Unlock()

	s.cancel() // before closing ln, so the accept loop sees the close as expected
	if ln != nil {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.logger.Debug("closing listener", "error", err)
		}
	}
	s.wg.Wait()
	s.unregister.Do(s.metrics.unregister)
	return nil
}
