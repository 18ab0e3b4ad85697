package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kcoord test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a certificate for cn signed by the CA (a server one for
// 127.0.0.1 when server is set), as PEM certificate and key.
func (ca *testCA) issue(t *testing.T, cn string, serial int64, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// startTLSServer starts a node whose Kafka listener serves a certificate
// of ca (serial 2), requiring client certificates when mutual.
func startTLSServer(t *testing.T, ca *testCA, mutual bool) (*Server, string, string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	c, k := ca.issue(t, "kcoord", 2, true)
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	cfg := TestConfig(t.TempDir())
	cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
	if mutual {
		caFile := filepath.Join(dir, "ca.pem")
		writeFile(t, caFile, ca.pem)
		cfg.TLSClientCAFile = caFile
	}
	s := StartTestServer(t, cfg)
	return s, certFile, keyFile
}

// tlsClient is a TLS config trusting ca, presenting cert when given.
func tlsClient(ca *testCA, cert *tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

// metadata asks the node for its brokers through a franz-go client.
func metadata(t *testing.T, addr string, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// TestKafkaListenerServesTLS: a franz-go client over TLS is served; a
// plaintext client fails cleanly (no answer, the connection closes).
func TestKafkaListenerServesTLS(t *testing.T) {
	ca := newTestCA(t)
	s, _, _ := startTLSServer(t, ca, false)
	addr := s.KafkaAddr().String()
	if err := metadata(t, addr, kgo.DialTLSConfig(tlsClient(ca, nil))); err != nil {
		t.Fatalf("a TLS client: %v", err)
	}
	if err := metadata(t, addr); err == nil {
		t.Fatal("a plaintext client was answered on the TLS listener")
	}
}

// TestKafkaListenerRequiresAClientCertificate: with --tls-client-ca-file,
// a client without a certificate, or with one of another CA, is refused,
// and one with a certificate of the CA is served.
func TestKafkaListenerRequiresAClientCertificate(t *testing.T) {
	ca := newTestCA(t)
	s, _, _ := startTLSServer(t, ca, true)
	addr := s.KafkaAddr().String()
	if err := metadata(t, addr, kgo.DialTLSConfig(tlsClient(ca, nil))); err == nil {
		t.Fatal("a client without a certificate was served under mutual TLS")
	}
	other := newTestCA(t)
	oc, ok := other.issue(t, "intruder", 3, false)
	foreign, err := tls.X509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	if err := metadata(t, addr, kgo.DialTLSConfig(tlsClient(ca, &foreign))); err == nil {
		t.Fatal("a client with another CA's certificate was served")
	}
	cc, ck := ca.issue(t, "alice", 4, false)
	mine, err := tls.X509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	if err := metadata(t, addr, kgo.DialTLSConfig(tlsClient(ca, &mine))); err != nil {
		t.Fatalf("a client with the CA's certificate: %v", err)
	}
}

// servedSerial is the serial of the certificate the listener presents to
// a new connection.
func servedSerial(t *testing.T, addr string, ca *testCA) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, tlsClient(ca, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestKafkaListenerReloadsItsCertificate: a renewed certificate is served
// to new connections once its files change, and on ReloadTLS (SIGHUP); a
// pair that does not load leaves the previous one served.
func TestKafkaListenerReloadsItsCertificate(t *testing.T) {
	ca := newTestCA(t)
	s, certFile, keyFile := startTLSServer(t, ca, false)
	addr := s.KafkaAddr().String()
	if got := servedSerial(t, addr, ca); got != 2 {
		t.Fatalf("served serial %d, want 2", got)
	}
	c, k := ca.issue(t, "kcoord", 5, true)
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	deadline := time.Now().Add(5 * time.Second)
	for servedSerial(t, addr, ca) != 5 {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not served after its files changed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	c, k = ca.issue(t, "kcoord", 6, true)
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, addr, ca); got != 6 {
		t.Fatalf("after ReloadTLS the served serial is %d, want 6", got)
	}
	writeFile(t, keyFile, []byte("not a key"))
	if err := s.ReloadTLS(); err == nil {
		t.Fatal("a pair that does not load was reloaded")
	}
	if got := servedSerial(t, addr, ca); got != 6 {
		t.Fatalf("after a failed reload the served serial is %d, want 6", got)
	}
}

// TestTLSFlagsGoTogether: a certificate without its key, or a client CA
// without TLS, is refused at startup with a clear message.
func TestTLSFlagsGoTogether(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"a certificate without a key": func(c *Config) { c.TLSCertFile = "cert.pem" },
		"a key without a certificate": func(c *Config) { c.TLSKeyFile = "key.pem" },
		"a client CA without TLS":     func(c *Config) { c.TLSClientCAFile = "ca.pem" },
	} {
		cfg := TestConfig(t.TempDir())
		mutate(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg := TestConfig(t.TempDir())
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(t.TempDir(), "missing.pem"), filepath.Join(t.TempDir(), "missing-key.pem")
	s, err := New(cfg, TestLogger(t), nil)
	if err == nil {
		err = s.Start()
		_ = s.Shutdown(context.Background())
	}
	if err == nil {
		t.Fatal("a node started with certificate files that do not exist")
	}
}
