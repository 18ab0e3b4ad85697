package auth

import (
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
)

// Mechanism is a SCRAM mechanism, numbered as Kafka's ScramMechanism type
// byte (the Mechanism field of DescribeUserScramCredentials and
// AlterUserScramCredentials).
type Mechanism int8

const (
	// ScramSHA256 is SCRAM-SHA-256 (RFC 7677).
	ScramSHA256 Mechanism = 1
	// ScramSHA512 is SCRAM-SHA-512.
	ScramSHA512 Mechanism = 2
)

// SASL mechanism names, as sasl.enabled.mechanisms and SaslHandshake
// spell them.
const (
	MechanismPlain  = "PLAIN"
	MechanismSHA256 = "SCRAM-SHA-256"
	MechanismSHA512 = "SCRAM-SHA-512"
)

// Iteration bounds of a SCRAM credential, Kafka's for both mechanisms
// (ScramMechanism.minIterations, ScramControlManager.MAX_ITERATIONS).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// ScramMechanisms lists the SCRAM mechanisms, strongest first: PLAIN
// checks a password against the first one a user has.
var ScramMechanisms = []Mechanism{ScramSHA512, ScramSHA256}

// Name is the mechanism's SASL name, "SCRAM-SHA-256".
func (m Mechanism) Name() string {
	switch m {
	case ScramSHA256:
		return MechanismSHA256
	case ScramSHA512:
		return MechanismSHA512
	}
	return fmt.Sprintf("Mechanism(%d)", int8(m))
}

// String implements fmt.Stringer.
func (m Mechanism) String() string { return m.Name() }

// Valid reports whether m is a SCRAM mechanism kcoord knows.
func (m Mechanism) Valid() bool { return m == ScramSHA256 || m == ScramSHA512 }

// hash returns the mechanism's hash function; m must be Valid.
func (m Mechanism) hash() func() hash.Hash {
	if m == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// MechanismNamed returns the SCRAM mechanism of a SASL name.
func MechanismNamed(name string) (Mechanism, bool) {
	switch name {
	case MechanismSHA256:
		return ScramSHA256, true
	case MechanismSHA512:
		return ScramSHA512, true
	}
	return 0, false
}
