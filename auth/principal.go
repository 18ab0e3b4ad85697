package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"strings"
)

// Principal is who a connection acts as: Kafka's KafkaPrincipal, a type
// and a name ("User:alice"). ACLs name principals by their String form.
type Principal struct {
	Type string
	Name string
}

// UserType is the principal type of every principal kcoord authenticates,
// as in Kafka.
const UserType = "User"

// Anonymous is the principal of a connection that has not authenticated:
// a plaintext or TLS connection without a client certificate, or a SASL
// connection before its exchange completes (Kafka's User:ANONYMOUS).
var Anonymous = Principal{Type: UserType, Name: "ANONYMOUS"}

// User returns the user principal of name.
func User(name string) Principal { return Principal{Type: UserType, Name: name} }

// String is the principal as ACLs and super.users write it: "User:alice".
func (p Principal) String() string { return p.Type + ":" + p.Name }

// IsAnonymous reports whether p is Anonymous.
func (p Principal) IsAnonymous() bool { return p == Anonymous }

// ErrInvalidPrincipal is a principal string without "Type:Name".
var ErrInvalidPrincipal = errors.New("auth: invalid principal")

// ParsePrincipal parses "Type:Name" as Kafka's SecurityUtils.parseKafkaPrincipal
// does: the type is up to the first colon and the name is the rest (it may
// hold colons). Both must be non-empty.
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" || name == "" {
		return Principal{}, fmt.Errorf("%w %q: want Type:Name, as User:alice", ErrInvalidPrincipal, s)
	}
	return Principal{Type: typ, Name: name}, nil
}

// CertificatePrincipal is the principal of a verified client certificate
// under Kafka's default ssl.principal.mapping.rules (DEFAULT): a user
// named by the certificate's whole subject distinguished name in RFC 2253
// form, most specific attribute first ("CN=alice,OU=eng,O=example"), as
// Java's X500Principal.getName() writes it. The attributes keep the order
// the certificate encodes them in.
func CertificatePrincipal(cert *x509.Certificate) Principal {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) != 0 {
		return User(cert.Subject.String()) // crypto/x509 parsed it; its own rendering
	}
	return User(rdns.String())
}
