package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// The files "kcoord certs" writes in --dir.
const (
	certsCAFile        = "ca.pem"
	certsCAKeyFile     = "ca-key.pem"
	certsGossipKeyFile = "gossip.key"
	certsPasswordFile  = "superuser.password"
)

// certsCAValidity is how long a new CA is valid, unless --days asks for
// longer.
const certsCAValidity = 10 * 365 * 24 * time.Hour

// certsClockSkew backdates every certificate, for hosts whose clocks run
// a little behind the one that made it.
const certsClockSkew = time.Hour

// certsName is what a host or client name may be: it becomes a file name.
var certsName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// certsOptions are the flags of "kcoord certs".
type certsOptions struct {
	dir     string
	hosts   []string
	clients []string
	days    int
	force   bool
}

func newCertsCmd() *cobra.Command {
	o := &certsOptions{}
	cmd := &cobra.Command{
		Use:   "certs --dir DIR [--hosts HOST,...] [--clients NAME,...]",
		Short: "Make a CA, node and client certificates, a gossip key and a superuser password",
		Long: `Write what a secured cluster needs into --dir, all with ECDSA P-256 keys:

  ca.pem, ca-key.pem            a CA (kept when it exists; --force makes a new one)
  HOST.pem, HOST-key.pem        per --hosts entry: server and client auth, for
                                HOST (DNS, or IP when it is one), 127.0.0.1 and
                                localhost; for --tls-cert-file and --raft-tls-cert-file
  client-NAME.pem, -key.pem     per --clients entry: client auth, CN=NAME
  gossip.key                    for --gossip-key-file (kept when it exists)
  superuser.password            for --sasl-superuser-password-file (kept when it exists)

Keys, the gossip key and the password are mode 0600. An existing CA issues
the new certificates, so rotating one node's certificate is

  kcoord certs --dir certs --hosts kcoord2

Each file is replaced through a rename, the key before its certificate, as
a running node's files should be (docs/security.md): it keeps serving the old
pair until the new one loads.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.OutOrStdout(), time.Now())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "directory to write into (created when missing)")
	f.StringSliceVar(&o.hosts, "hosts", nil, "node host names or IPs, one certificate each")
	f.StringSliceVar(&o.clients, "clients", nil, "client names, one certificate each (CN=NAME)")
	f.IntVar(&o.days, "days", 365, "days the node and client certificates are valid")
	f.BoolVar(&o.force, "force", false, "replace an existing CA (every certificate it issued is then untrusted)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// validate checks the flags, after dropping blank and repeated names.
func (o *certsOptions) validate() error {
	o.hosts, o.clients = dedupe(o.hosts), dedupe(o.clients)
	if o.days < 1 {
		return fmt.Errorf("--days %d: must be at least 1", o.days)
	}
	for _, h := range o.hosts {
		switch {
		case net.ParseIP(h) != nil:
		case !certsName.MatchString(h):
			return fmt.Errorf("--hosts %q: want a host name or an IP address", h)
		case h == "ca":
			return errors.New(`--hosts "ca": its files would be the CA's`)
		}
	}
	for _, c := range o.clients {
		if !certsName.MatchString(c) {
			return fmt.Errorf("--clients %q: want letters, digits, '.', '_' or '-'", c)
		}
	}
	return nil
}

func (o *certsOptions) run(w io.Writer, now time.Time) error {
	if err := o.validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	ca, err := o.loadOrCreateCA(w, now)
	if err != nil {
		return err
	}
	notAfter := now.Add(time.Duration(o.days) * 24 * time.Hour)
	if !now.Before(ca.cert.NotAfter) {
		return fmt.Errorf("the CA in %s expired on %s: make a new one with --force", o.dir, ca.cert.NotAfter.Format(time.DateOnly))
	}
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
		fmt.Fprintf(w, "the CA expires %s: so do the certificates it issues now\n", notAfter.Format(time.DateOnly))
	}
	for _, h := range o.hosts {
		if err := o.issue(w, ca, hostTemplate(h, now, notAfter), h); err != nil {
			return err
		}
	}
	for _, c := range o.clients {
		tmpl := leafTemplate(c, now, notAfter, x509.ExtKeyUsageClientAuth)
		if err := o.issue(w, ca, tmpl, "client-"+c); err != nil {
			return err
		}
	}
	if err := o.ensureSecret(w, certsGossipKeyFile, 32, base64.StdEncoding); err != nil {
		return err
	}
	return o.ensureSecret(w, certsPasswordFile, 24, base64.RawURLEncoding)
}

// certsCA is the CA that signs the certificates.
type certsCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// loadOrCreateCA reads ca.pem and ca-key.pem from the directory, or
// writes a new pair when there is none or --force is set.
func (o *certsOptions) loadOrCreateCA(w io.Writer, now time.Time) (*certsCA, error) {
	certPath, keyPath := o.path(certsCAFile), o.path(certsCAKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	for _, err := range []error{certErr, keyErr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	switch exists := certErr == nil || keyErr == nil; {
	case exists && !o.force:
		if certErr != nil || keyErr != nil {
			return nil, fmt.Errorf("%s holds only one of %s and %s: restore the other, or make a new CA with --force", o.dir, certsCAFile, certsCAKeyFile)
		}
		ca, err := parseCA(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("the CA in %s: %w (make a new one with --force)", o.dir, err)
		}
		fmt.Fprintf(w, "kept %s: %q, until %s\n", certPath, ca.cert.Subject.CommonName, ca.cert.NotAfter.Format(time.DateOnly))
		return ca, nil
	case exists:
		fmt.Fprintf(w, "replacing the CA in %s: certificates it issued are no longer trusted; issue every node's and client's again\n", o.dir)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	validity := max(certsCAValidity, time.Duration(o.days)*24*time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "kcoord CA " + now.UTC().Format(time.DateOnly)},
		NotBefore:             now.Add(-certsClockSkew),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := o.writePair(w, certsCAFile, certsCAKeyFile, der, key); err != nil {
		return nil, err
	}
	return &certsCA{cert: cert, key: key}, nil
}

// parseCA parses a CA certificate and its private key (PKCS #8, EC or
// PKCS #1), checking that they belong together.
func parseCA(certPEM, keyPEM []byte) (*certsCA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", certsCAFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certsCAFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s: not a CA certificate", certsCAFile)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%s: no PEM key", certsCAKeyFile)
	}
	var parsed any
	if parsed, err = x509.ParsePKCS8PrivateKey(kb.Bytes); err != nil {
		if parsed, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
			if parsed, err = x509.ParsePKCS1PrivateKey(kb.Bytes); err != nil {
				return nil, fmt.Errorf("%s: not a PKCS #8, EC or RSA private key", certsCAKeyFile)
			}
		}
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: a %T cannot sign", certsCAKeyFile, parsed)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of %s", certsCAKeyFile, certsCAFile)
	}
	return &certsCA{cert: cert, key: key}, nil
}

// leafTemplate is a certificate for cn with the given extended key
// usages, valid from now (less the clock skew) to notAfter.
func leafTemplate(cn string, now, notAfter time.Time, usages ...x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-certsClockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
}

// hostTemplate is a node's certificate: server and client auth (the
// Kafka listener serves it, the Raft port presents it both ways), for the
// host (a DNS name, or an IP address when it parses as one), 127.0.0.1
// and localhost, so that ports published on the loopback verify too.
func hostTemplate(host string, now, notAfter time.Time) *x509.Certificate {
	tmpl := leafTemplate(host, now, notAfter, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if host != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	tmpl.DNSNames = append(tmpl.DNSNames, "localhost")
	if loopback := net.IPv4(127, 0, 0, 1); !slices.ContainsFunc(tmpl.IPAddresses, loopback.Equal) {
		tmpl.IPAddresses = append(tmpl.IPAddresses, loopback)
	}
	return tmpl
}

// issue makes a new key, has the CA sign tmpl for it and writes
// NAME.pem and NAME-key.pem.
func (o *certsOptions) issue(w io.Writer, ca *certsCA, tmpl *x509.Certificate, name string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return fmt.Errorf("certificate of %s: %w", name, err)
	}
	return o.writePair(w, name+".pem", name+"-key.pem", der, key)
}

// writePair writes a certificate and its key, the key first: a node
// watching the files loads the pair once the certificate changes.
func (o *certsOptions) writePair(w io.Writer, certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(o.path(keyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(o.path(certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	names := slices.Clone(cert.DNSNames)
	for _, ip := range cert.IPAddresses {
		names = append(names, ip.String())
	}
	what := "CN=" + cert.Subject.CommonName
	if len(names) > 0 {
		what += ", for " + strings.Join(names, ", ")
	}
	fmt.Fprintf(w, "wrote %s, %s: %s, until %s\n", o.path(certFile), o.path(keyFile), what, cert.NotAfter.Format(time.DateOnly))
	return nil
}

// ensureSecret writes n random bytes in enc and a newline to name, mode
// 0600, unless the file exists.
func (o *certsOptions) ensureSecret(w io.Writer, name string, n int, enc *base64.Encoding) error {
	path := o.path(name)
	switch _, err := os.Stat(path); {
	case err == nil:
		fmt.Fprintf(w, "kept %s\n", path)
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	if err := writeFileAtomic(path, []byte(enc.EncodeToString(b)+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n", path)
	return nil
}

func (o *certsOptions) path(name string) string { return filepath.Join(o.dir, name) }

// writeFileAtomic replaces path with data, mode perm, through a temporary
// file in the same directory and a rename: readers see the old file or
// the new one, never part of it.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename, there is nothing to remove
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// randomSerial is a random 128-bit certificate serial number.
func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n.Add(n, big.NewInt(1)) // never 0
}

// dedupe returns names in order without repeats or blanks.
func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
