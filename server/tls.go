package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// This file is TLS on the Kafka listener: --tls-cert-file and
// --tls-key-file (PEM), reloaded when the files change or on SIGHUP
// (Server.ReloadTLS), and --tls-client-ca-file, which makes the listener
// require a client certificate from that CA (mutual TLS). TLS 1.2 or later
// only.

// certCheckInterval is how often a handshake looks at the certificate
// files' modification times: a renewed certificate is served within it.
const certCheckInterval = time.Second

// certReloader serves the listener's certificate, reloading it from its
// files when they change. Handshakes (one goroutine per connection) call
// get; ReloadTLS calls reload.
type certReloader struct {
	certFile, keyFile string
	logger            hclog.Logger

	mu              sync.Mutex
	cert            *tls.Certificate
	certMod, keyMod time.Time
	checked         time.Time
}

// newCertReloader loads the pair once: a node does not start with a
// certificate it cannot read.
func newCertReloader(certFile, keyFile string, logger hclog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, logger: logger}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the pair and its modification times. Called with r.mu held
// (or before r is shared).
func (r *certReloader) load() error {
	certMod, keyMod, err := modTimes(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	r.cert, r.certMod, r.keyMod, r.checked = &cert, certMod, keyMod, time.Now()
	return nil
}

// modTimes are the certificate's and the key's modification times.
func modTimes(certFile, keyFile string) (certMod, keyMod time.Time, err error) {
	cfi, err := os.Stat(certFile)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("tls: %w", err)
	}
	kfi, err := os.Stat(keyFile)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("tls: %w", err)
	}
	return cfi.ModTime(), kfi.ModTime(), nil
}

// get is tls.Config.GetCertificate: the current certificate, reloaded
// first if its files changed since the last look (at most once every
// certCheckInterval). A reload that fails keeps the certificate served
// so far and logs why.
func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) >= certCheckInterval {
		r.checked = time.Now()
		certMod, keyMod, err := modTimes(r.certFile, r.keyFile)
		if err == nil && (!certMod.Equal(r.certMod) || !keyMod.Equal(r.keyMod)) {
			r.reloadLocked("the files changed")
		}
	}
	return r.cert, nil
}

// reload reloads the pair now (SIGHUP).
func (r *certReloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked("asked to")
}

func (r *certReloader) reloadLocked(why string) error {
	if err := r.load(); err != nil {
		r.logger.Warn("TLS certificate not reloaded; serving the previous one", "cert_file", r.certFile, "key_file", r.keyFile, "error", err)
		return err
	}
	r.logger.Info("TLS certificate reloaded", "cert_file", r.certFile, "reason", why)
	return nil
}

// listenerTLS builds the Kafka listener's TLS config from c, or nil for
// plaintext.
func (c *Config) listenerTLS(logger hclog.Logger) (*tls.Config, *certReloader, error) {
	if c.TLSCertFile == "" {
		return nil, nil, nil
	}
	r, err := newCertReloader(c.TLSCertFile, c.TLSKeyFile, logger)
	if err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.get}
	if c.TLSClientCAFile != "" {
		pem, err := os.ReadFile(c.TLSClientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("tls-client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("tls-client-ca-file %s: no PEM certificate in it", c.TLSClientCAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, r, nil
}

// validateTLS checks the TLS flags go together.
func (c *Config) validateTLS() error {
	switch {
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return errors.New("tls-cert-file and tls-key-file go together")
	case c.TLSClientCAFile != "" && c.TLSCertFile == "":
		return errors.New("tls-client-ca-file needs tls-cert-file and tls-key-file: mutual TLS is TLS")
	}
	return nil
}
