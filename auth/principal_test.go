package auth

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"os/exec"
	"strings"
	"testing"
)

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
	oidPostal = asn1.ObjectIdentifier{2, 5, 4, 17}
	oidStreet = asn1.ObjectIdentifier{2, 5, 4, 9}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
)

// principalCases are subjects with what Java's X500Principal.getName()
// answers for them (read off the JDK with testdata/X500Name.java).
var principalCases = []struct {
	subject pkix.RDNSequence
	java    string
}{
	{pkix.RDNSequence{{{Type: oidDC, Value: "com"}}, {{Type: oidDC, Value: "example"}}, {{Type: oidSerial, Value: "42"}}, {{Type: oidCN, Value: "alice"}}},
		"CN=alice,2.5.4.5=#13023432,DC=example,DC=com"},
	{pkix.RDNSequence{{{Type: oidO, Value: `a=b#c,d+e;f<g>h"i\j`}}, {{Type: oidCN, Value: " #lead trail "}}},
		`CN=\ \#lead trail\ ,O=a\=b\#c\,d\+e\;f\<g\>h\"i\\j`},
	{pkix.RDNSequence{{{Type: oidEmail, Value: "x@y.z"}}, {{Type: oidUID, Value: "u1"}}, {{Type: oidCN, Value: "ünï"}}},
		"CN=ünï,UID=u1,1.2.840.113549.1.9.1=#0c057840792e7a"},
	{pkix.RDNSequence{{{Type: oidCN, Value: "a"}, {Type: oidO, Value: "b"}}}, "CN=a+O=b"},
	{pkix.RDNSequence{{{Type: oidPostal, Value: "12345"}}, {{Type: oidStreet, Value: "Main St"}}},
		"STREET=Main St,2.5.4.17=#13053132333435"},
}

// TestCertificatePrincipalIsJavas: a client certificate's principal is
// the subject as Kafka's DEFAULT principal mapping writes it, so that a
// super.users entry or ACL copied from Kafka matches. When a JDK is on
// the PATH it is asked too.
func TestCertificatePrincipalIsJavas(t *testing.T) {
	var input bytes.Buffer
	for _, tc := range principalCases {
		raw, err := asn1.Marshal(tc.subject)
		if err != nil {
			t.Fatal(err)
		}
		input.WriteString(base64.StdEncoding.EncodeToString(raw) + "\n")
		if got := CertificatePrincipal(&x509.Certificate{RawSubject: raw}); got != User(tc.java) {
			t.Errorf("principal %q, Java's User:%s", got, tc.java)
		}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Log("no JDK on the PATH: checked against the recorded answers only")
		return
	}
	cmd := exec.Command(java, "testdata/X500Name.java")
	cmd.Stdin = &input
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("the JDK did not run: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, tc := range principalCases {
		if i >= len(lines) || lines[i] != tc.java {
			t.Errorf("case %d: the JDK answers %q now, the test records %q", i, lines[min(i, len(lines)-1)], tc.java)
		}
	}
}
