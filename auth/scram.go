package auth

import (
	"errors"
	"fmt"

	"github.com/xdg-go/scram"
)

// scramExchange is SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802, RFC 7677)
// through xdg-go/scram's server conversation: client-first, server-first,
// client-final, server-final. Every failure is answered with Kafka's one
// message for invalid credentials, so that a client cannot tell an
// unknown user from a wrong password.
type scramExchange struct {
	m    Mechanism
	conv *scram.ServerConversation
	done bool
}

func newScramExchange(a *Authenticator, m Mechanism) *scramExchange {
	srv, err := scramServer(a, m, nil)
	if err != nil { // only for a nil lookup
		panic(fmt.Sprintf("auth: scram server: %v", err))
	}
	return &scramExchange{m: m, conv: srv.NewConversation()}
}

// scramServer is xdg-go/scram's server of m over the authenticator's
// credentials; nonces come from crypto/rand unless nonce is set (tests).
func scramServer(a *Authenticator, m Mechanism, nonce scram.NonceGeneratorFcn) (*scram.Server, error) {
	lookup := func(user string) (scram.StoredCredentials, error) {
		c, ok := a.credential(user, m)
		if !ok {
			return scram.StoredCredentials{}, errors.New("unknown user")
		}
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
			StoredKey:  c.StoredKey,
			ServerKey:  c.ServerKey,
		}, nil
	}
	hashGen := scram.SHA256
	if m == ScramSHA512 {
		hashGen = scram.SHA512
	}
	srv, err := hashGen.NewServer(lookup)
	if err == nil && nonce != nil {
		srv = srv.WithNonceGenerator(nonce)
	}
	return srv, err
}

func (e *scramExchange) Step(token []byte) ([]byte, bool, error) {
	if e.done {
		return nil, false, e.failed()
	}
	resp, err := e.step(token)
	if err != nil {
		e.done = true
		return nil, false, e.failed()
	}
	if !e.conv.Done() {
		return []byte(resp), false, nil
	}
	e.done = true
	if !e.conv.Valid() {
		return nil, false, e.failed()
	}
	if id := e.conv.AuthzID(); id != "" && id != e.conv.Username() {
		return nil, false, fmt.Errorf("%w: Client requested an authorization id that is different from username", ErrAuthenticationFailed)
	}
	return []byte(resp), true, nil
}

func (e *scramExchange) Principal() Principal { return User(e.conv.Username()) }

// step is the conversation's Step, with a panic in it turned into an
// error: xdg-go/scram v1.1.2 indexes an empty GS2 flag (a client-first
// message starting ",,"; FuzzScramExchange found it), and a client must
// not be able to crash the exchange.
func (e *scramExchange) step(token []byte) (resp string, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = "", fmt.Errorf("malformed SCRAM message: %v", p)
		}
	}()
	return e.conv.Step(string(token))
}

// failed is Kafka's answer to any SCRAM failure.
func (e *scramExchange) failed() error {
	return fmt.Errorf("%w during authentication due to invalid credentials with SASL mechanism %s",
		ErrAuthenticationFailed, e.m.Name())
}
