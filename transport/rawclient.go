package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RawClient is a raw Kafka protocol client: one TCP connection, requests
// sent at the version set on them, no version negotiation and no
// retries, so that what is sent and answered is exactly what the caller
// wrote. `kcoord verify` and the chaos suite commit and fetch through it
// (a retry could land twice inside one recorded operation), the
// conformance scripts replay Kafka's exchanges with it, and tests speak
// raw protocol to a Server with it. One goroutine may Send while another Recvs; Sends (and Recvs)
// among themselves are serialised. After an error other than
// ErrNoPendingRequest the connection's state is unknown: Close it.
type RawClient struct {
	nc net.Conn
	br *bufio.Reader

	wmu      sync.Mutex // serialises Send and WriteRaw
	rmu      sync.Mutex // serialises Recv and WaitClosed
	mu       sync.Mutex // guards the fields below
	format   *kmsg.RequestFormatter
	nextCorr int32
	pending  []int32 // correlation ids sent, not yet received, oldest first
}

// Dial connects a RawClient to addr.
func Dial(ctx context.Context, addr string) (*RawClient, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &RawClient{nc: nc, br: bufio.NewReader(nc), format: kmsg.NewRequestFormatter()}, nil
}

// SetClientID sets the client id of the requests sent from now on; until it
// is called they carry a null client id.
func (c *RawClient) SetClientID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.format = kmsg.NewRequestFormatter(kmsg.FormatterClientID(id))
}

// LocalAddr returns the client side's address of the connection.
func (c *RawClient) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// Do sends req at req.GetVersion() and returns its response decoded at
// that version (see Recv). No other request may be pending.
func (c *RawClient) Do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if _, err := c.Send(req); err != nil {
		return nil, err
	}
	return c.Recv(ctx, req)
}

// Send writes req at req.GetVersion() with the next correlation id (ids
// start at 0) and returns that id; receive its response with Recv.
func (c *RawClient) Send(req kmsg.Request) (corrID int32, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	corrID = c.nextCorr
	c.nextCorr++
	buf := c.format.AppendRequest(nil, req, corrID)
	c.pending = append(c.pending, corrID)
	c.mu.Unlock()
	_, err = c.nc.Write(buf)
	return corrID, err
}

// Recv reads the next response, which must answer the oldest request sent
// and not yet received (else ErrCorrelationMismatch), and decodes it as
// req's response at req.GetVersion(); pass the request Send was given.
// An ApiVersions response carrying UNSUPPORTED_VERSION is decoded at v0, as
// Kafka encodes it. ctx bounds the wait.
func (c *RawClient) Recv(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return nil, ErrNoPendingRequest
	}
	want := c.pending[0]
	c.mu.Unlock()

	frame, err := c.readFrame(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.pending = c.pending[1:]
	c.mu.Unlock()
	if len(frame) < 4 {
		return nil, fmt.Errorf("transport: response frame of %d bytes", len(frame))
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != want {
		return nil, fmt.Errorf("%w: got %d, want %d", ErrCorrelationMismatch, got, want)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.Key() == apiVersionsKey {
		if len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == kerr.UnsupportedVersion.Code {
			resp.SetVersion(0)
		}
	} else if resp.IsFlexible() {
		if body, _ = skipTags(body); body == nil {
			return nil, errors.New("transport: malformed response header tags")
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("transport: decoding %s v%d response: %w",
			kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return resp, nil
}

// readFrame reads one size-prefixed frame, bounded by ctx.
func (c *RawClient) readFrame(ctx context.Context) ([]byte, error) {
	defer c.bindDeadline(ctx)()
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 1<<30 {
		return nil, fmt.Errorf("transport: response frame size %d", n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(c.br, frame); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	return frame, nil
}

// bindDeadline makes reads fail once ctx ends; call the result when done.
func (c *RawClient) bindDeadline(ctx context.Context) (undo func()) {
	if d, ok := ctx.Deadline(); ok {
		_ = c.nc.SetReadDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetReadDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		_ = c.nc.SetReadDeadline(time.Time{})
	}
}

func (c *RawClient) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// WriteRaw writes b to the connection as it is, for malformed-frame tests.
func (c *RawClient) WriteRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// ExpectResponse records that a request with correlation id corrID was
// written with WriteRaw, so that Recv reads its response; use it for frames
// that Send cannot write, such as one streamed in pieces. Pick a corrID
// that Send does not use (its ids count up from 0).
func (c *RawClient) ExpectResponse(corrID int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, corrID)
}

// WaitClosed waits for the server to close the connection: it returns nil
// on end of file or a connection reset, an error if bytes arrive instead
// (unread responses count), and ctx's error if ctx ends first.
func (c *RawClient) WaitClosed(ctx context.Context) error {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	defer c.bindDeadline(ctx)()
	var b [1]byte
	n, err := c.br.Read(b[:])
	switch {
	case n > 0:
		return errors.New("transport: connection still open: received data")
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), isConnReset(err):
		return nil
	case err != nil:
		return c.ctxErr(ctx, err)
	}
	return errors.New("transport: connection still open")
}

func isConnReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}

// Close closes the connection.
func (c *RawClient) Close() error { return c.nc.Close() }

// TestLogger is the part of testing.TB that NewTestLogger needs.
type TestLogger interface {
	Log(args ...any)
}

// NewTestLogger returns an hclog logger at trace level writing through
// tb.Log, so log lines land with the test that produced them. Stop
// everything that logs (Server.Close) before the test ends: testing panics
// on a Log after its test completed.
func NewTestLogger(tb TestLogger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   name,
		Level:  hclog.Trace,
		Output: testLogWriter{tb},
	})
}

type testLogWriter struct{ tb TestLogger }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// StartTestServer serves mux on a free port of 127.0.0.1 with cfg (its Addr
// is replaced) and returns the running server; the caller must Close it.
func StartTestServer(cfg Config, mux *Mux) (*Server, error) {
	cfg.Addr = "127.0.0.1:0"
	s, err := NewServer(cfg, mux)
	if err != nil {
		return nil, err
	}
	if err := s.Listen(); err != nil {
		_ = s.Close()
		return nil, err
	}
	go func() {
		if err := s.Serve(); err != nil {
			s.logger.Error("serve failed", "error", err)
		}
	}()
	return s, nil
}
