package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kcoord/kcoord/auth"
)

// saslServer serves a Heartbeat that records the principal of each
// request, behind SASL with alice/s3cret and bob/hunter2 known to every
// mechanism.
type saslServer struct {
	*Server
	logs *logBuffer
	reg  *prometheus.Registry

	mu         sync.Mutex
	principals []auth.Principal
}

func startSASLServer(t *testing.T, lifetime time.Duration) *saslServer {
	t.Helper()
	creds := map[string]map[auth.Mechanism]auth.Credential{}
	for user, pass := range map[string]string{"alice": "s3cret", "bob": "hunter2"} {
		creds[user] = map[auth.Mechanism]auth.Credential{}
		for _, m := range auth.ScramMechanisms {
			c, err := auth.CredentialFromPassword(m, pass, auth.MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			creds[user][m] = c
		}
	}
	a, err := auth.New(auth.Config{
		Mechanisms: []string{auth.MechanismSHA512, auth.MechanismSHA256, auth.MechanismPlain},
		Lookup: func(u string, m auth.Mechanism, _ time.Time) (auth.Credential, bool, error) {
			c, ok := creds[u][m]
			return c, ok, nil
		},
		SessionLifetime: lifetime,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &saslServer{reg: prometheus.NewRegistry()}
	mux := NewMux()
	mux.Handle(12, 0, 4, func(ctx context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		s.mu.Lock()
		s.principals = append(s.principals, rc.Principal)
		s.mu.Unlock()
		return echoHeartbeat(ctx, rc, req)
	})
	mux.Handle(3, 0, 12, func(_ context.Context, rc *RequestContext, req kmsg.Request) (kmsg.Response, error) {
		s.mu.Lock()
		s.principals = append(s.principals, rc.Principal)
		s.mu.Unlock()
		host, port, _ := net.SplitHostPort(s.Addr().String())
		p, _ := strconv.Atoi(port)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 1, host, int32(p)
		resp.Brokers = []kmsg.MetadataResponseBroker{b}
		return resp, nil
	})
	s.Server, s.logs = startServer(t, mux, func(c *Config) { c.SASL = a; c.Registerer = s.reg })
	return s
}

// metadata asks cl for the cluster's metadata, which kgo sends to a seed.
func metadata(t *testing.T, cl *kgo.Client) error {
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(testCtx(t), cl)
	return err
}

func (s *saslServer) lastPrincipal() auth.Principal {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.principals) == 0 {
		return auth.Principal{}
	}
	return s.principals[len(s.principals)-1]
}

// plainLogin runs SaslHandshake v1 and SaslAuthenticate at version v with
// a PLAIN message.
func plainLogin(t *testing.T, cl *RawClient, v int16, user, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = auth.MechanismPlain
	resp, err := cl.Do(testCtx(t), hs)
	if err != nil {
		t.Fatalf("SaslHandshake: %v", err)
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		t.Fatalf("SaslHandshake: %v", kerr.ErrorForCode(code))
	}
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(v)
	req.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
	aresp, err := cl.Do(testCtx(t), req)
	if err != nil {
		t.Fatalf("SaslAuthenticate: %v", err)
	}
	return aresp.(*kmsg.SASLAuthenticateResponse)
}

func TestFranzGoAuthenticatesWithEverySASLMechanism(t *testing.T) {
	s := startSASLServer(t, 0)
	for _, tc := range []struct {
		name string
		opt  kgo.Opt
	}{
		{"SCRAM-SHA-256", kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism())},
		{"SCRAM-SHA-512", kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism())},
		{"PLAIN", kgo.SASL(plain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := metadata(t, cl); err != nil {
				t.Fatalf("metadata after %s: %v", tc.name, err)
			}
			if p := s.lastPrincipal(); p != auth.User("alice") {
				t.Fatalf("the handler saw %v, want User:alice", p)
			}
		})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()),
		kgo.SASL(scram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	err = metadata(t, cl)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if n := counterValue(t, s.reg, "kcoord_transport_sasl_authentications_total",
		map[string]string{"mechanism": auth.MechanismSHA512, "outcome": "failure"}); n < 1 {
		t.Fatal("the failure was not counted")
	}
}

func TestWrongPasswordIsAnsweredThenClosed(t *testing.T) {
	s := startSASLServer(t, 0)
	cl := dial(t, s.Server)
	resp := plainLogin(t, cl, 2, "alice", "guess")
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil ||
		*resp.ErrorMessage != "Authentication failed: Invalid username or password" {
		t.Fatalf("got %v %v, want SASL_AUTHENTICATION_FAILED with Kafka's message", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("the connection stayed open: %v", err)
	}
	mustContain(t, s.logs, "SASL refused the connection", "Invalid username or password")
}

func TestOnlySASLRequestsBeforeAuthentication(t *testing.T) {
	s := startSASLServer(t, 0)
	cl := dial(t, s.Server)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	resp, err := cl.Do(testCtx(t), av)
	if err != nil {
		t.Fatalf("ApiVersions before authenticating: %v", err)
	}
	keys := map[int16]int16{}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		keys[k.ApiKey] = k.MaxVersion
	}
	if keys[17] != 1 || keys[36] != 2 {
		t.Fatalf("ApiVersions offers SaslHandshake v%d and SaslAuthenticate v%d, want v1 and v2", keys[17], keys[36])
	}
	if _, err := cl.Send(heartbeat(4, "g", 1)); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("a Heartbeat before authenticating was served: %v", err)
	}
	mustContain(t, s.logs, "unexpected Kafka request of type Heartbeat during SASL handshake")

	cl = dial(t, s.Server)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "GSSAPI"
	hresp, err := cl.Do(testCtx(t), hs)
	if err != nil {
		t.Fatal(err)
	}
	if r := hresp.(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(r.SupportedMechanisms) != 3 {
		t.Fatalf("GSSAPI: %v %v, want UNSUPPORTED_SASL_MECHANISM and the three mechanisms", kerr.ErrorForCode(r.ErrorCode), r.SupportedMechanisms)
	}
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("an unsupported mechanism left the connection open: %v", err)
	}

	cl = dial(t, s.Server)
	if err := cl.WriteRaw(binary.BigEndian.AppendUint32(nil, uint32(DefaultSASLMaxReceiveBytes+1))); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("a frame above sasl.server.max.receive.size before authenticating: %v", err)
	}
}

func TestHandshakeV0TakesRawTokens(t *testing.T) {
	s := startSASLServer(t, 0)
	cl := dial(t, s.Server)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(0)
	hs.Mechanism = auth.MechanismPlain
	if resp, err := cl.Do(testCtx(t), hs); err != nil || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
		t.Fatalf("SaslHandshake v0: %v, %v", resp, err)
	}
	if err := cl.WriteRaw(frameOf([]byte("\x00bob\x00hunter2"))); err != nil {
		t.Fatal(err)
	}
	token, err := cl.readFrame(testCtx(t))
	if err != nil || len(token) != 0 {
		t.Fatalf("the raw answer to a PLAIN token: %q, %v; want an empty token", token, err)
	}
	if resp, err := cl.Do(testCtx(t), heartbeat(4, "g", 3)); err != nil || resp.(*kmsg.HeartbeatResponse).ThrottleMillis != 3 {
		t.Fatalf("heartbeat after a v0 login: %v, %v", resp, err)
	}
	if p := s.lastPrincipal(); p != auth.User("bob") {
		t.Fatalf("the handler saw %v, want User:bob", p)
	}

	cl = dial(t, s.Server)
	if _, err := cl.Do(testCtx(t), hs); err != nil {
		t.Fatal(err)
	}
	_ = cl.WriteRaw(frameOf([]byte("\x00bob\x00wrong")))
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("a wrong raw token: %v", err)
	}
}

func TestSessionsExpireUnlessReauthenticated(t *testing.T) {
	const lifetime = 1200 * time.Millisecond
	s := startSASLServer(t, lifetime)

	// The session ends: a request after it closes the connection, even a
	// SaslAuthenticate.
	cl := dial(t, s.Server)
	if resp := plainLogin(t, cl, 1, "alice", "s3cret"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("login: %v, lifetime %d ms", kerr.ErrorForCode(resp.ErrorCode), resp.SessionLifetimeMillis)
	}
	again := kmsg.NewPtrSASLAuthenticateRequest()
	again.SetVersion(2)
	if resp, err := cl.Do(testCtx(t), again); err != nil || resp.(*kmsg.SASLAuthenticateResponse).ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate after authenticating: %v, %v; want ILLEGAL_SASL_STATE", resp, err)
	}
	if _, err := cl.Do(testCtx(t), heartbeat(4, "g", 1)); err != nil {
		t.Fatalf("heartbeat within the session: %v", err)
	}
	time.Sleep(lifetime + 100*time.Millisecond)
	if _, err := cl.Send(again); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("a request after the session ended was served: %v", err)
	}
	mustContain(t, s.logs, "expired")

	// Re-authenticating as the same user, a second or more after the
	// login, extends the session.
	cl = dial(t, s.Server)
	plainLogin(t, cl, 1, "alice", "s3cret")
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = auth.MechanismPlain
	if resp, err := cl.Do(testCtx(t), hs); err != nil || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("re-authenticating at once: %v, %v; want ILLEGAL_SASL_STATE (at most one a second)", resp, err)
	}
	time.Sleep(lifetime - 150*time.Millisecond)
	if resp := plainLogin(t, cl, 1, "alice", "s3cret"); resp.ErrorCode != 0 {
		t.Fatalf("re-authentication: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	time.Sleep(300 * time.Millisecond) // past the first session's end
	if _, err := cl.Do(testCtx(t), heartbeat(4, "g", 3)); err != nil {
		t.Fatalf("heartbeat after re-authenticating: %v", err)
	}
	if n := counterValue(t, s.reg, "kcoord_transport_sasl_authentications_total",
		map[string]string{"mechanism": auth.MechanismPlain, "outcome": "reauthenticated"}); n != 1 {
		t.Fatalf("%v re-authentications counted, want 1", n)
	}

	// ...but not as another user.
	time.Sleep(minReauthInterval)
	if resp := plainLogin(t, cl, 1, "bob", "hunter2"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code ||
		*resp.ErrorMessage != "Authentication failed: Cannot change principals during re-authentication from User.alice: User.bob" {
		t.Fatalf("re-authenticating as bob: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("a changed principal left the connection open: %v", err)
	}
}

// TestReauthenticationNeedsASessionLifetime: without
// connections.max.reauth.ms a SaslHandshake after authenticating is
// ILLEGAL_SASL_STATE, as in Kafka, so a client cannot make the server
// check its password over and over on one connection.
func TestReauthenticationNeedsASessionLifetime(t *testing.T) {
	s := startSASLServer(t, 0)
	cl := dial(t, s.Server)
	plainLogin(t, cl, 1, "alice", "s3cret")
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = auth.MechanismPlain
	resp, err := cl.Do(testCtx(t), hs)
	if err != nil || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("a second handshake: %v, %v; want ILLEGAL_SASL_STATE", resp, err)
	}
	if _, err := cl.Do(testCtx(t), heartbeat(4, "g", 1)); err != nil {
		t.Fatalf("the connection did not stay usable: %v", err)
	}
}

// TestOneApiVersionsBeforeTheHandshake: a connection that has not
// authenticated gets one ApiVersions answer (and the retry after an
// UNSUPPORTED_VERSION one); another closes it, so it cannot keep its
// connection alive without ever logging in.
func TestOneApiVersionsBeforeTheHandshake(t *testing.T) {
	s := startSASLServer(t, 0)
	cl := dial(t, s.Server)
	future := kmsg.NewPtrApiVersionsRequest()
	future.SetVersion(apiVersionsMaxVersion + 1)
	if resp, err := cl.Do(testCtx(t), future); err != nil || resp.(*kmsg.ApiVersionsResponse).ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("a future ApiVersions: %v, %v", resp, err)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(0)
	if _, err := cl.Do(testCtx(t), av); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if _, err := cl.Send(av); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitClosed(testCtx(t)); err != nil {
		t.Fatalf("a second ApiVersions was answered: %v", err)
	}
}

// TestFranzGoReauthenticatesBeforeItsSessionEnds runs franz-go through
// several session lifetimes: it re-authenticates on its own (KIP-368), so
// its requests keep being served.
func TestFranzGoReauthenticatesBeforeItsSessionEnds(t *testing.T) {
	s := startSASLServer(t, 2500*time.Millisecond) // franz-go re-authenticates a second before the end
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()),
		kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if err := metadata(t, cl); err != nil {
			t.Fatalf("metadata %d: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := counterValue(t, s.reg, "kcoord_transport_sasl_authentications_total",
		map[string]string{"mechanism": auth.MechanismSHA256, "outcome": "reauthenticated"}); n < 1 {
		t.Fatal("franz-go never re-authenticated")
	}
	if n := counterValue(t, s.reg, "kcoord_transport_sasl_authentications_total",
		map[string]string{"mechanism": auth.MechanismSHA256, "outcome": "expired"}); n != 0 {
		t.Fatalf("%v sessions expired", n)
	}
}
