package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"fmt"
	"hash"
)

// Credential is one user's SCRAM credential for one mechanism, as Kafka
// stores it (ScramCredential): the salt and iteration count the client
// salts its password with, and the two keys derived from the salted
// password (RFC 5802). The password itself is never stored, nor the
// salted password.
type Credential struct {
	Mechanism  Mechanism
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// NewCredential derives the stored credential from a salted password, as
// AlterUserScramCredentials carries it (Kafka's ScramFormatter:
// StoredKey = H(HMAC(salted, "Client Key")), ServerKey = HMAC(salted,
// "Server Key")). m must be Valid.
func NewCredential(m Mechanism, salt, saltedPassword []byte, iterations int32) Credential {
	h := m.hash()
	clientKey := hmacOf(h, saltedPassword, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return Credential{
		Mechanism:  m,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  sum.Sum(nil),
		ServerKey:  hmacOf(h, saltedPassword, "Server Key"),
		Iterations: iterations,
	}
}

// SaltPassword is Hi(password, salt, iterations) of RFC 5802: PBKDF2 with
// the mechanism's HMAC, as a SCRAM client computes it. m must be Valid.
func SaltPassword(m Mechanism, password string, salt []byte, iterations int32) ([]byte, error) {
	return pbkdf2.Key(m.hash(), password, salt, int(iterations), m.hash()().Size())
}

// CredentialFromPassword salts password with a fresh random salt and
// derives its credential, as kafka-configs.sh does for
// --add-config 'SCRAM-SHA-256=[password=...]'.
func CredentialFromPassword(m Mechanism, password string, iterations int32) (Credential, error) {
	if !m.Valid() {
		return Credential{}, fmt.Errorf("%w: %s", ErrUnsupportedMechanism, m)
	}
	salt := make([]byte, 32)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails
	salted, err := SaltPassword(m, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return NewCredential(m, salt, salted, iterations), nil
}

// Matches reports whether password is the one c was derived from. It
// costs one PBKDF2 of c.Iterations rounds, and compares in constant time.
func (c Credential) Matches(password string) bool {
	if !c.Mechanism.Valid() {
		return false
	}
	salted, err := SaltPassword(c.Mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return hmac.Equal(NewCredential(c.Mechanism, c.Salt, salted, c.Iterations).StoredKey, c.StoredKey)
}

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	mac := hmac.New(h, key)
	mac.Write([]byte(msg))
	return mac.Sum(nil)
}
