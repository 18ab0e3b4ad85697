package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kcoord/kcoord/auth"
)

// This file is SASL on a connection (Config.SASL): SaslHandshake v0–v1
// and SaslAuthenticate v0–v2, served by transport itself as ApiVersions
// is, since they change the connection's own state. It follows Kafka's
// SaslServerAuthenticator:
//
//   - Until the exchange completes, a connection may send only
//     ApiVersions, SaslHandshake, then SaslAuthenticate (or, after a
//     SaslHandshake v0, raw SASL tokens without Kafka headers). Anything
//     else closes it, as does a failed exchange, after its
//     SASL_AUTHENTICATION_FAILED answer. Frames before the exchange
//     completes are limited to Config.SASLMaxReceiveBytes
//     (sasl.server.max.receive.size), and the reader reads them one at a
//     time: the next one's framing depends on the answer to this one.
//   - With a session lifetime (connections.max.reauth.ms, KIP-368), the
//     SaslAuthenticate that completes tells a client of v1 or later how
//     long the session lasts. Such a client re-authenticates with a new
//     SaslHandshake and SaslAuthenticate on the same connection, with the
//     same mechanism and as the same principal, at most once a second;
//     any other request after the session ended closes the connection.
//     Without a lifetime, or from a client of SaslAuthenticate v0, a
//     SaslHandshake after authenticating is ILLEGAL_SASL_STATE.

// SASL authenticates a listener's connections; *auth.Authenticator is
// one. Connection handler goroutines call it, concurrently.
type SASL interface {
	// Mechanisms lists the enabled mechanisms, as SaslHandshake answers.
	Mechanisms() []string
	// Start begins one exchange of mechanism; it fails for a mechanism
	// that is not enabled.
	Start(mechanism string) (auth.Exchange, error)
	// SessionLifetime is how long an authenticated session lasts before
	// the client must re-authenticate; 0 for the connection's life.
	SessionLifetime() time.Duration
}

// API keys and versions of the SASL requests transport serves.
const (
	saslHandshakeKey           int16 = 17
	saslHandshakeMaxVersion    int16 = 1
	saslAuthenticateKey        int16 = 36
	saslAuthenticateMaxVersion int16 = 2
)

// DefaultSASLMaxReceiveBytes is Kafka's sasl.server.max.receive.size
// default, in bytes.
const DefaultSASLMaxReceiveBytes int32 = 524288

// saslVersions is what ApiVersions advertises of SASL when it is on.
func saslVersions() []kmsg.ApiVersionsResponseApiKey {
	h, a := kmsg.NewApiVersionsResponseApiKey(), kmsg.NewApiVersionsResponseApiKey()
	h.ApiKey, h.MaxVersion = saslHandshakeKey, saslHandshakeMaxVersion
	a.ApiKey, a.MaxVersion = saslAuthenticateKey, saslAuthenticateMaxVersion
	return []kmsg.ApiVersionsResponseApiKey{h, a}
}

// saslMaxVersion is the highest version transport serves of a SASL key,
// -1 for other keys.
func saslMaxVersion(key int16) int16 {
	switch key {
	case saslHandshakeKey:
		return saslHandshakeMaxVersion
	case saslAuthenticateKey:
		return saslAuthenticateMaxVersion
	}
	return -1
}

// saslPhase is where a connection is in its SASL life.
type saslPhase uint8

const (
	// phaseHandshake: ApiVersions or SaslHandshake expected.
	phaseHandshake saslPhase = iota
	// phaseAuthenticate: SaslAuthenticate (or raw tokens) expected.
	phaseAuthenticate
	// phaseDone: authenticated; a SaslHandshake starts a re-authentication.
	phaseDone
)

// errSASLClose is a SASL rule broken or an exchange failed: the
// connection closes (after the answer, if any, is written).
var errSASLClose = errors.New("sasl")

// saslConn is one connection's SASL state. The handler goroutine owns
// every field but lockstep and raw, which the reader reads before each
// frame; the reader waits on stepped after queueing a frame read in
// lockstep, so it reads the next one under the state that frame left.
type saslConn struct {
	sasl      SASL
	phase     saslPhase
	mechanism string
	exchange  auth.Exchange
	principal auth.Principal // the authenticated one, kept across re-authentications
	expires   time.Time      // zero: the session never ends
	started   time.Time      // when the last exchange began (its SaslHandshake)
	// sawVersions: an ApiVersions was answered before the handshake.
	sawVersions bool
	reauth      bool // this exchange re-authenticates
	// clientReauth: the client sent SaslAuthenticate v1 or later, so it
	// knows of session lifetimes and may re-authenticate (Kafka's
	// connectedClientSupportsReauthentication).
	clientReauth bool

	lockstep atomic.Bool   // not yet authenticated: one frame at a time, size limited
	raw      atomic.Bool   // the next frame is a raw SASL token (after SaslHandshake v0)
	stepped  chan struct{} // handler → reader: a lockstep frame was served
}

func newSASLConn(s SASL) *saslConn {
	c := &saslConn{sasl: s, stepped: make(chan struct{}, 1)}
	c.lockstep.Store(true)
	return c
}

// serveSASL answers in when SASL decides it: the SASL requests, and any
// request SASL's state forbids. handled is false for a request to
// dispatch as usual. A non-nil frame is written before closeErr (wrapping
// errSASLClose), if any, closes the connection. Runs on the handler
// goroutine.
func (c *conn) serveSASL(in *inbound) (frame []byte, closeErr error, handled bool) {
	s := c.sasl
	if in.raw != nil {
		return c.saslRawToken(in)
	}
	now := time.Now()
	if s.phase == phaseDone && !s.expires.IsZero() && now.After(s.expires) && !s.beginsReauthentication(in, now) {
		c.srv.metrics.saslAuthentication(s.mechanism, saslExpired)
		return nil, fmt.Errorf("%w: the SASL session of %s expired at %s without re-authentication", errSASLClose,
			s.principal, s.expires.Format(time.RFC3339Nano)), true
	}
	switch in.key {
	case saslHandshakeKey:
		return c.saslHandshake(in, now)
	case saslAuthenticateKey:
		return c.saslAuthenticate(in)
	}
	switch {
	case s.phase == phaseHandshake && in.key == apiVersionsKey && !s.sawVersions:
		// One ApiVersions before the handshake, as in Kafka; one it
		// answers UNSUPPORTED_VERSION does not count (KIP-511's retry).
		s.sawVersions = in.req != nil
		return nil, nil, false
	case s.phase == phaseHandshake:
		return nil, fmt.Errorf("%w: unexpected Kafka request of type %s during SASL handshake", errSASLClose, kmsg.NameForKey(in.key)), true
	case s.phase == phaseAuthenticate:
		return nil, fmt.Errorf("%w: unexpected Kafka request of type %s during SASL authentication", errSASLClose, kmsg.NameForKey(in.key)), true
	}
	return nil, nil, false
}

// beginsReauthentication reports whether in, on an authenticated
// connection, starts a re-authentication, as Kafka's
// KafkaChannel.maybeBeginServerReauthentication decides: a SaslHandshake
// v1 or later from a client that authenticated with SaslAuthenticate v1
// or later, on a session with a lifetime, at least minReauthInterval
// after the previous exchange began.
func (s *saslConn) beginsReauthentication(in *inbound, now time.Time) bool {
	return in.key == saslHandshakeKey && in.version >= 1 && s.clientReauth && !s.expires.IsZero() &&
		now.Sub(s.started) >= minReauthInterval
}

// minReauthInterval is the least time between the starts of two
// exchanges on a connection (Kafka's MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS).
const minReauthInterval = time.Second

// saslHandshake answers SaslHandshake: it picks the mechanism of the
// exchange that follows, first or re-authenticating.
func (c *conn) saslHandshake(in *inbound, now time.Time) ([]byte, error, bool) {
	s := c.sasl
	req := in.req.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = s.sasl.Mechanisms()
	switch {
	case s.phase == phaseAuthenticate:
		return nil, fmt.Errorf("%w: unexpected Kafka request of type SaslHandshake during SASL authentication", errSASLClose), true
	case s.phase == phaseDone && !s.beginsReauthentication(in, now):
		// Not a re-authentication: Kafka's request handler answers it.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return c.saslFrame(in, resp), nil, true
	}
	s.started = now
	ex, err := s.sasl.Start(req.Mechanism)
	if err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.srv.metrics.saslAuthentication("unsupported", saslFailure)
		return c.saslFrame(in, resp), fmt.Errorf("%w: unsupported SASL mechanism %q", errSASLClose, req.Mechanism), true
	}
	s.reauth = s.phase == phaseDone
	if s.reauth && req.Mechanism != s.mechanism {
		// Kafka answers the handshake and fails the exchange that follows.
		ex = failedExchange{fmt.Errorf("%w: SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'",
			auth.ErrAuthenticationFailed, req.Mechanism, s.mechanism)}
	}
	s.phase, s.exchange = phaseAuthenticate, ex
	if !s.reauth {
		s.mechanism = req.Mechanism
	}
	if in.version == 0 {
		s.raw.Store(true) // the tokens follow without Kafka headers
	}
	return c.saslFrame(in, resp), nil, true
}

// saslAuthenticate answers SaslAuthenticate: one step of the exchange.
func (c *conn) saslAuthenticate(in *inbound) ([]byte, error, bool) {
	s := c.sasl
	req := in.req.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	switch s.phase {
	case phaseHandshake:
		return nil, fmt.Errorf("%w: unexpected Kafka request of type SaslAuthenticate during SASL handshake", errSASLClose), true
	case phaseDone:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate request received after successful authentication"
		resp.ErrorMessage = &msg
		return c.saslFrame(in, resp), nil, true
	}
	if in.version > 0 {
		s.clientReauth = true
	}
	challenge, done, err := c.saslStep(req.SASLAuthBytes)
	if errors.Is(err, auth.ErrCredentialsUnavailable) {
		// Not an answer about the client: it tries another node.
		return nil, fmt.Errorf("%w: %w", errSASLClose, err), true
	}
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return c.saslFrame(in, resp), fmt.Errorf("%w: %w", errSASLClose, err), true
	}
	resp.SASLAuthBytes = challenge
	if done {
		resp.SessionLifetimeMillis = c.saslComplete()
	}
	return c.saslFrame(in, resp), nil, true
}

// saslRawToken serves a raw token after SaslHandshake v0: its answer is
// a raw size-prefixed token too, and a failure closes the connection
// with no answer, as in Kafka.
func (c *conn) saslRawToken(in *inbound) ([]byte, error, bool) {
	challenge, done, err := c.saslStep(in.raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSASLClose, err), true
	}
	if done {
		c.saslComplete()
		c.sasl.raw.Store(false)
	}
	frame := binary.BigEndian.AppendUint32(c.wbuf[:0], uint32(len(challenge)))
	return append(frame, challenge...), nil, true
}

// saslStep runs one step of the exchange, checking on completion that a
// re-authentication keeps the principal.
func (c *conn) saslStep(token []byte) ([]byte, bool, error) {
	s := c.sasl
	challenge, done, err := s.exchange.Step(token)
	if err == nil && done && s.reauth && s.exchange.Principal() != s.principal {
		p := s.exchange.Principal()
		err = fmt.Errorf("%w: Cannot change principals during re-authentication from %s.%s: %s.%s",
			auth.ErrAuthenticationFailed, s.principal.Type, s.principal.Name, p.Type, p.Name)
	}
	if err != nil && !errors.Is(err, auth.ErrCredentialsUnavailable) { // no answer about the client
		c.srv.metrics.saslAuthentication(s.mechanism, saslFailure)
	}
	return challenge, done, err
}

// saslComplete makes the connection authenticated and returns the
// session's lifetime in milliseconds, 0 for none.
func (c *conn) saslComplete() int64 {
	s := c.sasl
	outcome := saslSuccess
	if s.reauth {
		outcome = saslReauthenticated
	}
	c.srv.metrics.saslAuthentication(s.mechanism, outcome)
	s.phase, s.principal, s.exchange = phaseDone, s.exchange.Principal(), nil
	c.rc.Principal = s.principal
	s.lockstep.Store(false)
	s.expires = time.Time{}
	lifetime := s.sasl.SessionLifetime()
	if lifetime > 0 {
		s.expires = time.Now().Add(lifetime)
	}
	c.log.Debug("SASL authentication complete", "principal", s.principal.String(), "mechanism", s.mechanism,
		"reauthentication", s.reauth, "session_lifetime", lifetime)
	return lifetime.Milliseconds()
}

// saslFrame encodes a SASL response frame.
func (c *conn) saslFrame(in *inbound, resp kmsg.Response) []byte {
	resp.SetVersion(in.version)
	return appendResponse(c.wbuf[:0], in.corr, resp)
}

// failedExchange is an exchange that fails at its first step.
type failedExchange struct{ err error }

func (f failedExchange) Step([]byte) ([]byte, bool, error) { return nil, false, f.err }
func (f failedExchange) Principal() auth.Principal         { return auth.Principal{} }
