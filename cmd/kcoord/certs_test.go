package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runCerts runs "kcoord certs --dir dir args..." and returns its output.
func runCerts(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{"certs", "--dir", dir}, args...))
	err := root.Execute()
	return out.String(), err
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cert
}

func caPool(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, filepath.Join(dir, "ca.pem")))
	return pool
}

// TestCertsNodeCertVerifiesForHostAndLoopback: a node's certificate
// chains to the CA for its own name, for 127.0.0.1 and for localhost (the
// addresses a client on the Docker host dials), for server and client
// auth alike, as the Kafka listener and the Raft port need; an IP host
// gets an IP SAN; the pair loads as kcoord serve loads it.
func TestCertsNodeCertVerifiesForHostAndLoopback(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if out, err := runCerts(t, dir, "--hosts", "kcoord1,10.1.2.3", "--days", "30"); err != nil {
		t.Fatalf("kcoord certs: %v\n%s", err, out)
	}
	pool := caPool(t, dir)
	for host, names := range map[string][]string{
		"kcoord1":  {"kcoord1", "127.0.0.1", "localhost"},
		"10.1.2.3": {"10.1.2.3", "127.0.0.1", "localhost"},
	} {
		cert := readCert(t, filepath.Join(dir, host+".pem"))
		if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
			t.Errorf("%s: ExtKeyUsage %v, want server and client auth", host, cert.ExtKeyUsage)
		}
		for _, name := range names {
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
					t.Errorf("%s's certificate for %s, usage %v: %v", host, name, usage, err)
				}
			}
		}
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: "kcoord2", Roots: pool}); err == nil {
			t.Errorf("%s's certificate verified for kcoord2", host)
		}
		if _, err := tls.LoadX509KeyPair(filepath.Join(dir, host+".pem"), filepath.Join(dir, host+"-key.pem")); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
}

// TestCertsClientCertNamesItsPrincipal: a client certificate carries
// CN=NAME (the principal a mutual-TLS listener sees) and is good for
// client auth only.
func TestCertsClientCertNamesItsPrincipal(t *testing.T) {
	dir := t.TempDir()
	if out, err := runCerts(t, dir, "--clients", "app"); err != nil {
		t.Fatalf("kcoord certs: %v\n%s", err, out)
	}
	cert := readCert(t, filepath.Join(dir, "client-app.pem"))
	if cert.Subject.CommonName != "app" || cert.Subject.String() != "CN=app" {
		t.Errorf("subject %q, want CN=app", cert.Subject)
	}
	pool := caPool(t, dir)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client auth: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verified for server auth")
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "client-app.pem"), filepath.Join(dir, "client-app-key.pem")); err != nil {
		t.Error(err)
	}
}

// TestCertsRerunKeepsCAAndSecrets: a second run without --force (rotating
// one node's certificate) keeps the CA, the gossip key and the password,
// and the new certificate chains to the kept CA; --force makes a new CA.
func TestCertsRerunKeepsCAAndSecrets(t *testing.T) {
	dir := t.TempDir()
	if out, err := runCerts(t, dir, "--hosts", "kcoord1,kcoord2"); err != nil {
		t.Fatalf("kcoord certs: %v\n%s", err, out)
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca, caKey, gossip, password, node2 := read("ca.pem"), read("ca-key.pem"), read("gossip.key"), read("superuser.password"), read("kcoord2.pem")

	out, err := runCerts(t, dir, "--hosts", "kcoord2")
	if err != nil {
		t.Fatalf("rotating kcoord2: %v\n%s", err, out)
	}
	if !strings.Contains(out, "kept "+filepath.Join(dir, "ca.pem")) {
		t.Errorf("output does not say the CA was kept:\n%s", out)
	}
	for name, before := range map[string][]byte{"ca.pem": ca, "ca-key.pem": caKey, "gossip.key": gossip, "superuser.password": password} {
		if !bytes.Equal(read(name), before) {
			t.Errorf("%s changed on a rerun without --force", name)
		}
	}
	if bytes.Equal(read("kcoord2.pem"), node2) {
		t.Error("kcoord2.pem was not issued again")
	}
	if _, err := readCert(t, filepath.Join(dir, "kcoord2.pem")).Verify(x509.VerifyOptions{DNSName: "kcoord2", Roots: caPool(t, dir)}); err != nil {
		t.Errorf("the rotated certificate against the kept CA: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 8 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files %v, want the CA, two nodes, gossip.key and superuser.password (no temporary files)", names)
	}

	if out, err := runCerts(t, dir, "--hosts", "kcoord1", "--force"); err != nil {
		t.Fatalf("--force: %v\n%s", err, out)
	}
	if bytes.Equal(read("ca.pem"), ca) {
		t.Error("--force kept the CA")
	}
	if _, err := readCert(t, filepath.Join(dir, "kcoord2.pem")).Verify(x509.VerifyOptions{DNSName: "kcoord2", Roots: caPool(t, dir)}); err == nil {
		t.Error("a certificate of the replaced CA still verifies")
	}
}

// TestCertsSecretsAreOwnerOnly: keys, the gossip key and the password are
// mode 0600, certificates 0644; the gossip key is what --gossip-key-file
// reads (one base64 key of 32 bytes) and the password one line.
func TestCertsSecretsAreOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	if out, err := runCerts(t, dir, "--hosts", "kcoord1", "--clients", "app"); err != nil {
		t.Fatalf("kcoord certs: %v\n%s", err, out)
	}
	for name, want := range map[string]os.FileMode{
		"ca-key.pem": 0o600, "kcoord1-key.pem": 0o600, "client-app-key.pem": 0o600, "gossip.key": 0o600, "superuser.password": 0o600,
		"ca.pem": 0o644, "kcoord1.pem": 0o644, "client-app.pem": 0o644,
	} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "gossip.key"))
	if key, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(string(b), "\n")); err != nil || len(key) != 32 {
		t.Errorf("gossip.key %q: %d bytes, %v; want one base64 line of 32 bytes", b, len(key), err)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "superuser.password"))
	if pw := string(b); strings.Count(pw, "\n") != 1 || !strings.HasSuffix(pw, "\n") || len(pw) < 17 {
		t.Errorf("superuser.password %q: want one line of at least 16 characters", pw)
	}
}

// TestCertsRefusesBadInput: names that would escape the directory or
// clobber the CA's files, a half CA and a CA key that is not the CA's.
func TestCertsRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--hosts", "../etc"},
		{"--hosts", "ca"},
		{"--clients", "a/b"},
		{"--days", "0"},
	} {
		if _, err := runCerts(t, t.TempDir(), args...); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}

	dir := t.TempDir()
	if out, err := runCerts(t, dir); err != nil {
		t.Fatalf("kcoord certs: %v\n%s", err, out)
	}
	other := t.TempDir()
	if out, err := runCerts(t, other); err != nil {
		t.Fatalf("kcoord certs: %v\n%s", err, out)
	}
	otherKey, _ := os.ReadFile(filepath.Join(other, "ca-key.pem"))
	if err := os.WriteFile(filepath.Join(dir, "ca-key.pem"), otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runCerts(t, dir, "--hosts", "kcoord1"); err == nil || !strings.Contains(err.Error(), "not the key of") {
		t.Errorf("a CA key of another CA: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "ca-key.pem")); err != nil {
		t.Fatal(err)
	}
	if _, err := runCerts(t, dir, "--hosts", "kcoord1"); err == nil || !strings.Contains(err.Error(), "only one of") {
		t.Errorf("ca.pem without ca-key.pem: %v", err)
	}
}
