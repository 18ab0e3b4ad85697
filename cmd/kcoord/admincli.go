package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// adminCLI is what every "kcoord groups", "kcoord topics" and "kcoord
// users" command shares: where the cluster is, how to reach it (TLS, and
// SASL as whom), and how long a command may take. Each flag also reads
// the KCOORD_ variable of its name; the SASL password only from
// $KCOORD_SASL_PASSWORD or --sasl-password-file, never from a flag.
type adminCLI struct {
	bootstrap string
	timeout   time.Duration

	tls              bool
	tlsCA, tlsCert   string
	tlsKey           string
	saslMechanism    string
	saslUser         string
	saslPasswordFile string
	flags            *pflag.FlagSet
}

// envSASLPassword is the admin commands' SASL password when no
// --sasl-password-file is given.
const envSASLPassword = envPrefix + "SASL_PASSWORD"

// addFlags defines the shared flags on f (a command's persistent flags).
func (g *adminCLI) addFlags(f *pflag.FlagSet) {
	g.flags = f
	f.StringVar(&g.bootstrap, "bootstrap-server", "127.0.0.1:9092", "the cluster's brokers, host:port,... [$KCOORD_BOOTSTRAP_SERVER]")
	g.timeout = defaultCLITimeout
	f.Var(msDuration{&g.timeout}, "timeout", "how long the command may take: milliseconds, as Kafka's tools take it, or a duration (30s)")
	f.BoolVar(&g.tls, "tls", false, "connect over TLS (implied by the other --tls flags) [$KCOORD_TLS]")
	f.StringVar(&g.tlsCA, "tls-ca-file", "", "PEM CA certificates to verify the brokers with (default: the system's) [$KCOORD_TLS_CA_FILE]")
	f.StringVar(&g.tlsCert, "tls-cert-file", "", "PEM client certificate, for a listener that requires one (mutual TLS) [$KCOORD_TLS_CERT_FILE]")
	f.StringVar(&g.tlsKey, "tls-key-file", "", "PEM private key of --tls-cert-file [$KCOORD_TLS_KEY_FILE]")
	f.StringVar(&g.saslMechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 [$KCOORD_SASL_MECHANISM]")
	f.StringVar(&g.saslUser, "sasl-username", "", "SASL user; its password comes from $"+envSASLPassword+" or --sasl-password-file [$KCOORD_SASL_USERNAME]")
	f.StringVar(&g.saslPasswordFile, "sasl-password-file", "", "file holding the SASL password (its first line) [$KCOORD_SASL_PASSWORD_FILE]")
}

// fromEnv fills every shared flag not given on the command line from its
// KCOORD_ variable.
func (g *adminCLI) fromEnv() error {
	var err error
	g.flags.VisitAll(func(f *pflag.Flag) {
		if v := os.Getenv(envName(f.Name)); v != "" && !f.Changed && f.Name != "bootstrap-server" && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("$%s=%q: %w", envName(f.Name), v, e)
			}
		}
	})
	return err
}

// clientOpts are the kgo options of the shared flags: brokers, TLS, SASL.
func (g *adminCLI) clientOpts(cmd *cobra.Command) ([]kgo.Opt, error) {
	if err := g.fromEnv(); err != nil {
		return nil, err
	}
	brokers, err := bootstrapServers(cmd, g.bootstrap)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	if g.tls || g.tlsCA != "" || g.tlsCert != "" || g.tlsKey != "" {
		cfg, err := g.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	mech, err := g.sasl()
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

func (g *adminCLI) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.tlsCA != "" {
		pem, err := os.ReadFile(g.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca-file %s: no PEM certificate in it", g.tlsCA)
		}
	}
	switch {
	case (g.tlsCert == "") != (g.tlsKey == ""):
		return nil, errors.New("--tls-cert-file and --tls-key-file go together")
	case g.tlsCert != "":
		pair, err := tls.LoadX509KeyPair(g.tlsCert, g.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// sasl is the SASL mechanism of the flags, nil without --sasl-mechanism.
func (g *adminCLI) sasl() (sasl.Mechanism, error) {
	if g.saslMechanism == "" {
		if g.saslUser != "" {
			return nil, errors.New("--sasl-username needs --sasl-mechanism")
		}
		return nil, nil
	}
	if g.saslUser == "" {
		return nil, errors.New("--sasl-mechanism needs --sasl-username")
	}
	pass, err := secret(g.saslPasswordFile, "--sasl-password-file", envSASLPassword)
	if err != nil {
		return nil, err
	}
	switch strings.ToUpper(g.saslMechanism) {
	case "PLAIN":
		return plain.Auth{User: g.saslUser, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: g.saslUser, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: g.saslUser, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", g.saslMechanism)
}

// secret reads a password from file (its first line) or, without one,
// from the environment variable env; either must give one.
func secret(file, flag, env string) (string, error) {
	if file == "" {
		if v := os.Getenv(env); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("no password: set $%s or %s", env, flag)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSuffix(line, "\r"); line == "" {
		return "", fmt.Errorf("%s %s: the first line is empty", flag, file)
	}
	return line, nil
}

// admin connects to the cluster of cmd's flags and returns a context
// bounded by --timeout; the caller calls done when finished.
func (g *adminCLI) admin(cmd *cobra.Command) (context.Context, *kadm.Client, func(), error) {
	if g.timeout <= 0 {
		return nil, nil, nil, errors.New("--timeout must be positive")
	}
	opts, err := g.clientOpts(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	return ctx, kadm.NewClient(cl), func() { cancel(); cl.Close() }, nil
}
