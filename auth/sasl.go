package auth

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Lookup returns a user's stored credential for one SCRAM mechanism, false
// when the user has none as of since (when the login began: a store that
// may lag checks its source for what was stored before since), or an
// error when the store cannot tell now (the server's replica of the
// metadata group cannot be brought up to date):
// the exchange then fails with ErrCredentialsUnavailable, and the
// connection closes without an answer, so that the client tries another
// node instead of taking a wrong password for an answer. The server wires
// it to the metadata FSM. It is called from connection handler goroutines,
// concurrently, never with this package's semaphore held; it may block
// for a read barrier (a user the replica does not hold yet), bounded by
// the server.
type Lookup func(user string, m Mechanism, since time.Time) (Credential, bool, error)

// Config configures an Authenticator.
type Config struct {
	// Mechanisms is sasl.enabled.mechanisms: the SASL mechanisms served,
	// in the order SaslHandshake lists them. Each is PLAIN, SCRAM-SHA-256
	// or SCRAM-SHA-512.
	Mechanisms []string
	// Lookup finds stored credentials; nil finds none.
	Lookup Lookup
	// Superuser and SuperuserPassword are the bootstrap superuser
	// (--sasl-superuser, KCOORD_SASL_SUPERUSER_PASSWORD): a user whose
	// password this node is given directly, so that it can log in before
	// any credential is stored. Its password is checked here for that
	// name, never a stored credential. Empty: none.
	Superuser         string
	SuperuserPassword string
	// SessionLifetime is connections.max.reauth.ms as a duration: how long
	// an authenticated session lasts before the client must
	// re-authenticate (KIP-368). 0: for as long as the connection.
	SessionLifetime time.Duration
}

// Authenticator serves SASL exchanges. Its methods are safe for
// concurrent use; transport calls them from connection handler
// goroutines.
type Authenticator struct {
	mechanisms []string
	lookup     Lookup
	superuser  string
	super      map[Mechanism]Credential
	lifetime   time.Duration
	// pbkdf2 holds a token per PLAIN password check running
	// (checkPassword): half the CPUs, so that logins cannot take the
	// cores groups need.
	pbkdf2 chan struct{}
	// inCheck, when set (tests), runs inside each PLAIN check's slot.
	inCheck func()
}

// superuserIterations is how many rounds salt the bootstrap superuser's
// password on this node: Kafka's minimum, since the salted form never
// leaves the process.
const superuserIterations = MinIterations

// New checks cfg and returns its Authenticator. Errors wrap
// ErrUnsupportedMechanism (a mechanism kcoord does not serve, or none) or
// ErrUnacceptableCredential (a superuser without a password).
func New(cfg Config) (*Authenticator, error) {
	if len(cfg.Mechanisms) == 0 {
		return nil, fmt.Errorf("%w: no mechanism enabled", ErrUnsupportedMechanism)
	}
	for i, m := range cfg.Mechanisms {
		if _, ok := MechanismNamed(m); !ok && m != MechanismPlain {
			return nil, fmt.Errorf("%w %q: kcoord serves %s, %s and %s", ErrUnsupportedMechanism, m,
				MechanismPlain, MechanismSHA256, MechanismSHA512)
		}
		if slices.Contains(cfg.Mechanisms[:i], m) {
			return nil, fmt.Errorf("%w: %s is listed twice", ErrUnsupportedMechanism, m)
		}
	}
	a := &Authenticator{mechanisms: slices.Clone(cfg.Mechanisms), lookup: cfg.Lookup,
		superuser: cfg.Superuser, lifetime: cfg.SessionLifetime,
		pbkdf2: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))}
	if a.lookup == nil {
		a.lookup = func(string, Mechanism, time.Time) (Credential, bool, error) { return Credential{}, false, nil }
	}
	if cfg.Superuser != "" {
		if cfg.SuperuserPassword == "" {
			return nil, fmt.Errorf("%w: the superuser %q has no password", ErrUnacceptableCredential, cfg.Superuser)
		}
		a.super = make(map[Mechanism]Credential, len(ScramMechanisms))
		for _, m := range ScramMechanisms {
			c, err := CredentialFromPassword(m, cfg.SuperuserPassword, superuserIterations)
			if err != nil {
				return nil, err
			}
			a.super[m] = c
		}
	}
	return a, nil
}

// Mechanisms lists the enabled mechanisms, as SaslHandshake answers them.
// The caller must not modify the slice.
func (a *Authenticator) Mechanisms() []string { return a.mechanisms }

// SessionLifetime is how long a session lasts before re-authentication
// (connections.max.reauth.ms); 0 for the connection's whole life.
func (a *Authenticator) SessionLifetime() time.Duration { return a.lifetime }

// Exchange is one SASL authentication attempt on one connection. Its
// methods are called from that connection's handler goroutine only.
type Exchange interface {
	// Step takes the client's next token and returns the server's next
	// one. done reports that the exchange completed and proved the
	// client's identity, which Principal then returns. An error fails the
	// exchange for good; its message is safe to send to the client (it
	// never tells whether the user exists).
	Step(token []byte) (challenge []byte, done bool, err error)
	// Principal is the authenticated principal once Step reported done.
	Principal() Principal
}

// Start begins an exchange of mechanism. It fails with
// ErrUnsupportedMechanism for a mechanism that is not enabled (names are
// case-sensitive, as in Kafka).
func (a *Authenticator) Start(mechanism string) (Exchange, error) {
	if !slices.Contains(a.mechanisms, mechanism) {
		return nil, fmt.Errorf("%w %q: enabled are %s", ErrUnsupportedMechanism, mechanism, strings.Join(a.mechanisms, ", "))
	}
	if m, ok := MechanismNamed(mechanism); ok {
		return newScramExchange(a, m), nil
	}
	return &plainExchange{a: a}, nil
}

// credential returns the credential a login of user with m is checked
// against: the bootstrap superuser's own for that name, else the stored
// one.
func (a *Authenticator) credential(user string, m Mechanism, since time.Time) (Credential, bool, error) {
	if a.super != nil && user == a.superuser {
		c, ok := a.super[m]
		return c, ok, nil
	}
	c, ok, err := a.lookup(user, m, since)
	if err != nil {
		return Credential{}, false, fmt.Errorf("%w: %w", ErrCredentialsUnavailable, err)
	}
	return c, ok, nil
}
