package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// scramExchange is the server side of SCRAM-SHA-256 and SCRAM-SHA-512
// (RFC 5802, RFC 7677) as Kafka's ScramSaslServer runs it:
// client-first, server-first, client-final, server-final, without
// channel binding. Kafka's own departures, which clients rely on, are
// kept: extensions after the client nonce are ignored, and a client-final
// nonce need only end with the nonce the server sent (librdkafka sends
// the client's nonce twice). kcoord writes its own rather than use
// xdg-go/scram's server, which compares nonces exactly (kcat could not
// log in) and panics on a client-first message starting ",,".
//
// Every failure is answered with Kafka's one message for invalid
// credentials, so that a client cannot tell an unknown user from a wrong
// password.
type scramExchange struct {
	a     *Authenticator
	m     Mechanism
	nonce func() string // the server's nonce; crypto/rand unless a test sets it

	step        int // 0: client-first expected, 1: client-final, 2: over
	user        string
	cred        Credential
	gs2Header   string
	clientFirst string // client-first-message-bare
	serverFirst string
	fullNonce   string
}

func newScramExchange(a *Authenticator, m Mechanism) *scramExchange {
	return &scramExchange{a: a, m: m, nonce: randomNonce}
}

// randomNonce is 24 random bytes, base64: printable, without commas.
func randomNonce() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawStdEncoding.EncodeToString(b)
}

func (e *scramExchange) Step(token []byte) ([]byte, bool, error) {
	step := e.step
	e.step = 2 // any failure ends the exchange
	switch step {
	case 0:
		first, err := e.clientFirstMessage(string(token))
		if err != nil {
			return nil, false, err
		}
		e.step = 1
		return []byte(first), false, nil
	case 1:
		final, err := e.clientFinalMessage(string(token))
		if err != nil {
			return nil, false, err
		}
		return []byte(final), true, nil
	}
	return nil, false, e.failed()
}

func (e *scramExchange) Principal() Principal { return User(e.user) }

// clientFirstMessage parses "gs2-header client-first-message-bare"
// ("n,,n=alice,r=nonce") and answers the server-first message.
func (e *scramExchange) clientFirstMessage(msg string) (string, error) {
	// gs2-header: a flag (n or y; p asks for channel binding, which
	// kcoord does not offer), then an optional authorization id.
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok || (flag != "n" && flag != "y") {
		return "", e.failed()
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok || (authz != "" && !strings.HasPrefix(authz, "a=")) {
		return "", e.failed()
	}
	authzID, err := saslName(strings.TrimPrefix(authz, "a="))
	if err != nil {
		return "", e.failed()
	}
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) == 2 {
		return "", e.failed()
	}
	user, err := saslName(attrs[0][2:])
	if err != nil {
		return "", e.failed()
	}
	// attrs[2:] are extensions: Kafka ignores those it does not know, and
	// kcoord knows none (tokenauth is for delegation tokens).
	cred, ok, err := e.a.credential(user, e.m, time.Now())
	if err != nil {
		return "", err
	}
	if !ok || cred.Iterations < MinIterations {
		return "", e.failed()
	}
	if authzID != "" && authzID != user {
		return "", fmt.Errorf("%w: Client requested an authorization id that is different from username", ErrAuthenticationFailed)
	}
	e.user, e.cred = user, cred
	e.gs2Header = flag + "," + authz + ","
	e.clientFirst = bare
	e.fullNonce = attrs[1][2:] + e.nonce()
	e.serverFirst = "r=" + e.fullNonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) +
		",i=" + strconv.Itoa(int(cred.Iterations))
	return e.serverFirst, nil
}

// clientFinalMessage checks "c=biws,r=nonce,p=proof" against the stored
// key and answers the server-final message "v=signature".
func (e *scramExchange) clientFinalMessage(msg string) (string, error) {
	withoutProof, proofAttr, ok := cutLast(msg, ",p=")
	if !ok {
		return "", e.failed()
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(e.gs2Header)) ||
		!strings.HasPrefix(attrs[1], "r=") || !strings.HasSuffix(attrs[1][2:], e.fullNonce) {
		return "", e.failed()
	}
	proof, err := base64.StdEncoding.DecodeString(proofAttr)
	if err != nil {
		return "", e.failed()
	}
	h := e.m.hash()
	authMessage := e.clientFirst + "," + e.serverFirst + "," + withoutProof
	signature := hmacOf(h, e.cred.StoredKey, authMessage)
	if len(proof) != len(signature) {
		return "", e.failed()
	}
	clientKey := make([]byte, len(proof))
	subtle.XORBytes(clientKey, proof, signature)
	sum := h()
	sum.Write(clientKey)
	if !hmac.Equal(sum.Sum(nil), e.cred.StoredKey) {
		return "", e.failed()
	}
	return "v=" + base64.StdEncoding.EncodeToString(hmacOf(h, e.cred.ServerKey, authMessage)), nil
}

// failed is Kafka's answer to any SCRAM failure.
func (e *scramExchange) failed() error {
	return fmt.Errorf("%w during authentication due to invalid credentials with SASL mechanism %s",
		ErrAuthenticationFailed, e.m.Name())
}

var errSASLName = errors.New("malformed saslname")

// saslName decodes a SCRAM saslname: "=2C" is a comma and "=3D" an equals
// sign; any other "=" is malformed.
func saslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errSASLName
		}
		i += 2
	}
	return b.String(), nil
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}
