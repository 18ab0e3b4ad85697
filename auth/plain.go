package auth

import (
	"bytes"
	"fmt"
	"time"
)

// plainExchange is SASL/PLAIN (RFC 4616): one client message,
// "authzid NUL authcid NUL password", checked against the user's
// strongest SCRAM credential, so a password is never stored for PLAIN
// either. The messages are Kafka's PlainSaslServer's.
type plainExchange struct {
	a         *Authenticator
	principal Principal
	done      bool
}

func (e *plainExchange) Step(token []byte) ([]byte, bool, error) {
	if e.done {
		return nil, false, fmt.Errorf("%w: the PLAIN exchange is already complete", ErrAuthenticationFailed)
	}
	e.done = true
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, false, fmt.Errorf("%w during authentication due to invalid credentials with SASL mechanism %s",
			ErrAuthenticationFailed, MechanismPlain)
	}
	authzID, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	switch {
	case user == "":
		return nil, false, fmt.Errorf("%w: username not specified", ErrAuthenticationFailed)
	case password == "":
		return nil, false, fmt.Errorf("%w: password not specified", ErrAuthenticationFailed)
	}
	ok, err := e.a.checkPassword(user, password)
	switch {
	case err != nil:
		return nil, false, err
	case !ok:
		return nil, false, fmt.Errorf("%w: Invalid username or password", ErrAuthenticationFailed)
	case authzID != "" && authzID != user:
		return nil, false, fmt.Errorf("%w: Client requested an authorization id that is different from username", ErrAuthenticationFailed)
	}
	e.principal = User(user)
	return nil, true, nil
}

func (e *plainExchange) Principal() Principal { return e.principal }

// checkPassword checks a PLAIN password against the user's strongest
// SCRAM credential. A check is one PBKDF2 of the credential's iterations
// (3 to 13 ms of a core), asked of by clients that have not authenticated,
// so at most a.pbkdf2 run at once, whatever number of connections try; an
// unknown user costs a check against a stand-in credential, so that its
// answer takes as long as a wrong password of a user with Kafka's minimum
// iterations. The credential is looked up before the check takes its
// slot: a lookup may wait for the metadata leader (Lookup).
func (a *Authenticator) checkPassword(user, password string) (bool, error) {
	c, found := standIn, false
	since := time.Now() // one login: its lookups share what they check against
	for _, m := range ScramMechanisms {
		cred, ok, err := a.credential(user, m, since)
		if err != nil {
			return false, err
		}
		if ok {
			c, found = cred, true
			break
		}
	}
	a.pbkdf2 <- struct{}{}
	defer func() { <-a.pbkdf2 }()
	if a.inCheck != nil {
		a.inCheck()
	}
	return c.Matches(password) && found, nil
}

// standIn is the credential an unknown PLAIN user's password is checked
// against (and never matches: its stored key is no hash of anything).
var standIn = Credential{Mechanism: ScramSHA512, Salt: make([]byte, 32), StoredKey: make([]byte, 64), Iterations: MinIterations}
