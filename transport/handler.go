package transport

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
)

// RequestContext describes the connection a request arrived on. Each request
// gets its own copy; a handler may keep it.
type RequestContext struct {
	// ConnID identifies the connection within this Server; ids start at 1.
	ConnID uint64
	// ClientID is the client id from the request header; empty when the
	// client sent none (null).
	ClientID string
	// ClientHost is the remote IP as Kafka reports it (Java's
	// InetAddress.toString without a host name): "/127.0.0.1",
	// "/0:0:0:0:0:0:0:1".
	ClientHost string
	// RemoteAddr is the connection's remote address.
	RemoteAddr net.Addr
	// Principal is who the connection acts as: the SASL user once it
	// authenticated (Config.SASL), else the subject of its verified TLS
	// client certificate, else auth.Anonymous.
	Principal auth.Principal
	// Received is when the request's frame was read: a read that must
	// reflect every write acknowledged before the request arrived starts
	// from it.
	Received time.Time
}

// HandlerFunc serves one decoded request; req already has its version set
// with SetVersion.
//
// Requests of one connection are handled one at a time, in arrival order, on
// that connection's handler goroutine (Kafka's per-connection ordering);
// handlers of different connections run concurrently. A handler may block
// (a JoinGroup waits for the rebalance), but must return soon after ctx is
// cancelled, which happens when the connection closes or the server shuts
// down; Server.Close waits for it.
//
// The returned response must be of req.ResponseKind()'s type; transport sets
// its version to the request's. Returning a non-nil error (or a nil or
// mistyped response, or panicking) closes the connection, logged at warn (a
// panic at error, with its stack); the response, if any, is not sent.
type HandlerFunc func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error)

// handlerError is a request the handler goroutine could not answer; it
// closes the connection.
type handlerError struct {
	reason       string // reasonHandlerError, reasonHandlerPanic, reasonBadResponse
	key, version int16
	err          error
	stack        []byte // set for panics
}

func (e *handlerError) Error() string {
	return fmt.Sprintf("%s: %s v%d: %v", e.reason, kmsg.NameForKey(e.key), e.version, e.err)
}

func (e *handlerError) Unwrap() error { return e.err }
