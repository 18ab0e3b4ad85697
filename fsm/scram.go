package fsm

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
)

// ScramCredential is one user's SCRAM credential for one mechanism (1 =
// SCRAM-SHA-256, 2 = SCRAM-SHA-512, Kafka's type bytes), as Kafka's
// ScramCredentialRecord stores it: the salt and iteration count a client
// salts its password with, and the two keys derived from the salted
// password (RFC 5802). Neither the password nor the salted password is
// ever stored. User is the exact bytes of the name the client
// authenticates as (valid UTF-8 or not).
type ScramCredential struct {
	User       string `codec:"user"`
	Mechanism  int8   `codec:"mechanism"`
	Salt       []byte `codec:"salt"`
	StoredKey  []byte `codec:"stored_key"`
	ServerKey  []byte `codec:"server_key"`
	Iterations int32  `codec:"iterations"`
}

// The SCRAM mechanisms, numbered as Kafka's ScramMechanism type byte.
const (
	scramSHA256 int8 = 1
	scramSHA512 int8 = 2
)

// Validate answers ErrInvalidScramCredential for a credential the
// metadata group refuses to store: one without a user, or of a mechanism
// other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512). Apply refuses such a
// ScramCredentialSet; cluster.Node.ApplyMetadataChange refuses it before
// writing. It checks nothing of the salt, keys or iterations: the leader
// validates those before writing.
func (c ScramCredential) Validate() error {
	switch {
	case c.User == "":
		return fmt.Errorf("%w: no user", ErrInvalidScramCredential)
	case c.Mechanism != scramSHA256 && c.Mechanism != scramSHA512:
		return fmt.Errorf("%w: user %q has mechanism %d", ErrInvalidScramCredential, c.User, c.Mechanism)
	}
	return nil
}

// clone returns c with byte slices of its own.
func (c ScramCredential) clone() ScramCredential {
	c.Salt, c.StoredKey, c.ServerKey = bytes.Clone(c.Salt), bytes.Clone(c.StoredKey), bytes.Clone(c.ServerKey)
	return c
}

// ScramCredentialSet is the body of ScramCredentialSetType: it creates
// the (User, Mechanism) credential, or replaces the one there (an
// upsert, as AlterUserScramCredentials' upsertion). Apply answers
// ErrInvalidScramCredential (and changes nothing) when the credential has
// no user or an unknown mechanism (ScramCredential.Validate).
type ScramCredentialSet struct {
	Credential ScramCredential `codec:"credential"`
}

// ScramCredentialDelete is the body of ScramCredentialDeleteType: it
// removes the user's credential for the mechanism, and the user's other
// mechanisms keep theirs. Apply answers ErrScramCredentialNotFound
// (wrapped with the user and mechanism) when there is none, and changes
// nothing.
type ScramCredentialDelete struct {
	User      string `codec:"user"`
	Mechanism int8   `codec:"mechanism"`
}

// CommandType implements Command.
func (ScramCredentialSet) CommandType() CommandType { return ScramCredentialSetType }

// CommandType implements Command.
func (ScramCredentialDelete) CommandType() CommandType { return ScramCredentialDeleteType }

// scramKey names one stored credential.
type scramKey struct {
	user      string
	mechanism int8
}

// scramState is the part of MetaFSM that SCRAM credentials own. Its
// methods run with MetaFSM's lock held. Stored credentials are never
// modified in place (a Set replaces one), so snapshots share them.
type scramState struct {
	creds map[scramKey]ScramCredential
}

func newScramState() scramState {
	return scramState{creds: make(map[scramKey]ScramCredential)}
}

// apply applies one SCRAM command and returns Apply's response.
func (s *scramState) apply(cmd Command) any {
	switch c := cmd.(type) {
	case *ScramCredentialSet:
		if err := c.Credential.Validate(); err != nil {
			return err
		}
		s.creds[scramKey{c.Credential.User, c.Credential.Mechanism}] = c.Credential
	case *ScramCredentialDelete:
		k := scramKey{c.User, c.Mechanism}
		if _, ok := s.creds[k]; !ok {
			return fmt.Errorf("%w: user %q mechanism %d", ErrScramCredentialNotFound, c.User, c.Mechanism)
		}
		delete(s.creds, k)
	}
	return nil
}

// snapshot returns the credentials sorted by user, then mechanism,
// sharing their byte slices.
func (s *scramState) snapshot() []ScramCredential {
	out := make([]ScramCredential, 0, len(s.creds))
	for _, c := range s.creds {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ScramCredential) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
	})
	return out
}

// restore replaces the state with a snapshot's.
func (s *scramState) restore(creds []ScramCredential) {
	*s = newScramState()
	for _, c := range creds {
		s.creds[scramKey{c.User, c.Mechanism}] = c
	}
}

// ScramCredential returns the user's credential for the mechanism, with
// byte slices of its own.
func (f *MetaFSM) ScramCredential(user string, mechanism int8) (ScramCredential, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.scram.creds[scramKey{user, mechanism}]
	if !ok {
		return ScramCredential{}, false
	}
	return c.clone(), true
}

// ScramCredentials returns every stored credential sorted by user, then
// mechanism, with byte slices of their own.
func (f *MetaFSM) ScramCredentials() []ScramCredential {
	f.mu.RLock()
	out := f.scram.snapshot()
	f.mu.RUnlock()
	for i := range out {
		out[i] = out[i].clone()
	}
	return out
}
