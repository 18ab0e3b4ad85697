package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
)

const (
	// readBufferBytes is the size of a connection's read buffer, in bytes.
	readBufferBytes = 32 << 10
	// maxKeptWriteBuffer is the largest response buffer, in bytes, a
	// connection keeps for reuse.
	maxKeptWriteBuffer = 1 << 20
	// tlsHandshakeTimeout bounds a TLS handshake, from accept.
	tlsHandshakeTimeout = 10 * time.Second
)

// conn is one client connection. Its reader runs on the goroutine the accept
// loop starts (conn.run); its handler goroutine (conn.handleLoop) and its
// closer goroutine are started and waited for by run. Cancelling ctx (client
// gone, protocol error, handler failure or Server.Close) closes the socket,
// which ends the reader; the handler goroutine then drains the queue without
// handling it.
type conn struct {
	srv    *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	rc     RequestContext // template: ClientID is set per request
	log    hclog.Logger

	queue chan *inbound // reader → handler goroutine; closed by the reader
	slots chan struct{} // one token per request queued or being handled
	wbuf  []byte        // response buffer, reused; handler goroutine only
	sasl  *saslConn     // nil without Config.SASL

	lastOut atomic.Int64 // unix nanos of the last response written (or of the accept)
}

func newConn(s *Server, nc net.Conn, id uint64) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{
		srv:    s,
		nc:     nc,
		ctx:    ctx,
		cancel: cancel,
		rc: RequestContext{
			ConnID:     id,
			ClientHost: kafkaClientHost(nc.RemoteAddr()),
			RemoteAddr: nc.RemoteAddr(),
			Principal:  auth.Anonymous,
		},
		log:   s.logger.With("conn", id, "remote", nc.RemoteAddr().String()),
		queue: make(chan *inbound, s.cfg.MaxInFlightRequests),
		slots: make(chan struct{}, s.cfg.MaxInFlightRequests),
	}
	if s.cfg.SASL != nil {
		c.sasl = newSASLConn(s.cfg.SASL)
	}
	c.lastOut.Store(time.Now().UnixNano())
	return c
}

// run serves the connection until it closes: it starts the handler
// goroutine and a closer goroutine (which closes the socket once ctx is
// cancelled, unblocking the reader), reads frames on the calling goroutine,
// and returns once all three are done.
func (c *conn) run() {
	c.log.Debug("connection opened")
	if !c.handshakeTLS() {
		c.cancel()
		_ = c.nc.Close()
		return
	}
	closed, handled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(closed)
		<-c.ctx.Done()
		_ = c.nc.Close()
	}()
	go func() {
		defer close(handled)
		c.handleLoop()
	}()
	err := c.readLoop()
	closedByUs := c.ctx.Err() != nil
	c.cancel()
	close(c.queue)
	<-handled
	<-closed
	c.logReadEnd(err, closedByUs)
}

// readLoop reads, decodes and queues frames until reading fails or the
// connection's ctx is cancelled. It blocks while the server's memory pool
// cannot hold the next frame (readRequest) and while MaxInFlightRequests
// requests are unanswered; each frame it queues holds its bytes in the
// pool until the handler goroutine releases them.
func (c *conn) readLoop() error {
	var src io.Reader = c.nc
	if c.srv.cfg.IdleTimeout > 0 {
		src = &idleReader{nc: c.nc, idle: c.srv.cfg.IdleTimeout, lastOut: &c.lastOut,
			busy: func() bool { return len(c.slots) > 0 }}
	}
	br := bufio.NewReaderSize(src, readBufferBytes)
	for {
		in, err := c.readRequest(br)
		if err != nil {
			return err
		}
		select {
		case c.slots <- struct{}{}:
		case <-c.ctx.Done():
			c.srv.pool.release(in.poolBytes)
			return nil
		}
		c.queue <- in // never blocks: slots bounds it
		if in.lockstep {
			// Not yet authenticated: the next frame's framing and
			// limit depend on this one's answer.
			select {
			case <-c.sasl.stepped:
			case <-c.ctx.Done():
				return nil
			}
		}
	}
}

// handshakeTLS completes a TLS connection's handshake before any request
// is read, within tlsHandshakeTimeout, and takes the principal of a
// verified client certificate. It reports false (the connection is to
// close) when the handshake fails: a plaintext client on a TLS port, a
// missing or untrusted client certificate under mutual TLS.
func (c *conn) handshakeTLS() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.srv.metrics.tlsHandshakeFailed()
		c.log.Debug("TLS handshake failed, closing connection", "error", err)
		return false
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && len(tc.ConnectionState().VerifiedChains) > 0 {
		c.rc.Principal = auth.CertificatePrincipal(certs[0])
	}
	return true
}

// readRequest reads and decodes one frame on the reader goroutine. Between
// the size prefix and the body it acquires the frame's size from the
// server's memory pool, waiting (and reading nothing) until the pool can
// hold it or the connection's ctx ends. The returned request holds its
// bytes in the pool (inbound.poolBytes); on error nothing is held.
func (c *conn) readRequest(br *bufio.Reader) (*inbound, error) {
	maxBytes, lockstep, raw := c.srv.cfg.MaxRequestBytes, false, false
	if c.sasl != nil && c.sasl.lockstep.Load() {
		lockstep, raw = true, c.sasl.raw.Load()
		maxBytes = min(maxBytes, c.srv.cfg.SASLMaxReceiveBytes)
	}
	size, err := readFrameSize(br, maxBytes, raw)
	if err != nil {
		return nil, err
	}
	pool := c.srv.pool
	var held int64 // bytes this frame holds in the pool
	if size > c.srv.cfg.PoolExemptFrameBytes {
		if err := pool.acquire(c.ctx, int64(size)); err != nil {
			if errors.Is(err, ErrFrameExceedsQueuedMaxRequestBytes) {
				return nil, &frameError{reason: reasonFrameExceedsPool, size: size, err: err}
			}
			return nil, err // ctx ended: the connection is closing
		}
		held = int64(size)
	}
	body, err := readFrameBody(br, size, held > 0 && pool.bounded())
	if err != nil {
		pool.release(held)
		return nil, err
	}
	received := time.Now()
	in := &inbound{raw: body}
	if !raw {
		if in, err = decodeRequest(c.srv.mux, body, c.sasl != nil); err != nil {
			pool.release(held)
			return nil, err
		}
	}
	in.received, in.lockstep = received, lockstep
	in.poolBytes = held
	return in, nil
}

// logReadEnd logs why the reader stopped.
func (c *conn) logReadEnd(err error, closedByUs bool) {
	var fe *frameError
	switch {
	case errors.As(err, &fe) && fe.reason == reasonFrameExceedsPool:
		c.srv.metrics.requestError(fe)
		if ok, suppressed := c.srv.poolTooSmallLog.allow(time.Now()); ok {
			c.log.Warn("frame larger than queued.max.request.bytes, closing connection",
				"reason", fe.reason, "size", fe.size, "queued_max_request_bytes", c.srv.cfg.QueuedMaxRequestBytes,
				"not_logged_since_last_line", suppressed, "log_interval", rejectLogInterval)
		}
	case errors.As(err, &fe):
		c.srv.metrics.requestError(fe)
		kv := []any{"reason", fe.reason, "size", fe.size}
		if fe.hasHeader {
			kv = append(kv, "key", fe.key, "version", fe.version, "api", kmsg.NameForKey(fe.key))
		}
		if fe.err != nil {
			kv = append(kv, "error", fe.err)
		}
		if fe.stack != nil {
			c.log.Error("panic decoding request, closing connection", append(kv, "stack", string(fe.stack))...)
		} else {
			c.log.Warn("invalid request, closing connection", kv...)
		}
	case closedByUs:
		c.log.Debug("connection closed")
	case errors.Is(err, errIdle):
		c.log.Debug("closing idle connection", "idle_timeout", c.srv.cfg.IdleTimeout)
	case err == nil, errors.Is(err, io.EOF):
		c.log.Debug("connection closed by client")
	case errors.Is(err, io.ErrUnexpectedEOF):
		c.log.Debug("connection closed by client in the middle of a frame")
	default:
		c.log.Debug("connection read failed", "error", err)
	}
}

// handleLoop handles queued requests in order, one at a time, writing each
// response before taking the next request, and then releases the
// request's bytes to the server's memory pool. After the connection's ctx
// is cancelled it only drains the queue, releasing each request's bytes. It
// returns when the reader closes the queue.
func (c *conn) handleLoop() {
	for in := range c.queue {
		if c.ctx.Err() == nil {
			if err := c.serve(in); err != nil {
				c.logServeError(in, err)
				c.cancel()
			}
		}
		c.srv.pool.release(in.poolBytes)
		<-c.slots
		if in.lockstep {
			c.sasl.stepped <- struct{}{} // never blocks: the reader waits for each
		}
	}
}

// serve answers one request: ApiVersions from the mux table, anything else
// through its handler. A write error is returned as it is; any other error
// is a *handlerError.
//
// The request is counted in the metrics before its response is written, so
// a client that has read a response observes it counted.
func (c *conn) serve(in *inbound) error {
	if c.sasl != nil {
		if frame, closeErr, handled := c.serveSASL(in); handled {
			return c.writeSASL(in, frame, closeErr)
		}
	}
	var resp kmsg.Response
	if in.key == apiVersionsKey {
		resp = apiVersionsResponse(c.srv.mux, in, c.sasl != nil)
	} else {
		var err error
		if resp, err = c.call(in); err != nil {
			c.srv.metrics.request(in.key, in.version, in.received)
			return err
		}
	}
	buf, err := encodeResponse(c.wbuf[:0], in, resp)
	c.srv.metrics.request(in.key, in.version, in.received)
	if err != nil {
		return err
	}
	if cap(buf) <= maxKeptWriteBuffer {
		c.wbuf = buf
	} else {
		c.wbuf = nil // do not pin a huge response's memory to the connection
	}
	if _, err := c.nc.Write(buf); err != nil {
		return fmt.Errorf("writing response: %w", err)
	}
	c.lastOut.Store(time.Now().UnixNano())
	return nil
}

// writeSASL writes a SASL answer frame, if any, then returns closeErr.
func (c *conn) writeSASL(in *inbound, frame []byte, closeErr error) error {
	if in.raw == nil {
		c.srv.metrics.request(in.key, in.version, in.received)
	}
	if frame != nil {
		c.wbuf = frame[:0]
		if _, err := c.nc.Write(frame); err != nil {
			return fmt.Errorf("writing response: %w", err)
		}
		c.lastOut.Store(time.Now().UnixNano())
	}
	return closeErr
}

// call runs in's handler, turning a panic, an error or a nil or mistyped
// response into a *handlerError.
func (c *conn) call(in *inbound) (resp kmsg.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, &handlerError{reason: reasonHandlerPanic, key: in.key, version: in.version,
				err: fmt.Errorf("panic: %v", p), stack: debug.Stack()}
		}
	}()
	rc := c.rc
	rc.ClientID, rc.Received = in.clientID, in.received
	resp, err = in.fn(c.ctx, &rc, in.req)
	switch {
	case err != nil:
		return nil, &handlerError{reason: reasonHandlerError, key: in.key, version: in.version, err: err}
	case resp == nil:
		return nil, &handlerError{reason: reasonBadResponse, key: in.key, version: in.version,
			err: errors.New("handler returned a nil response")}
	case resp.Key() != in.key:
		return nil, &handlerError{reason: reasonBadResponse, key: in.key, version: in.version,
			err: fmt.Errorf("handler returned a %s response", kmsg.NameForKey(resp.Key()))}
	}
	return resp, nil
}

// encodeResponse sets resp's version to the request's (ApiVersions'
// response comes with its own) and appends the response frame to dst,
// turning a panic in kmsg (say, a typed nil response) into a *handlerError.
func encodeResponse(dst []byte, in *inbound, resp kmsg.Response) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &handlerError{reason: reasonBadResponse, key: in.key, version: in.version,
				err: fmt.Errorf("panic encoding response: %v", p), stack: debug.Stack()}
		}
	}()
	if in.key != apiVersionsKey {
		resp.SetVersion(in.version)
	}
	return appendResponse(dst, in.corr, resp), nil
}

// logServeError logs a request that closes the connection: at warn, at
// error with the stack for a panic, and at debug when the connection was
// already closing (a handler returning ctx.Err(), a failed write).
func (c *conn) logServeError(in *inbound, err error) {
	kv := []any{"key", in.key, "version", in.version, "api", kmsg.NameForKey(in.key),
		"corr", in.corr, "client_id", in.clientID}
	if errors.Is(err, errSASLClose) {
		if ok, suppressed := c.srv.saslRefusedLog.allow(time.Now()); ok {
			c.log.Info("SASL refused the connection, closing it", "error", err,
				"not_logged_since_last_line", suppressed, "log_interval", rejectLogInterval)
		}
		return
	}
	var he *handlerError
	if !errors.As(err, &he) || (c.ctx.Err() != nil && he.reason == reasonHandlerError) {
		c.log.Debug("request failed on a closing connection", append(kv, "error", err)...)
		return
	}
	c.srv.metrics.requestError(he)
	kv = append(kv, "reason", he.reason, "error", he.err)
	if he.stack != nil {
		c.log.Error("panic serving request, closing connection", append(kv, "stack", string(he.stack))...)
		return
	}
	c.log.Warn("request failed, closing connection", kv...)
}
