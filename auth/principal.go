package auth

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
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
// named by the certificate's whole subject distinguished name as Java's
// X500Principal.getName() writes it (RFC 2253), most specific attribute
// first: "CN=alice,OU=eng,DC=example,DC=com". As in Java, the attributes
// RFC 2253 names (CN, C, L, ST, O, OU, STREET, DC, UID) are written by
// keyword, every other one by its OID with the value's DER in hex
// ("2.5.4.5=#13023432" for a serial number), and ,=+<>#;"\ and a
// leading or trailing space are escaped with a backslash.
// TestCertificatePrincipalIsJavas checks it against the JDK.
func CertificatePrincipal(cert *x509.Certificate) Principal {
	dn, err := rfc2253(cert.RawSubject)
	if err != nil {
		return User(cert.Subject.String()) // crypto/x509 parsed it; its own rendering
	}
	return User(dn)
}

// rfc2253Keywords are the attribute types RFC 2253 writes by keyword.
var rfc2253Keywords = map[string]string{
	"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
	"2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}

// rfc2253 renders a DER Name (a SEQUENCE of SETs of AttributeTypeAndValue)
// as Java's X500Principal.getName() does.
func rfc2253(raw []byte) (string, error) {
	var rdns []asn1.RawValue
	if rest, err := asn1.Unmarshal(raw, &rdns); err != nil || len(rest) != 0 {
		return "", errors.New("auth: a malformed subject")
	}
	parts := make([]string, 0, len(rdns))
	for i := len(rdns) - 1; i >= 0; i-- {
		var avas []string
		for rest := rdns[i].Bytes; len(rest) > 0; {
			var ava struct {
				Type  asn1.ObjectIdentifier
				Value asn1.RawValue
			}
			var err error
			if rest, err = asn1.Unmarshal(rest, &ava); err != nil {
				return "", err
			}
			keyword, known := rfc2253Keywords[ava.Type.String()]
			value, isString := derString(ava.Value)
			switch {
			case known && isString:
				avas = append(avas, keyword+"="+escapeRFC2253(value))
			case known:
				avas = append(avas, keyword+"=#"+hex.EncodeToString(ava.Value.FullBytes))
			default:
				avas = append(avas, ava.Type.String()+"=#"+hex.EncodeToString(ava.Value.FullBytes))
			}
		}
		parts = append(parts, strings.Join(avas, "+"))
	}
	return strings.Join(parts, ","), nil
}

// derString decodes the string types a directory value may have.
func derString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagUTF8String, asn1.TagIA5String:
		return string(v.Bytes), true
	case asn1.TagT61String: // Latin-1, as Java reads it
		r := make([]rune, len(v.Bytes))
		for i, b := range v.Bytes {
			r[i] = rune(b)
		}
		return string(r), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(u)), true
	}
	return "", false
}

// escapeRFC2253 escapes a value as Java's RFC 2253 form does.
func escapeRFC2253(v string) string {
	var b strings.Builder
	for i, r := range v {
		if strings.ContainsRune(`,=+<>#;"\`, r) || (r == ' ' && (i == 0 || i == len(v)-1)) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
